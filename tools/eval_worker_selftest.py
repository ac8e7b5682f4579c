#!/usr/bin/env python3
"""Drives tools/kbrl_eval_worker.py the way the C++ evaluator does, for tests and by hand.

Starts the worker with its protocol pipes on fds 3 (requests) and 4 (answers), its stdout and
stderr in a capture file, says hello, and then either

  * evaluates candidates against one reference and prints each answer as JSON:
        /usr/bin/python3 tools/eval_worker_selftest.py --reference R.py --candidate C.py \
            [--candidate C2.py ...] [--trials 5 --perf-trials 10 --precision fp32 ...]
  * or runs the suite (--suite): every candidate in test/data/candidates_runtime against the
    problem its header names, checking the expectations written in that header
        # kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_flags=cached_output
    plus protocol checks (malformed line, unknown op, stats, canary, exit). Exits 1 on a failure.

Header keys: problem, expect_error (none|compile|runtime|mismatch|timeout|infrastructure|
crashed|killed), expect_correct, expect_compiled, expect_sticky, expect_flags (comma list, the
exact set; default none), allow_flags, expect_kernelbench_correct (KernelBench's own verdict),
expect_excerpt (a text the error excerpt must contain), expect_init_on (where the answer says
the models were built), requires (cpu|cuda|triton), and request overrides: precision,
backend, trials, perf_trials, warmup, timeout_s, memory_limit_mb, init_on, deadline_s (the
driver's own kill deadline).
A key with the suffix _cuda or _cpu (expect_error_cuda=mismatch) applies on that device only.
"""

import argparse
import fcntl
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "kbrl_eval_worker.py")
PROBLEMS = os.path.join(ROOT, "test", "data", "problems")
CANDIDATES = os.path.join(ROOT, "test", "data", "candidates_runtime")


class WorkerGone(Exception):
    def __init__(self, kind, text):
        super().__init__(text)
        self.kind = kind  # "crashed" or "killed"


class WorkerProc:
    """One worker process with the C++ evaluator's descriptor layout."""

    def __init__(self, python, device, scratch, extensions_dir):
        self.python = python
        self.device = device
        self.scratch = scratch
        self.extensions_dir = extensions_dir
        self.proc = None
        self.pending = b""
        self.capture_path = os.path.join(scratch, "worker_output.txt")
        self.capture_offset = 0
        self.next_id = 1
        self.start_seconds = 0.0

    def start(self, evaluates=True):
        """Starts the worker and says hello as the C++ evaluator does (a builder's hello says
        evaluates: false); returns the hello answer."""
        os.makedirs(self.scratch, exist_ok=True)
        os.makedirs(self.extensions_dir, exist_ok=True)
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        # the child's ends above 9 and close-on-exec; the child copies them onto 3 and 4
        child_in = fcntl.fcntl(req_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(ans_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(req_r)
        os.close(ans_w)

        def place_fds():
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        env = dict(os.environ)
        env.update({"TORCH_EXTENSIONS_DIR": self.extensions_dir, "PYTHONUNBUFFERED": "1",
                    "PYTHONDONTWRITEBYTECODE": "1"})
        if self.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [self.python, "-u", "-B", WORKER, "--in-fd", "3", "--out-fd", "4",
               "--scratch", self.scratch]
        if self.device:
            cmd += ["--device", self.device]
        capture = open(self.capture_path, "ab")
        self.capture_offset = capture.tell()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=capture,
                                     stderr=capture, close_fds=False, preexec_fn=place_fds,
                                     start_new_session=True, env=env, cwd=self.scratch)
        capture.close()
        os.close(child_in)
        os.close(child_out)
        self.to_worker = req_w
        self.from_worker = ans_r
        self.pending = b""
        hello = self.call({"op": "hello", "evaluates": evaluates}, deadline=300)
        self.start_seconds = time.perf_counter() - t0
        return hello

    def call(self, request, deadline):
        """Sends a request (an id is added) and waits for its answer, at most deadline s."""
        if "id" not in request:
            request = dict(request, id=self.next_id)
            self.next_id += 1
        return self.call_raw(json.dumps(request), deadline)

    def call_raw(self, line, deadline):
        if self.proc is None or self.proc.poll() is not None:
            raise WorkerGone("crashed", "the worker is not running")
        try:
            os.write(self.to_worker, (line + "\n").encode("utf-8"))
        except BrokenPipeError:
            raise WorkerGone("crashed", self._describe_exit())
        until = time.monotonic() + deadline
        while b"\n" not in self.pending:
            left = until - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerGone("killed", "no answer within %gs; the worker was killed" % deadline)
            ready, _, _ = select.select([self.from_worker], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.from_worker, 1 << 16)
            if not chunk:
                self.kill()
                raise WorkerGone("crashed", self._describe_exit())
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line.decode("utf-8"))

    def _describe_exit(self):
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "the worker closed its answer pipe"
        if rc < 0:
            try:
                return "the worker was killed by %s" % signal.Signals(-rc).name
            except ValueError:
                return "the worker was killed by signal %d" % -rc
        return "the worker exited with status %d" % rc

    def take_output(self):
        """(bytes the worker's stdout/stderr got since the last take, the last 300 chars)."""
        try:
            with open(self.capture_path, "rb") as f:
                f.seek(0, 2)
                end = f.tell()
                n = end - self.capture_offset
                f.seek(max(self.capture_offset, end - 300))
                tail = f.read().decode("utf-8", "replace")
            self.capture_offset = end
            return n, tail
        except OSError:
            return 0, ""

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.close_pipes()

    def close_pipes(self):
        for name in ("to_worker", "from_worker"):
            fd = getattr(self, name, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None)

    def exit(self):
        ans = self.call({"op": "exit"}, deadline=30)
        rc = self.proc.wait(timeout=30)
        self.close_pipes()
        return ans, rc


# ---------------------------------------------------------------------------------------------


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def parse_header(path):
    """The key=value pairs of the '# kbrl-test:' lines at the top of a candidate."""
    meta = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i > 15:
                break
            if line.startswith("# kbrl-test:"):
                for item in line[len("# kbrl-test:"):].split():
                    k, _, v = item.partition("=")
                    meta[k] = v
    return meta


def make_request(args, reference, candidate, meta=None):
    meta = meta or {}
    req = {"op": "evaluate", "reference": reference, "candidate": candidate,
           "backend": meta.get("backend", args.backend),
           "precision": meta.get("precision", args.precision),
           "correctness_trials": int(meta.get("trials", args.trials)),
           "perf_trials": int(meta.get("perf_trials", args.perf_trials)),
           "warmup_runs": int(meta.get("warmup", args.warmup)),
           "seed": args.seed, "atol": args.atol, "rtol": args.rtol,
           "time_reference": not args.no_time_reference,
           "timeout_s": float(meta.get("timeout_s", args.timeout))}
    if "memory_limit_mb" in meta:
        req["memory_limit_mb"] = float(meta["memory_limit_mb"])
    if "init_on" in meta:
        req["init_on"] = meta["init_on"]
    if args.build_dir:
        req["build_dir"] = args.build_dir
    return req


def evaluate(worker, req, deadline):
    t0 = time.perf_counter()
    try:
        ans = worker.call(req, deadline)
        gone = None
    except WorkerGone as e:
        ans = {"error": e.kind, "error_excerpt": str(e)}
        gone = e.kind
    seconds = time.perf_counter() - t0
    nbytes, tail = worker.take_output()
    return ans, gone, seconds, nbytes, tail


def summary(ans):
    keys = ("compiled", "correct", "trials_passed", "trials_total", "error", "hack_flags",
            "sticky_cuda_error")
    out = {k: ans[k] for k in keys if k in ans}
    for k in ("kernel_runtime", "reference_runtime"):
        if k in ans and ans[k].get("trials"):
            out[k] = "%.4f ms median, %.4f mean (%d)" % (
                ans[k]["median_ms"], ans[k]["mean_ms"], ans[k]["trials"])
    for k in ("compile_seconds", "correctness_seconds", "timing_seconds", "reference_seconds"):
        if k in ans:
            out[k] = round(ans[k], 4)
    return out


def for_device(meta, cuda):
    """Header keys ending in _cuda / _cpu override the plain key on that kind of device."""
    eff = dict(meta)
    suffix, other = ("_cuda", "_cpu") if cuda else ("_cpu", "_cuda")
    for k, v in meta.items():
        if k.endswith(suffix):
            eff[k[:-len(suffix)]] = v
    return {k: v for k, v in eff.items() if not k.endswith(suffix) and not k.endswith(other)}


def check_expectations(meta, ans):
    problems = []
    err = ans.get("error")
    want = meta.get("expect_error")
    if want and err != want:
        problems.append("error %r, expected %r" % (err, want))
    for key, field in (("expect_correct", "correct"), ("expect_compiled", "compiled"),
                       ("expect_sticky", "sticky_cuda_error"),
                       ("expect_kernelbench_correct", "kernelbench_correct")):
        if key in meta and err not in ("crashed", "killed"):
            wantb = meta[key] == "true"
            if bool(ans.get(field)) != wantb:
                problems.append("%s %r, expected %r" % (field, ans.get(field), wantb))
    if "expect_init_on" in meta and ans.get("init_on") != meta["expect_init_on"]:
        problems.append("init_on %r, expected %r" % (ans.get("init_on"), meta["expect_init_on"]))
    if "expect_excerpt" in meta and meta["expect_excerpt"] not in ans.get("error_excerpt", ""):
        problems.append("error_excerpt %r does not name %r" % (
            ans.get("error_excerpt", "")[:300], meta["expect_excerpt"]))
    if err not in ("crashed", "killed"):
        flags = set(ans.get("hack_flags", []))
        want_flags = set(f for f in meta.get("expect_flags", "").split(",") if f)
        allowed = want_flags | set(f for f in meta.get("allow_flags", "").split(",") if f)
        if not want_flags <= flags or not flags <= allowed:
            problems.append("hack_flags %s, expected %s" % (sorted(flags), sorted(want_flags)))
    return problems


def protocol_checks(worker):
    """Answers to malformed and unusual requests; returns a list of failures."""
    bad = []
    a = worker.call_raw("this is not json", 30)
    if a.get("id") != -1 or a.get("ok") is not False:
        bad.append("malformed line answered %r" % a)
    a = worker.call_raw(json.dumps({"op": "stats"}), 30)
    if a.get("id") != -1 or a.get("ok") is not False:
        bad.append("request without id answered %r" % a)
    a = worker.call({"op": "frobnicate", "id": 77}, 30)
    if a != {"id": 77, "ok": False, "error": "unknown op"}:
        bad.append("unknown op answered %r" % a)
    a = worker.call({"op": "canary", "id": 78}, 30)
    if a.get("id") != 78 or a.get("ok") is not True:
        bad.append("canary answered %r" % a)
    a = worker.call({"op": "stats", "id": 79}, 30)
    if a.get("id") != 79 or not a.get("rss_mb", 0) > 0 or "evaluations" not in a:
        bad.append("stats answered %r" % a)
    a = worker.call({"op": "evaluate", "id": 80, "reference": "x = 1"}, 30)
    if a.get("id") != 80 or a.get("error") != "infrastructure":
        bad.append("evaluate without candidate answered %r" % a)
    return bad


def run_suite(args, worker, hello):
    cuda = bool(hello.get("cuda"))
    try:
        import importlib.util
        has_triton = importlib.util.find_spec("triton") is not None
    except Exception:
        has_triton = False
    failures = []
    bad = protocol_checks(worker)
    print("protocol checks: %s" % ("ok" if not bad else "; ".join(bad)))
    failures += ["protocol: " + b for b in bad]
    files = sorted(glob.glob(os.path.join(args.suite_dir, "*.py")))
    if args.only:
        files = [f for f in files if any(o in os.path.basename(f) for o in args.only)]
    results = []
    for path in files:
        name = os.path.basename(path)
        meta = for_device(parse_header(path), cuda)
        if "problem" not in meta:
            continue
        req_ = meta.get("requires", "")
        if (("cuda" in req_ or "triton" in req_) and not cuda or "triton" in req_ and not has_triton
                or req_ == "cpu" and cuda):
            print("%-34s skipped (requires %s)" % (name, req_))
            continue
        if meta.get("expect_error") in ("killed", "crashed") and args.skip_kills:
            print("%-34s skipped (--skip-kills)" % name)
            continue
        req = make_request(args, read(os.path.join(PROBLEMS, meta["problem"])), read(path), meta)
        deadline = float(meta.get("deadline_s", req["timeout_s"] + 60))
        ans, gone, seconds, nbytes, tail = evaluate(worker, req, deadline)
        problems = check_expectations(meta, ans)
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print("%-34s %-5s %6.2fs %s" % (name, status if not problems else "", seconds,
                                        json.dumps(summary(ans))))
        if problems:
            print("    " + status)
            failures.append("%s: %s" % (name, status))
        if args.json or problems:
            ex = ans.get("error_excerpt", "")
            if ex:
                print("    excerpt: " + ex.replace("\n", "\n             "))
        if nbytes:
            print("    candidate output: %d bytes" % nbytes)
        results.append({"candidate": name, "answer": ans, "seconds": seconds,
                        "output_bytes": nbytes, "ok": not problems})
        if gone:
            worker.kill()
            h = worker.start()
            print("    (worker replaced: hello %s in %.2fs)" % (h.get("ok"), worker.start_seconds))
        elif ans.get("sticky_cuda_error"):
            a = worker.call({"op": "canary"}, 60)
            print("    canary after sticky error: %s" % json.dumps(a))
            worker.kill()
            h = worker.start()
            print("    (worker replaced: hello %s in %.2fs)" % (h.get("ok"), worker.start_seconds))
    stats = worker.call({"op": "stats"}, 30)
    print("stats: %s" % json.dumps(stats))
    ans, rc = worker.exit()
    if ans.get("ok") is not True or rc != 0:
        failures.append("exit answered %r, status %r" % (ans, rc))
    print("exit: %s, status %d" % (json.dumps(ans), rc))
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"hello": hello, "results": results, "failures": failures}, f, indent=1)
    print("%d candidates, %d failures" % (len(results), len(failures)))
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", help="reference program (Model, get_inputs, get_init_inputs)")
    ap.add_argument("--candidate", action="append", default=[], help="candidate (ModelNew); repeatable")
    ap.add_argument("--suite", action="store_true", help="run the candidates of --suite-dir")
    ap.add_argument("--suite-dir", default=CANDIDATES)
    ap.add_argument("--only", action="append", help="suite: only candidates whose name contains this")
    ap.add_argument("--skip-kills", action="store_true", help="suite: skip crash/kill candidates")
    ap.add_argument("--json", action="store_true", help="suite: print every excerpt")
    ap.add_argument("--results", help="suite: write all answers to this JSON file")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the worker")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--scratch", help="worker scratch directory (default: a temporary one)")
    ap.add_argument("--build-dir", help="build_dir of the requests")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--atol", type=float, default=-1)
    ap.add_argument("--rtol", type=float, default=-1)
    ap.add_argument("--timeout", type=float, default=120, help="timeout_s of the requests")
    ap.add_argument("--deadline", type=float, help="driver kill deadline (default timeout + 60)")
    ap.add_argument("--no-time-reference", action="store_true")
    ap.add_argument("--keep-scratch", action="store_true")
    args = ap.parse_args()
    if not args.suite and (not args.reference or not args.candidate):
        ap.error("give --reference and --candidate, or --suite")

    scratch = args.scratch or tempfile.mkdtemp(prefix="kbrl_worker_")
    ext_dir = os.path.join(scratch, "torch_extensions")
    worker = WorkerProc(args.python, args.device, scratch, ext_dir)
    rc = 0
    try:
        hello = worker.start()
        print(json.dumps({"hello": hello, "start_seconds": round(worker.start_seconds, 3)}))
        if not hello.get("ok"):
            return 2
        if args.suite:
            rc = run_suite(args, worker, hello)
        else:
            reference = read(args.reference)
            for cand in args.candidate:
                req = make_request(args, reference, read(cand))
                deadline = args.deadline or req["timeout_s"] + 60
                ans, gone, seconds, nbytes, tail = evaluate(worker, req, deadline)
                print(json.dumps({"candidate": cand, "answer": ans, "seconds": round(seconds, 3),
                                  "output_bytes": nbytes, "output_tail": tail}))
                if gone:
                    worker.kill()
                    worker.start()
            print(json.dumps({"stats": worker.call({"op": "stats"}, 30)}))
            ans, code = worker.exit()
            print(json.dumps({"exit": ans, "status": code}))
    except WorkerGone as e:
        print(json.dumps({"worker": e.kind, "error": str(e)}))
        rc = 3
    finally:
        worker.kill()
        if not args.keep_scratch and not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
