"""Runs tools/kbrl_eval_worker.py unchanged, with pch_maker.collect wrapped so that what it
sees and decides is printed to the worker's stderr (worker_output.txt): worker.py calls
collect without a log, so its refusal reasons are otherwise invisible. Measurement aid only.

    python3 -u -B collect_log_hook.py WORKER [worker arguments]   (via a --python shim)"""
import json
import os
import runpy
import sys
import time

args = [a for a in sys.argv[1:]]
while args and args[0] in ("-u", "-B"):
    args.pop(0)
sys.dont_write_bytecode = True
worker_path = os.path.abspath(args[0])
sys.path.insert(0, os.path.dirname(worker_path))
from kbrl_eval import pch_maker  # noqa: E402

_orig = pch_maker.collect
_n = [0]


def _say(msg):
    sys.stderr.write("[hook %.3f] %s\n" % (time.time(), msg))
    sys.stderr.flush()


def collect(build_dir, log=lambda m: None):
    _n[0] += 1
    folder = os.path.join(build_dir, pch_maker.WISHES)
    running = [p.pid for p in pch_maker._makers if p.poll() is None]
    done = [(p.pid, p.returncode) for p in pch_maker._makers if p.poll() is not None]
    _say("collect #%d build_dir=%s makers running=%s finished(pid,rc)=%s"
         % (_n[0], build_dir, running, done))
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        names = None
        _say("  no wishes folder (%s)" % e.strerror)
    for n in names or []:
        p = os.path.join(folder, n)
        line = "  wish file %s %d bytes" % (n, os.path.getsize(p))
        if n.endswith(".json"):
            try:
                with open(p) as f:
                    w = json.load(f)
                line += " kind=%s compiler=%s nflags=%d" % (w.get("kind"), w.get("compiler"),
                                                            len(w.get("flags") or []))
                if w.get("kind") == "host":
                    with open(p[:-5] + ".h", errors="surrogateescape") as f:
                        prefix = f.read()
                    cache = os.path.join(os.path.dirname(os.path.abspath(build_dir)),
                                         pch_maker.HOST_PCH_DIR)
                    key = os.path.basename(pch_maker.host_folder(cache, w["compiler"],
                                                                 w["flags"], prefix))
                    line += " prefix_lines=%d host_key=%s" % (prefix.count("\n"), key)
                    line += " flags=%s" % json.dumps(w["flags"])
                else:
                    key = os.path.basename(pch_maker.torch_folder(build_dir, w["compiler"],
                                                                  w["flags"]))
                    line += " torch_key=%s" % key
            except Exception as e:  # noqa: BLE001
                line += " (unreadable: %s)" % e
        _say(line)
    before = len(pch_maker._makers)
    t0 = time.time()
    started = _orig(build_dir, log=lambda m: _say("pch_maker: " + m))
    _say("collect #%d started %d maker(s) pids=%s in %.3fs" % (
        _n[0], started, [p.pid for p in pch_maker._makers[before:]] if started else [],
        time.time() - t0))
    return started


pch_maker.collect = collect
sys.argv = args
runpy.run_path(worker_path, run_name="__main__")
