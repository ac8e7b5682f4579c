"""The candidate's process: runs one candidate's ModelNew for the trusted harness, and nothing
else. Forked from the zygote for each candidate and killed after it, so nothing a candidate does
(patched modules, threads, allocator state, a poisoned CUDA context) reaches the next one.

It holds no reference model, no expected output and no comparison: inputs arrive as shared
buffers, outputs leave by being copied into shared buffers the harness owns, and the harness
judges them. Everything here may be tampered with by the candidate once its code has run; what
it reports (flags, output structure, event times) is the candidate's claim, which the harness
only uses where a lie cannot help the candidate (a claimed mismatch only fails it; event times
are cross-checked against the harness's own clock).

Commands (harness -> runner, each answered once with the same id; see harness.py):
  hello, calibrate, load, inputs, run, timing_setup, warmup, time, refill, profile, build, exit.
Any exception of the candidate's becomes {"id", "error": "compile"|"runtime", "excerpt"}."""

import contextlib
import importlib
import os
import tempfile
import time
import traceback

import torch

from . import cudart
from .channel import ChannelClosed
from .common import CandidateError, DISCARD_FIRST, format_exception, truncate
from .extension_builds import prepare_host_compiler_wrapper
from .guards import FlagState, NamespaceGuard
from .modules import exec_module, seed_everything
from .shared_tensors import SharedView, clone_args, decode_value, dtype_name, dtype_of
from .timing import TrialPlan, flush_buffer, timed_loop
from .write_fence import restrict_writes

# captured before any candidate code runs: a candidate that replaces these module attributes
# does not change what the timing loop calls (the harness's wall clock checks the rest)
_perf_counter = time.perf_counter
_Event = None
_synchronize = None


class Runner:
    def __init__(self, channel, cuda):
        self.ch = channel
        self.cuda = cuda
        self.device = "cuda:0" if cuda else "cpu"
        self.shared = SharedView(self.device)
        if cuda:
            # loaded before the snapshot: importing it sets attributes the guard watches
            importlib.import_module("torch.profiler")
        self.guard = NamespaceGuard()
        self.flag_state = FlagState()
        self.baseline = self.flag_state.snapshot()
        self.flags = set()
        self.patched = []     # names of torch functions the candidate replaced (put back)
        self.files = []
        self.replacements = []
        self.model = None
        self.pristine = []    # input sets, shared with the harness (read only, by contract)
        self.cand_sets = []   # the candidate's own copies for timing
        self.flush = None
        self.dtype = torch.float32
        self.l2_bytes = 0
        if cuda:
            global _Event, _synchronize
            torch.cuda.set_device(0)
            torch.cuda.init()
            _Event = torch.cuda.Event
            _synchronize = torch.cuda.synchronize
            props = torch.cuda.get_device_properties(0)
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)

    # -- the loop ------------------------------------------------------------------------------

    def serve(self):
        ops = {"hello": self.op_hello, "calibrate": self.op_calibrate, "load": self.op_load,
               "inputs": self.op_inputs, "run": self.op_run, "timing_setup": self.op_timing_setup,
               "warmup": self.op_warmup, "time": self.op_time, "refill": self.op_refill,
               "profile": self.op_profile, "build": self.op_build}
        while True:
            try:
                msg, fds = self.ch.receive()
            except ChannelClosed:
                return  # the harness is done with this candidate
            rid = msg.get("id")
            op = msg.get("op")
            if op == "exit":
                self.ch.send({"id": rid, "ok": True})
                return
            try:
                if op not in ops:
                    raise ValueError("unknown op %r" % op)
                ans = ops[op](msg, fds)
                ans["id"] = rid
            except CandidateError as e:
                ans = {"id": rid, "error": e.kind, "excerpt": e.excerpt}
            except BaseException as e:  # noqa: BLE001 - the candidate's process, the candidate's fault
                ans = {"id": rid, "error": "runtime",
                       "excerpt": format_exception(e, self.files, self.replacements)}
            finally:
                for fd in fds:
                    os.close(fd)
            ans["flags"] = sorted(self.flags)
            if self.patched:
                ans["patched"] = self.patched[:20]
            self.ch.send(ans)

    # -- helpers -------------------------------------------------------------------------------

    def _fence_writes(self, work, build_dir):
        """Before the candidate's code: its builds go to build_dir, its temporary files and
        caches (TMPDIR, HOME, Triton's) into its own folder, and from here on this process
        writes nowhere else (write_fence.py). A kernel without Landlock leaves the fence off;
        the worker said so when it started."""
        os.makedirs(build_dir, exist_ok=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
        tmp = os.path.join(work, "tmp")
        os.makedirs(tmp, exist_ok=True)
        os.environ["TMPDIR"] = tmp
        os.environ["HOME"] = work
        os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "triton-cache")
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again
        prepare_host_compiler_wrapper(build_dir)
        if restrict_writes([work, build_dir, "/dev", "/proc"]) == "":
            # the builds read the shared precompiled headers and wish for missing ones
            # (pch_maker.py); the processes they start see it too
            os.environ["KBRL_WRITE_FENCE"] = "on"

    def _seed(self, s):
        seed_everything(s, self.cuda)

    def _after_candidate_code(self):
        """Undoes replaced torch functions (flag: monkeypatch) and notes changed global numeric
        settings (flag: torch_flags_changed); the baseline settings are put back before every
        call of the candidate, so it is timed and checked as the reference is."""
        changed = self.guard.check_and_restore()
        if changed:
            self.flags.add("monkeypatch")
            self.patched.extend(n for n in changed if n not in self.patched)
        if self.flag_state.snapshot() != self.baseline:
            self.flags.add("torch_flags_changed")
            self.flag_state.apply(self.baseline)

    def _device_errors(self, during):
        """After the candidate's code: a synchronize and the runtime's last error, so that a
        failed launch or an asynchronous fault is the candidate's, named by its CUDA error."""
        if not self.cuda:
            return
        try:
            _synchronize()
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(
                e, self.files, self.replacements, with_frames=False,
                headline="the device reported an error at the synchronize after %s (an "
                         "asynchronous error of the candidate's kernels):" % during))
        err = cudart.last_error()
        if err:
            raise CandidateError("runtime", "CUDA error %s\n(a kernel launch of the candidate "
                                            "failed during %s; found by cudaGetLastError)" % (
                                                err, during))

    def _call(self, args, during):
        self.flag_state.apply(self.baseline)
        try:
            with torch.no_grad():
                out = self.model(*args)
        except CandidateError:
            raise
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(e, self.files, self.replacements))
        finally:
            self._after_candidate_code()
        self._device_errors(during)
        return out

    def _load_module(self, source, path, name):
        self.files.append(path)
        return exec_module(source, path, name)

    def _args(self, spec, fds):
        """{"shared": descriptor} for tensors, {"value": encoded} for plain values; null for an
        output that is not a tensor."""
        out = []
        for a in spec:
            if isinstance(a, dict) and "shared" in a:
                out.append(self.shared.open(a["shared"], fds))
            elif isinstance(a, dict) and "value" in a:
                out.append(decode_value(a["value"]))
            else:
                out.append(None)
        return out

    _clone = staticmethod(clone_args)

    @staticmethod
    def _storage_ptr(t):
        try:
            return t.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001
            return t.data_ptr()

    def _deliver(self, out, out_bufs, args):
        """Describes the output and copies it into the harness's buffers when its structure
        matches them. Returns (meta, is_seq)."""
        is_seq = isinstance(out, (tuple, list))
        leaves = list(out) if is_seq else [out]
        in_ptrs = {self._storage_ptr(a) for a in args if isinstance(a, torch.Tensor)
                   and a.numel() > 0}
        meta = []
        for leaf in leaves:
            if type(leaf) is torch.Tensor:
                meta.append({"type": "Tensor", "shape": list(leaf.shape),
                             "dtype": dtype_name(leaf.dtype), "device_type": leaf.device.type})
                if leaf.numel() > 0 and self._storage_ptr(leaf) in in_ptrs:
                    self.flags.add("output_aliases_input")
            elif isinstance(leaf, torch.Tensor):
                self.flags.add("non_tensor_output")
                meta.append({"type": type(leaf).__name__})
            elif isinstance(leaf, (bool, int, float, str)) or leaf is None:
                meta.append({"type": type(leaf).__name__, "value": leaf})
            else:
                self.flags.add("non_tensor_output")
                meta.append({"type": type(leaf).__name__})
        if len(leaves) == len(out_bufs):
            for leaf, buf in zip(leaves, out_bufs):
                if (buf is not None and type(leaf) is torch.Tensor and leaf.shape == buf.shape
                        and leaf.dtype == buf.dtype and leaf.device.type == buf.device.type):
                    buf.copy_(leaf)
        if self.cuda:
            _synchronize()
        return meta, is_seq

    def _poison(self, out_bufs, pattern):
        """Fills freed memory the size of each output with a pattern, so that an output that is
        never written (torch.empty returned as is) shows the pattern instead of a result that
        happened to be left in the allocator's cache."""
        for buf in out_bufs:
            if buf is None:
                continue
            t = torch.empty(buf.shape, dtype=buf.dtype, device=self.device)
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan") if pattern == 0 else 1e30 if t.dtype != torch.float16
                        else 6e4)
            elif t.dtype == torch.bool:
                t.fill_(pattern % 2 == 0)
            else:
                t.fill_(-1 - pattern)
            del t

    def _inputs_modified(self, pristine, used):
        for a, b in zip(pristine, used):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.shape != b.shape or not torch.equal(a, b):
                    if not (a.is_floating_point() and a.shape == b.shape
                            and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())):
                        self.flags.add("inputs_modified")
                        return True
        return False

    # -- ops -----------------------------------------------------------------------------------

    def op_hello(self, msg, fds):
        if self.cuda and msg.get("warm_profiler"):
            # the profiler's first use in a process (Kineto, CUPTI) costs seconds: paid here,
            # before the candidate arrives, instead of inside its evaluation
            from .coverage import warm_up
            warm_up()
            # the profiler's first use sets torch attributes of its own: the guard's picture
            # of an untouched torch is taken again, still before any candidate code
            self.guard = NamespaceGuard()
            self.baseline = self.flag_state.snapshot()
        return {"ok": True, "pid": os.getpid()}

    def op_calibrate(self, msg, fds):
        """The timing loop around a call that does nothing, before any candidate code ran: the
        harness learns the loop's own cost per trial from it (its clock against these events)."""
        self._timing_buffers()
        times = self._timed_loop(lambda args: None, [[]], TrialPlan(int(msg["trials"])), None)
        return {"times": times}

    def op_load(self, msg, fds):
        self.dtype = dtype_of(msg["dtype"])
        self.baseline = self.flag_state.snapshot()
        work = msg["dir"]
        os.makedirs(work, exist_ok=True)
        build_dir = msg["build_dir"]
        self.replacements = [(work + os.sep, ""), (build_dir, "<build_dir>")]
        self._fence_writes(work, build_dir)
        path = os.path.join(work, "candidate.py")
        t0 = _perf_counter()
        try:
            mod = self._load_module(msg["candidate"], path, "kbrl_candidate_%d" % os.getpid())
        except SyntaxError as e:
            text = "".join(traceback.format_exception_only(type(e), e))
            for old, new in self.replacements:
                text = text.replace(old, new)
            raise CandidateError("compile", truncate(text.rstrip()))
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("compile", format_exception(e, self.files, self.replacements))
        finally:
            self._after_candidate_code()
        cls = getattr(mod, "ModelNew", None)
        if cls is None:
            raise CandidateError("compile", "the candidate program defines no ModelNew")
        if not callable(cls):
            raise CandidateError("compile", "ModelNew is not a class")
        init = self._args(msg["init"], fds)
        # init_on = device: the GPU as default device while ModelNew is built, as the harness
        # built the reference (the same seed then gives both the GPU generator's weights)
        where = (torch.device(self.device) if msg.get("init_on") == "device"
                 and hasattr(torch.device, "__enter__") else contextlib.nullcontext())
        try:
            with torch.no_grad(), where:
                self._seed(int(msg["seed"]))
                model = cls(*init)
        except BaseException as e:  # noqa: BLE001
            text = format_exception(e, self.files, self.replacements,
                                    headline="ModelNew(*get_init_inputs()) failed:")
            raise CandidateError("compile" if _is_build_failure(e) else "runtime_init", text)
        finally:
            self._after_candidate_code()
        compile_s = _perf_counter() - t0
        try:
            with torch.no_grad():
                if not hasattr(model, "forward") and not callable(model):
                    raise TypeError("ModelNew instance is not callable")
                if isinstance(model, torch.nn.Module):
                    model = model.to(device=self.device, dtype=self.dtype)
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(e, self.files, self.replacements))
        finally:
            self._after_candidate_code()
        self._device_errors("the candidate's construction")
        self.model = model
        return {"ok": True, "compile_seconds": compile_s}

    def op_inputs(self, msg, fds):
        """The input sets, shared by the harness; earlier ones are unmapped (their buffers are
        the harness's to free)."""
        self.pristine = []
        self.cand_sets = []
        keep = {int(a["shared"]["key"]) for a in msg.get("keep", [])}
        keep |= {int(a["shared"]["key"]) for s in msg["sets"] for a in s
                 if isinstance(a, dict) and "shared" in a}
        self.shared.release(keep)
        self.pristine = [self._args(s, fds) for s in msg["sets"]]
        return {"ok": True}

    def op_run(self, msg, fds):
        """One checked call on a fresh copy of an input set."""
        out_bufs = self._args(msg["out"], fds)
        pristine = self.pristine[int(msg["set"])]
        args = self._clone(pristine)
        if msg.get("poison") is not None:
            self._poison(out_bufs, int(msg["poison"]))
        if msg.get("seed") is not None:
            self._seed(int(msg["seed"]))
        out = self._call(args, "a correctness trial")
        meta, is_seq = self._deliver(out, out_bufs, args)
        del out
        modified = self._inputs_modified(pristine, args)
        return {"meta": meta, "is_seq": is_seq, "inputs_modified": modified}

    def _timing_buffers(self):
        if self.cuda and self.flush is None:
            self.flush = flush_buffer(self.device, self.l2_bytes)

    def op_timing_setup(self, msg, fds):
        self.cand_sets = [self._clone(s) for s in self.pristine]
        if self.cuda:
            torch.cuda.empty_cache()
        self._timing_buffers()
        return {"ok": True}

    def op_warmup(self, msg, fds):
        k = len(self.cand_sets)
        for i in range(int(msg["runs"])):
            out = self._call(self.cand_sets[i % k], "warm-up")
            del out
        return {"ok": True}

    def _timed_loop(self, call, arg_sets, plan, on_checked, before_trial=None):
        return timed_loop(call, arg_sets, plan, self.flush if self.cuda else None, on_checked,
                          event=_Event, synchronize=_synchronize, perf_counter=_perf_counter,
                          before_trial=before_trial)

    def op_time(self, msg, fds):
        out_bufs = self._args(msg["out"], fds)
        plan = TrialPlan.from_message(msg["plan"])
        rid = msg["id"]

        def call(args):
            return self.model(*args)

        def before_trial():
            # torch's flags as they were before the candidate ran (a candidate that turns TF32
            # on inside forward() gets it off again), outside the timed window: the reference's
            # loop does no such work, and timing it here cost every candidate ~5 us a call
            self.flag_state.apply(self.baseline)

        def on_checked(t, set_index, out, checked):
            if not checked:
                return
            self._after_candidate_code()
            self._device_errors("a timed trial")
            # the harness's clock for the unchecked trials stops when this message arrives
            self.ch.send({"id": rid, "check_begins": t})
            meta, is_seq = self._deliver(out, out_bufs, self.cand_sets[set_index])
            self.ch.send({"id": rid, "check": t - DISCARD_FIRST, "set": set_index,
                          "meta": meta, "is_seq": is_seq})
            go, _ = self.ch.receive()
            if go.get("id") != rid:
                raise CandidateError("runtime", "the timing loop lost its harness")

        try:
            with torch.no_grad():  # around the loop, as the reference's (timing.time_calls)
                times = self._timed_loop(call, self.cand_sets, plan, on_checked, before_trial)
        except CandidateError:
            raise
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(
                e, self.files, self.replacements, headline="failed while timed:"))
        finally:
            self._after_candidate_code()
        self._device_errors("timing")
        for a, b in zip(self.pristine, self.cand_sets):
            self._inputs_modified(a, b)
        return {"times": times}

    def op_refill(self, msg, fds):
        """The candidate's timing input set i gets set j's values in place: an output cached by
        the tensors' identity shows."""
        i, j = int(msg["i"]), int(msg["j"])
        out_bufs = self._args(msg["out"], fds)
        for dst, src in zip(self.cand_sets[i], self.pristine[j]):
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                dst.copy_(src)
        if msg.get("seed") is not None:
            self._seed(int(msg["seed"]))
        out = self._call(self.cand_sets[i], "the cached-output check")
        meta, is_seq = self._deliver(out, out_bufs, self.cand_sets[i])
        return {"meta": meta, "is_seq": is_seq}

    def op_profile(self, msg, fds):
        from .coverage import profile_call
        args = self._clone(self.pristine[0])
        return profile_call(lambda: self._call(args, "the profiled call"), self.files,
                            msg.get("own_names", []))

    def op_build(self, msg, fds):
        """Runs a candidate program's module-level code (where load_inline is called) so that its
        extensions are built into build_dir; nothing runs on a device."""
        work = msg["dir"]
        os.makedirs(work, exist_ok=True)
        build_dir = msg["build_dir"]
        nice = int(msg.get("nice", 0))
        if nice > 0:
            os.nice(nice)  # below the evaluations sharing the machine (worker.BUILD_NICE)
        self._fence_writes(work, build_dir)
        self.replacements = [(work + os.sep, ""), (build_dir, "<build_dir>")]
        path = os.path.join(work, "candidate.py")
        try:
            self._load_module(msg["candidate"], path, "kbrl_build_%d" % os.getpid())
        except SyntaxError as e:
            raise CandidateError("compile", truncate("%s: %s (line %s)" % (
                type(e).__name__, e.msg, e.lineno)))
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("compile", format_exception(e, self.files, self.replacements))
        return {"ok": True}


def _is_build_failure(e):
    seen = 0
    while e is not None and seen < 5:
        msg = str(e)
        if "Error building extension" in msg or "ninja" in msg and "error" in msg.lower():
            return True
        if type(e).__name__ in ("CompilationError", "CalledProcessError"):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False
