"""The worker's trusted process: the protocol loop with the C++ evaluator
(runtime/eval/worker_protocol.md) and what it needs across requests - torch on the device, the
zygote of candidate processes, the scratch folder. It never runs candidate code itself: each
candidate runs in a fresh process of its own (harness.py, candidate_process.py), so the protocol
pipes, the reference, the expected outputs and the comparison are out of every candidate's reach.
The process is also made non-dumpable, so that a candidate process of the same user cannot read
its memory or its file descriptors through /proc or ptrace."""

import argparse
import gc
import json
import linecache
import os
import shutil
import signal
import sys
import time
import traceback

from .common import (BudgetExceeded, CandidateError, memory_limit_bytes, now, rss_mb,
                     sanitize, truncate, zero_stats)
from .reference_store import ReferenceStore
from . import write_fence

# Candidate processes kept starting up ahead of their candidates. Each start (CUDA context, the
# profiler's first use) takes about 3.6 s on an H200, so back-to-back candidates of 1-2 s wait
# for a spare ("process_start" in phase_seconds). Two spares left 94.5 s of such waits in the
# 64-candidate benchmark, four 19.5 s (H200, 2026-11-29). KBRL_EVAL_SPARES sets the count
# (each spare holds a CUDA context, about 0.5 GB of GPU memory).
DEFAULT_SPARES = 4


def whole_number_setting(name, text, default, low, high, noun):
    """The value an environment switch (`text`, None when unset) asks for, low to high, and
    what to tell the user when it was not usable as given (else None)."""
    if text is None or text.strip() == "":
        return default, None
    try:
        asked = int(text)
    except ValueError:
        return default, "%s=%r is not a whole number; keeping %d %s" % (name, text, default, noun)
    value = max(low, min(high, asked))
    if value != asked:
        return value, "%s=%d is outside %d-%d; keeping %d %s" % (name, asked, low, high, value,
                                                                noun)
    return value, None


def spares_wanted(text):
    """The spare count KBRL_EVAL_SPARES asks for, 1 to 16 (whole_number_setting)."""
    return whole_number_setting("KBRL_EVAL_SPARES", text, DEFAULT_SPARES, 1, 16,
                                "spare processes")


# Builds ahead of evaluation (op_build) and the makers of what they wish for run at this
# niceness: on a machine that also evaluates, the GPU worker's candidate processes (the spares'
# start-up, the timed runs) get the cores first. KBRL_EVAL_BUILD_NICE sets it (0: as the worker).
DEFAULT_BUILD_NICE = 10


def build_nice_wanted(text):
    """The niceness KBRL_EVAL_BUILD_NICE asks for, 0 to 19 (whole_number_setting)."""
    return whole_number_setting("KBRL_EVAL_BUILD_NICE", text, DEFAULT_BUILD_NICE, 0, 19,
                                "as the builds' niceness")


SPARES, _SPARES_PROBLEM = spares_wanted(os.environ.get("KBRL_EVAL_SPARES"))
BUILD_NICE, _BUILD_NICE_PROBLEM = build_nice_wanted(os.environ.get("KBRL_EVAL_BUILD_NICE"))
for _problem in (_SPARES_PROBLEM, _BUILD_NICE_PROBLEM):
    if _problem:
        print("kbrl evaluation worker: " + _problem, file=sys.stderr, flush=True)
SPARE_READY_S = 600.0  # a spare's own deadline for its hello, until an evaluation takes it

torch = None  # imported in Worker, so a broken torch still gets answers


class Worker:
    def __init__(self, args):
        self.args = args
        self.scratch = os.path.abspath(args.scratch)
        os.makedirs(self.scratch, exist_ok=True)
        self.evaluations = 0
        self.counter = 0
        self.torch_error = None
        self.device = "cpu"
        self.device_name = "cpu"
        self.cuda = False
        self.l2_bytes = 0
        self.torch_version = ""
        self.zygote = None
        self.spares = []  # the next candidates' processes, started ahead (start_spare)
        self.references = ReferenceStore()  # the reference's work, shared across candidates
        self._start_torch()

    def _start_torch(self):
        global torch
        try:
            import torch as _torch
            torch = _torch
            self.torch_version = torch.__version__.split("+")[0]
            want = self.args.device
            if want is None:
                want = "cuda" if torch.cuda.is_available() else "cpu"
            if want == "cuda":
                if not torch.cuda.is_available():
                    raise RuntimeError("--device cuda but torch.cuda.is_available() is false")
                torch.cuda.init()
                torch.cuda.set_device(0)
                self.cuda = True
                self.device = "cuda:0"
                self.device_name = torch.cuda.get_device_name(0)
                props = torch.cuda.get_device_properties(0)
                self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
                from . import fused_compare
                fused_compare.prepare(torch.device("cuda", 0))  # NVRTC now, not in a trial
            from .candidate_process import Zygote
            self.zygote = Zygote("cuda" if self.cuda else "cpu", self.args.no_pch,
                                 getattr(self.args, "full_cuda_header", False))
            self.zygote.ensure()
        except BaseException as e:  # noqa: BLE001 - answered on every request
            self.torch_error = "%s: %s" % (type(e).__name__, e)

    # -- candidate processes ---------------------------------------------------------------------

    def start_spare(self):
        """Tops up the spare candidate processes (from a hello that says the worker evaluates,
        else from the first evaluation on: a worker that only builds needs none). Each starts now, while the worker evaluates or waits, so that
        its CUDA context and the profiler's set-up (about 0.4 s and 3 s on an H200) are paid
        outside the evaluation that takes it. A spare runs no candidate code until an
        evaluation takes it; its start-up overlaps the current evaluation (a CUDA context and
        one tiny profiled kernel in another process)."""
        from .candidate_process import CandidateProcess
        while len(self.spares) < SPARES and not self.torch_error:
            try:
                proc = CandidateProcess(self.zygote, time.monotonic() + SPARE_READY_S)
                proc.say_hello(warm_profiler=self.cuda)
            except Exception:  # noqa: BLE001 - the evaluation then starts its own process
                return
            self.spares.append(proc)

    def drop_spares(self):
        while self.spares:
            try:
                self.spares.pop().close()
            except Exception:  # noqa: BLE001
                pass

    def candidate_process(self, deadline, during, warm_profiler):
        """A candidate process that has answered its hello: the oldest spare when it is
        healthy, else a fresh one (a spare that died before any candidate code ran is no
        candidate's fault). With warm_profiler the process has used the profiler once before
        any candidate code: a process's first profile sets torch attributes (the namespace
        guard would call them the candidate's patches) and can miss kernels."""
        from .candidate_process import CandidateGone, CandidateProcess
        proc = self.spares.pop(0) if self.spares else None
        if proc is not None:
            try:
                proc.ready(deadline, during)
            except (CandidateGone, CandidateError):
                proc.close()
                proc = None
        if proc is None:
            proc = CandidateProcess(self.zygote, deadline)
            proc.say_hello(warm_profiler=warm_profiler and self.cuda)
            proc.ready(deadline, during)
        self.start_spare()  # the next one starts up while this candidate is evaluated
        return proc

    # -- what evaluations use --------------------------------------------------------------------

    def seed(self, s):
        from .modules import seed_everything
        seed_everything(s, self.cuda)

    def load_module(self, source, folder, kind, number, files):
        from .modules import exec_module
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, kind + ".py")
        files.append(path)
        return exec_module(source, path, "kbrl_%s_%d_%d" % (kind, os.getpid(), number))

    def after_evaluation(self, folder, files, keep=()):
        for name in [n for n in sys.modules
                     if n.startswith("kbrl_reference_") and n not in keep]:
            mod = sys.modules.pop(name, None)
            if mod is not None:
                try:
                    mod.__dict__.clear()
                except Exception:  # noqa: BLE001
                    pass
        shutil.rmtree(folder, ignore_errors=True)
        for f in files:
            linecache.checkcache(f)
        gc.collect()

    def release_cached_memory(self):
        """Gives the device memory torch's allocator keeps cached here back, for the next
        candidate's process."""
        if self.cuda:
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass

    def context_ok(self):
        """Runs a tiny known computation on the device; (ok, error text)."""
        try:
            x = torch.arange(1024, device=self.device, dtype=torch.float32) * 2
            s = float(x.sum().item())
            if self.cuda:
                torch.cuda.synchronize()
            if s != 1024.0 * 1023.0:
                return False, "canary computed %r instead of %r" % (s, 1024.0 * 1023.0)
            return True, ""
        except Exception as e:  # noqa: BLE001
            return False, truncate("%s: %s" % (type(e).__name__, e), 1000)

    # -- ops -----------------------------------------------------------------------------------

    def op_hello(self, req):
        if req.get("evaluates") is True:
            # the spares start up (CUDA context, profiler) while the first candidates build,
            # instead of the first evaluations waiting for them
            self.start_spare()
        ans = {"id": req["id"], "ok": self.torch_error is None, "device": self.device_name,
               "torch": self.torch_version, "cuda": self.cuda, "pid": os.getpid(),
               "torch_compile": self.torch_error is None and hasattr(torch, "compile"),
               "isolation": "process", "write_fence": write_fence.probe()}
        if self.torch_error:
            ans["error"] = self.torch_error
        return ans

    def op_canary(self, req):
        if self.torch_error:
            return {"id": req["id"], "ok": False, "error": self.torch_error}
        ok, err = self.context_ok()
        ans = {"id": req["id"], "ok": ok}
        if not ok:
            ans["error"] = err
        return ans

    def op_stats(self, req):
        ans = {"id": req["id"], "rss_mb": rss_mb(), "gpu_allocated_mb": 0.0,
               "gpu_reserved_mb": 0.0, "evaluations": self.evaluations,
               "spares": len(self.spares)}
        if self.cuda:
            try:
                ans["gpu_allocated_mb"] = torch.cuda.memory_allocated() / 2.0 ** 20
                ans["gpu_reserved_mb"] = torch.cuda.memory_reserved() / 2.0 ** 20
            except Exception as e:  # noqa: BLE001
                ans["ok"] = False
                ans["error"] = "%s: %s" % (type(e).__name__, e)
        return ans

    def op_build(self, req):
        """Builds a candidate's extensions ahead of its evaluation, in a candidate process of its
        own (the candidate's module-level code runs there, with TORCH_EXTENSIONS_DIR at the
        hash-keyed build_dir), so the GPU worker later only loads the library."""
        from .candidate_process import CandidateGone, CandidateProcess
        from .common import CandidateError
        import time
        rid = req["id"]
        if self.torch_error:
            return {"id": rid, "ok": False, "error": "infrastructure",
                    "error_excerpt": self.torch_error}
        t0 = now()
        self.counter += 1
        build_dir = req.get("build_dir") or os.path.join(self.scratch, "build")
        work = os.path.join(self.scratch, "build-%d" % self.counter)
        deadline = time.monotonic() + float(req.get("timeout_s", 900))
        proc = None
        try:
            proc = CandidateProcess(self.zygote, deadline)
            proc.watch_memory(memory_limit_bytes(req))
            # its wished headers and main.cpp objects are made at the build's own priority,
            # since the build waits for them
            with self.headers_wished(build_dir, nice=BUILD_NICE):
                proc.request("build", "the build", candidate=req["candidate"], dir=work,
                             build_dir=build_dir, nice=BUILD_NICE)
            ans = {"id": rid, "ok": True, "error": "none", "error_excerpt": ""}
        except CandidateError as e:
            ans = {"id": rid, "ok": False, "error": "compile", "error_excerpt": e.excerpt}
        except CandidateGone as e:
            ans = {"id": rid, "ok": False, "error": "compile" if e.kind != "timeout" else
                   "timeout", "error_excerpt": truncate(str(e))}
        finally:
            if proc is not None:
                proc.close()
            shutil.rmtree(work, ignore_errors=True)
        ans["compile_seconds"] = now() - t0
        return ans

    def op_evaluate(self, req):
        from .harness import Evaluation
        self.evaluations += 1
        self.counter += 1
        with self.headers_wished(self.evaluation_build_dir(req), nice=10):
            return Evaluation(self, req, self.counter).run()

    def evaluation_build_dir(self, req):
        """Where an evaluation's candidate builds its extensions: the request's build_dir, else
        the worker's own folder (the harness asks this too)."""
        return os.path.abspath(str(req.get("build_dir")
                                   or os.path.join(self.scratch, "torch_extensions")))

    def headers_wished(self, build_dir, nice):
        """Around a candidate's build or evaluation: the precompiled headers its fenced build
        wishes for are made meanwhile, by processes that write only their cache folders, and
        the build waits for them (pch_maker.collecting). A wish that is not sound is dropped
        and logged: a missing speed-up, no error."""
        from . import pch_maker
        return pch_maker.collecting(
            build_dir, nice=nice,
            log=lambda m: print("kbrl evaluation worker: " + m, file=sys.stderr, flush=True))


def _on_alarm(signum, frame):
    raise BudgetExceeded("soft wall-clock budget exceeded")


def _failed_evaluate(rid, worker):
    return {"compiled": False, "correct": False, "kernelbench_correct": False,
            "trials_passed": 0, "trials_total": 0, "trials": [], "hack_flags": [],
            "kernel_runtime": zero_stats(), "reference_runtime": zero_stats(),
            "compiled_reference_runtime": zero_stats(), "sticky_cuda_error": False,
            "device": worker.device_name}


def serve(worker, infile, outfile):
    ops = {"hello": worker.op_hello, "evaluate": worker.op_evaluate, "canary": worker.op_canary,
           "stats": worker.op_stats, "build": worker.op_build}
    while True:
        line = infile.readline()
        if not line:
            return 0  # the parent closed our input: leave quietly
        if not line.strip():
            continue
        exit_after = False
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request must be a JSON object")
        except ValueError as e:
            ans = {"id": -1, "ok": False, "error": "malformed request: %s" % e}
        else:
            rid = req.get("id", -1)
            if isinstance(rid, bool) or not isinstance(rid, int):
                ans = {"id": -1, "ok": False, "error": "request without an integer id"}
            else:
                op = req.get("op")
                try:
                    if op == "exit":
                        ans = {"id": rid, "ok": True}
                        exit_after = True
                    elif op in ops:
                        ans = ops[op](req)
                    else:
                        ans = {"id": rid, "ok": False, "error": "unknown op"}
                except BaseException as e:  # noqa: BLE001 - one answer per request, always
                    ans = {"id": rid, "ok": False, "error": "infrastructure",
                           "error_excerpt": truncate("".join(traceback.format_exception(
                               type(e), e, e.__traceback__)), keep="tail")}
                    if op == "evaluate":
                        ans.update(_failed_evaluate(rid, worker))
        try:
            text = json.dumps(ans, allow_nan=False, ensure_ascii=False)
        except (ValueError, TypeError):
            text = json.dumps(sanitize(ans), allow_nan=False, ensure_ascii=False, default=str)
        outfile.write(text + "\n")
        outfile.flush()
        if exit_after:
            return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="kbrl evaluation worker "
                                             "(runtime/eval/worker_protocol.md)")
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--no-pch", action="store_true",
                    default=os.environ.get("KBRL_EVAL_NO_PCH", "") not in ("", "0"),
                    help="build C++ sources without the precompiled torch/extension.h "
                         "(also: KBRL_EVAL_NO_PCH=1)")
    ap.add_argument("--full-cuda-header", action="store_true",
                    default=os.environ.get("KBRL_EVAL_FULL_CUDA_HEADER", "") not in ("", "0"),
                    help="build CUDA sources with the torch headers they name, not first with "
                         "kbrl's light one (also: KBRL_EVAL_FULL_CUDA_HEADER=1)")
    args = ap.parse_args(argv)

    # The protocol pipes: close-on-exec and off the well-known numbers 3 and 4, so that no
    # child (the zygote, compilers) inherits them.
    in_fd = os.dup(args.in_fd)
    out_fd = os.dup(args.out_fd)
    os.close(args.in_fd)
    os.close(args.out_fd)
    infile = os.fdopen(in_fd, "r", encoding="utf-8", errors="replace", newline="\n")
    outfile = os.fdopen(out_fd, "w", encoding="utf-8", errors="replace", newline="\n")

    from .zygote import PR_SET_DUMPABLE, prctl
    prctl(PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # parent gone: die, do not spin
    except (AttributeError, ValueError):
        pass
    worker = Worker(args)
    # Every evaluation ends in a full collection (after_evaluation). What exists now (torch and
    # the other imports: some 160k objects) lives as long as the worker, so the collector stops
    # walking it: about 20 ms less per evaluation. Only startup objects are frozen; an
    # evaluation's own garbage (an evicted reference's module) is collected as before.
    gc.collect()
    gc.freeze()
    try:
        os.chdir(worker.scratch)
    except OSError:
        pass
    rc = serve(worker, infile, outfile)
    worker.drop_spares()
    if worker.zygote is not None:
        worker.zygote.close()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(rc)
