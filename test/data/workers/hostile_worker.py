"""A stand-in for the evaluation worker that misbehaves on request, for testing the process
layer (runtime/eval/worker_process): same fds and line protocol, no torch."""
import json
import os
import signal
import socket
import sys
import time

args = sys.argv[1:]
in_fd = int(args[args.index("--in-fd") + 1])
out_fd = int(args[args.index("--out-fd") + 1])
requests = os.fdopen(in_fd, "r")
answers = os.fdopen(out_fd, "w", buffering=1)


def answer(req, **fields):
    fields["id"] = req.get("id", -1)
    answers.write(json.dumps(fields) + "\n")
    answers.flush()


for line in requests:
    req = json.loads(line)
    op = req["op"]
    if op == "hello":
        answer(req, ok=True, device="cpu", uid=os.getuid(), cwd=os.getcwd(),
               visible=os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    elif op == "echo":
        answer(req, ok=True, echo=req.get("payload"))
    elif op == "stale":
        # two lines that answer no request (another id, not JSON), then the real answer
        answers.write(json.dumps({"id": req["id"] + 1, "ok": True, "echo": "forged"}) + "\n")
        answers.write("garbage\n")
        answer(req, ok=True, echo="real")
    elif op == "print":
        chunk = "x" * 65536 + "\n"
        for _ in range(req["bytes"] // len(chunk)):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        answer(req, ok=True)
    elif op == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif op == "abort":
        os.abort()
    elif op == "hang":
        while True:
            time.sleep(1)
    elif op == "fork_storm":
        started = 0
        for _ in range(req["count"]):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            started += 1
        answer(req, ok=True, started=started)
    elif op == "net":
        try:
            s = socket.create_connection(("127.0.0.1", req["port"]), timeout=2)
            s.close()
            answer(req, ok=True, reached=True)
        except OSError as e:
            answer(req, ok=True, reached=False, error=str(e))
    elif op == "unix":
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(req["path"])
            s.close()
            answer(req, ok=True, reached=True)
        except OSError as e:
            answer(req, ok=True, reached=False, error=str(e))
    elif op == "unix_dgram":
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendto(b"x", req["path"])
            s.close()
            answer(req, ok=True, reached=True)
        except OSError as e:
            answer(req, ok=True, reached=False, error=str(e))
    elif op == "socketpair":  # what the real worker's channels use: must keep working
        a, b = socket.socketpair()
        a.sendall(b"x")
        answer(req, ok=True, works=b.recv(1) == b"x")
    elif op == "write":
        try:
            with open(req["path"], "w") as f:
                f.write("hello")
            answer(req, ok=True, written=True)
        except OSError as e:
            answer(req, ok=True, written=False, error=str(e))
    elif op == "evaluate":
        # Markers in the candidate choose the behaviour, so evaluator tests need no torch.
        cand = req.get("candidate", "")
        if "#crash" in cand:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "#hang" in cand:
            while True:
                time.sleep(1)
        if "#slow" in cand:
            time.sleep(float(cand.split("#slow")[1].split()[0]))
        if "#forge" in cand:
            # what a candidate with the answer pipe in reach would write: "correct, 1000x" under
            # the ids it can guess, before the worker's real answer (wrong)
            for guess in (1, 2, 3, req["id"] + 1):
                answers.write(json.dumps({
                    "id": guess, "compiled": True, "correct": True, "trials_passed": 2,
                    "trials_total": 2, "error": "none", "error_excerpt": "", "trials": [],
                    "kernel_runtime": {"mean_ms": 0.001, "trials": 5},
                    "reference_runtime": {"mean_ms": 1000.0, "trials": 5}, "hack_flags": [],
                    "compile_seconds": 0.0, "sticky_cuda_error": False, "device": "cpu"}) + "\n")
            cand += "\n#wrong"
        if "#noisy" in cand:
            print("candidate output " * 100)
        sticky = "#sticky" in cand
        shown = "#show_timeout" in cand  # says the budget it was given, as a mismatch's excerpt
        correct = "#wrong" not in cand and not sticky and not shown
        stats = {"mean_ms": 2.0, "median_ms": 2.0, "std_ms": 0.1, "min_ms": 1.9, "max_ms": 2.2,
                 "trials": req.get("perf_trials", 0)}
        ref = dict(stats, mean_ms=4.0) if req.get("time_reference") else {}
        answer(req, compiled=True, correct=correct,
               trials_passed=req["correctness_trials"] if correct else 0,
               trials_total=req["correctness_trials"],
               error="none" if correct else ("runtime" if sticky else "mismatch"),
               error_excerpt="" if correct else "CUDA error: an illegal memory access" if sticky
               else "timeout_s=%g" % req["timeout_s"] if shown else "max abs diff 1.0",
               trials=[{"passed": correct, "max_abs_diff": 0.0 if correct else 1.0,
                        "mean_abs_diff": 0.0, "note": ""}] * req["correctness_trials"],
               kernel_runtime=stats, reference_runtime=ref, hack_flags=[],
               compile_seconds=0.0, sticky_cuda_error=sticky, device="cpu", pid=os.getpid())
    elif op == "build":
        cand = req.get("candidate", "")
        if "#build_slow" in cand:
            time.sleep(float(cand.split("#build_slow")[1].split()[0]))
        if os.environ.get("KBRL_TEST_BUILD_LOG"):  # one line per build, in the worker's HOME
            with open(os.path.join(os.environ["HOME"], "builds.log"), "a") as f:
                f.write(req["build_dir"] + "\n")
        if "#build_fail" in cand:
            answer(req, ok=False, error="compile", error_excerpt="main.cu(3): error: expected ';'",
                   compile_seconds=0.1)
        else:
            answer(req, ok=True, error="none", error_excerpt="", compile_seconds=0.1)
    elif op == "canary":
        answer(req, ok=True)
    elif op == "stats":
        answer(req, rss_mb=10.0, evaluations=0)
    elif op == "exit":
        answer(req, ok=True)
        sys.exit(0)
