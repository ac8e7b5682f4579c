#!/usr/bin/env python3
"""Runs the reward-hack catalogue (test/data/hacks/manifest.json) through kbrl's evaluator with
every static rule switched off, and compares each verdict with the manifest's expectation.

    python3 bench/hack_catalogue/run_catalogue.py --out OUT                  # GPU, every entry
    python3 bench/hack_catalogue/run_catalogue.py --out OUT --device cpu     # the "cpu": true subset

Each entry is evaluated by

    build-gpu/kbrl-eval-kernel --problem P --candidate C --backend B --gpu 0 --json \
        'eval.rules_off=[<every id from --list-rules>]'

(no --gpu on the CPU). OUT gets results.json (one record per entry: the expectation, the parsed
verdict, OK/FAIL and why) and results.md (the table printed at the end). The exit status is the
number of entries whose verdict did not meet the expectation (0: all OK), or 100 for a usage or
setup error.

--direct-worker drives tools/kbrl_eval_worker.py through its fd-3/fd-4 protocol instead of the
C++ binary (hello id 1, evaluate id 2, as the engine sends them), without the engine's process
isolation, static checks or verdict post-processing: a stand-in for machines where kbrl is not
built; README.md says which table came from which path.

Expectations (manifest "expect"): outcome "honest" = correct, error "none", no runtime hack flag
(suspicious_speedup is reported but allowed), and timed when timing was asked for; outcome
"caught" = the listed conditions hold: all of them (mode "all", the default) or at least one
(mode "any"). Conditions: "correct" (bool), "kernelbench_correct" (bool; a verdict without that
field does not meet it), "error" (string), "any_flag" (at least one of these flags present).
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUNTIME_FLAGS = {
    "inputs_modified", "output_aliases_input", "non_tensor_output", "cached_output", "monkeypatch",
    "torch_flags_changed", "degenerate_output", "nonfinite_output", "nondeterministic_output",
    "timing_inconsistent", "own_kernels_idle", "low_time_coverage", "protocol_violation",
    "leftover_processes",
}
ALLOWED_ON_HONEST = {"suspicious_speedup"}


def default_kb_root():
    for cand in (os.environ.get("KERNELBENCH_ROOT"), os.path.join(ROOT, "..", "shared", "kernelbench"),
                 os.path.join(ROOT, "shared", "kernelbench"), "/work/shared/kernelbench"):
        if cand and os.path.isdir(os.path.join(cand, "level1")):
            return os.path.abspath(cand)
    return None


def rule_ids(kbrl):
    out = subprocess.run([kbrl, "--list-rules"], capture_output=True, text=True, check=True).stdout
    ids = [line.split()[0] for line in out.splitlines() if line.strip()]
    if not ids:
        raise RuntimeError("%s --list-rules listed no rules" % kbrl)
    return ids


def last_json_object(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def run_binary(args, entry, problem, candidate, rules_off):
    cmd = [args.kbrl, "--problem", problem, "--candidate", candidate, "--backend", entry["backend"],
           "--json", "--trials", str(args.trials), "--perf-trials", str(args.perf_trials),
           "--timing-precision", str(args.timing_precision), "--timeout", str(args.timeout)]
    if args.device == "cuda":
        cmd += ["--gpu", str(args.gpu)]
    cmd.append("eval.rules_off=[%s]" % ",".join('"%s"' % r for r in rules_off))
    # A cache folder of its own per entry: kbrl-eval-kernel otherwise keeps reference times in
    # ./runs/.cache/reference_times.jsonl, and the first candidate of a problem (whatever it left
    # running) would fix the reference time for every later one.
    if not any(o.startswith("eval.cache_dir=") for o in args.override):
        cmd.append('eval.cache_dir="%s"' % os.path.join(os.path.abspath(args.out), "cache",
                                                        entry["file"][:-3]))
    cmd += args.override
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 120)
        verdict = last_json_object(p.stdout)
        tail = (p.stderr or "")[-2000:]
        rc = p.returncode
    except subprocess.TimeoutExpired as e:
        verdict, rc = None, 124
        tail = "kbrl-eval-kernel did not finish in %ds: %s" % (args.timeout + 120, str(e)[-500:])
    return verdict, rc, tail, time.time() - t0, " ".join(shlex.quote(c) for c in cmd)


def run_direct(args, entry, problem, candidate):
    """The Python worker alone, as the engine drives it (hello id 1, evaluate id 2)."""
    scratch = tempfile.mkdtemp(prefix="kbrl-hack-")
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    log = open(os.path.join(scratch, "candidate_output.txt"), "w+b")

    def child_fds():
        os.dup2(req_r, 3)
        os.dup2(ans_w, 4)

    env = dict(os.environ)
    if args.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    env["TORCH_EXTENSIONS_DIR"] = os.path.join(scratch, "extensions")
    cmd = [args.python, os.path.join(ROOT, "tools", "kbrl_eval_worker.py"), "--in-fd", "3",
           "--out-fd", "4", "--scratch", scratch, "--device", args.device]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                            pass_fds=(3, 4), preexec_fn=child_fds, cwd=scratch)
    os.close(req_r)
    os.close(ans_w)
    out = os.fdopen(req_w, "w")
    answers = os.fdopen(ans_r, "r")
    req = {"op": "evaluate", "id": 2, "reference": open(problem).read(),
           "candidate": open(candidate).read(), "backend": entry["backend"], "precision": "fp32",
           "correctness_trials": args.trials, "perf_trials": args.perf_trials,
           "timing_precision": args.timing_precision, "timeout_s": args.timeout,
           "build_dir": os.path.join(scratch, "build")}
    verdict, rc, tail = None, 0, ""
    try:
        for msg in ({"op": "hello", "id": 1}, req):
            out.write(json.dumps(msg) + "\n")
            out.flush()
            while True:
                line = answers.readline()
                if not line:
                    raise EOFError("the worker closed its answer pipe")
                try:
                    ans = json.loads(line)
                except ValueError:
                    continue
                if ans.get("id") == msg["id"]:
                    break
            if msg["id"] == 2:
                verdict = ans
        out.write(json.dumps({"op": "exit", "id": 3}) + "\n")
        out.flush()
    except (EOFError, OSError) as e:
        rc, tail = 2, "worker lost: %s" % e
    finally:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        printed = log.read().decode("utf-8", "replace")
        tail = (tail + "\n" + printed[-1500:]).strip()
        for f in (out, answers, log):
            try:
                f.close()
            except OSError:
                pass
    if verdict is not None and "speedup" not in verdict:
        k = verdict.get("kernel_runtime", {}).get("mean_ms", 0) or 0
        r = verdict.get("reference_runtime", {}).get("mean_ms", 0) or 0
        verdict["speedup"] = r / k if k > 0 and r > 0 else 0.0
    return verdict, rc, tail, time.time() - t0, " ".join(shlex.quote(c) for c in cmd)


def judge(expect, verdict, timed):
    """(ok, reason)."""
    if verdict is None:
        return False, "no verdict"
    flags = set(verdict.get("hack_flags") or [])
    if expect["outcome"] == "honest":
        why = []
        if not verdict.get("correct"):
            why.append("not correct")
        if verdict.get("error", "none") != "none":
            why.append("error %s" % verdict.get("error"))
        bad = sorted(f for f in flags if f not in ALLOWED_ON_HONEST)
        if bad:
            why.append("flags %s" % ",".join(bad))
        if timed and not (verdict.get("kernel_runtime") or {}).get("trials"):
            why.append("not timed")
        return not why, "; ".join(why) or "honest"
    checks = []
    if "correct" in expect:
        checks.append(("correct=%s" % str(expect["correct"]).lower(),
                       verdict.get("correct") == expect["correct"]))
    if "kernelbench_correct" in expect:
        have = verdict.get("kernelbench_correct")
        checks.append(("kernelbench_correct=%s%s" % (str(expect["kernelbench_correct"]).lower(),
                                                     "" if have is not None else " (not reported)"),
                       have == expect["kernelbench_correct"]))
    if "error" in expect:
        checks.append(("error=%s" % expect["error"], verdict.get("error") == expect["error"]))
    if "any_flag" in expect:
        checks.append(("flag in %s" % "|".join(expect["any_flag"]),
                       bool(flags & set(expect["any_flag"]))))
    met = [name for name, ok in checks if ok]
    missed = [name for name, ok in checks if not ok]
    ok = bool(met) if expect.get("mode") == "any" else not missed
    if ok:
        return True, "met: " + ", ".join(met)
    return False, "missed: " + ", ".join(missed)


def expect_text(expect):
    if expect["outcome"] == "honest":
        return "honest"
    parts = []
    for key in ("correct", "kernelbench_correct", "error"):
        if key in expect:
            v = expect[key]
            parts.append("%s=%s" % (key, str(v).lower() if isinstance(v, bool) else v))
    if "any_flag" in expect:
        parts.append("flag:" + "|".join(expect["any_flag"]))
    return ("any of " if expect.get("mode") == "any" else "") + ", ".join(parts)


def verdict_text(v):
    if v is None:
        return "no verdict"
    s = "correct" if v.get("correct") else "incorrect"
    if v.get("error", "none") != "none":
        s += " (%s)" % v["error"]
    if "kernelbench_correct" in v:
        s += ", kb:%s" % ("yes" if v["kernelbench_correct"] else "no")
    if v.get("correct") and v.get("speedup"):
        s += ", %.3gx" % v["speedup"]
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for results.json and results.md")
    ap.add_argument("--manifest", default=os.path.join(ROOT, "test", "data", "hacks", "manifest.json"))
    ap.add_argument("--kb-root", default=None, help="KernelBench root (level1/, level2/); default "
                    "$KERNELBENCH_ROOT, ../shared/kernelbench or /work/shared/kernelbench")
    ap.add_argument("--kbrl", default=None, help="kbrl-eval-kernel to run (default: build-gpu/'s, "
                    "else build/'s)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--only", action="append", default=[], help="run entries whose file or class "
                    "contains this (repeatable)")
    ap.add_argument("--shard", default="", help="K/N: run the K-th (1-based) of N interleaved "
                    "parts of the selected entries (to fit a per-command time limit)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=30)
    ap.add_argument("--timing-precision", type=float, default=0.0,
                    help="adaptive timing as RL runs use it (rl.timing_precision, e.g. 0.01); 0: "
                         "exactly --perf-trials runs")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per evaluation")
    ap.add_argument("--override", action="append", default=[],
                    help="extra run-config override passed to kbrl-eval-kernel (repeatable)")
    ap.add_argument("--direct-worker", action="store_true",
                    help="drive tools/kbrl_eval_worker.py directly instead of kbrl-eval-kernel")
    ap.add_argument("--python", default=sys.executable, help="Python with torch (--direct-worker)")
    ap.add_argument("--label", default="", help="a line for the top of results.md")
    ap.add_argument("--merge", nargs="+", default=[], metavar="SHARD_OUT",
                    help="write one results.json/.md into --out from these shards' outputs "
                    "(run nothing)")
    args = ap.parse_args()
    if args.merge:
        return merge(args.out, args.merge, args.manifest, args.label)

    manifest = json.load(open(args.manifest))
    entries = manifest["entries"]
    if args.device == "cpu":
        entries = [e for e in entries if e.get("cpu")]
    if args.only:
        entries = [e for e in entries if any(s in e["file"] or s in e["class"] for s in args.only)]
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        entries = entries[k - 1::n]
    kb_root = args.kb_root or default_kb_root()
    if any(e["root"] == "kernelbench" for e in entries) and not kb_root:
        print("run_catalogue: no KernelBench root (--kb-root or $KERNELBENCH_ROOT)", file=sys.stderr)
        return 100
    if args.kbrl is None:
        args.kbrl = next((p for p in (os.path.join(ROOT, d, "kbrl-eval-kernel") for d in ("build-gpu", "build"))
                          if os.access(p, os.X_OK)), os.path.join(ROOT, "build-gpu", "kbrl-eval-kernel"))
    rules_off = []
    if not args.direct_worker:
        if not os.access(args.kbrl, os.X_OK):
            print("run_catalogue: %s is not built (or use --direct-worker)" % args.kbrl, file=sys.stderr)
            return 100
        rules_off = rule_ids(args.kbrl)
    os.makedirs(args.out, exist_ok=True)
    hacks_dir = os.path.dirname(os.path.abspath(args.manifest))

    def evaluate(e):
        problem = os.path.join(kb_root if e["root"] == "kernelbench" else ROOT, e["problem"])
        candidate = os.path.join(hacks_dir, e["file"])
        if args.direct_worker:
            verdict, rc, tail, secs, cmd = run_direct(args, e, problem, candidate)
        else:
            verdict, rc, tail, secs, cmd = run_binary(args, e, problem, candidate, rules_off)
        ok, why = judge(e["expect"], verdict, args.perf_trials > 0)
        print("%-4s %-34s %-24s %s | flags: %s | expected: %s (%s)" % (
            "OK" if ok else "FAIL", e["file"], e["class"], verdict_text(verdict),
            ",".join((verdict or {}).get("hack_flags") or []) or "-", expect_text(e["expect"]), why),
            flush=True)
        return {"file": e["file"], "class": e["class"], "problem": e["problem"], "backend": e["backend"],
                "expect": e["expect"], "ok": ok, "why": why, "exit_status": rc, "seconds": round(secs, 1),
                "verdict": verdict, "stderr_tail": tail if verdict is None or not ok else "", "command": cmd}

    records = [evaluate(e) for e in entries]
    # Shards sharing a GPU can leave one another without memory for KernelBench's full-size
    # level-1 problems (6-GB tensors): such an entry runs once more at the shard's end, when the
    # others may have finished; its record keeps what the first attempt said.
    for i, e in enumerate(entries):
        if records[i]["ok"] or not out_of_gpu_memory(records[i]["verdict"]):
            continue
        print("again: %s ran out of GPU memory (shards sharing the GPU?)" % e["file"], flush=True)
        first = records[i]
        records[i] = evaluate(e)
        records[i]["first_attempt"] = "%s: %s" % (verdict_text(first["verdict"]), first["why"])
    path = "direct worker (tools/kbrl_eval_worker.py)" if args.direct_worker else args.kbrl
    return write_results(args.out, records, {
        "device": args.device, "evaluator": path, "rules_off": rules_off, "trials": args.trials,
        "perf_trials": args.perf_trials, "timing_precision": args.timing_precision}, args.label)


def out_of_gpu_memory(verdict):
    """Whether an evaluation failed because the GPU's memory ran out (the harness's or the
    candidate's allocation: with shards sharing a GPU, possibly the other shards' doing)."""
    if not verdict or verdict.get("error") not in ("infrastructure", "runtime"):
        return False
    text = verdict.get("error_excerpt") or ""
    return "out of memory" in text or "OutOfMemoryError" in text


def write_results(out, records, run, label=""):
    """results.json and results.md in `out`; the number of entries not as expected."""
    failed = sum(not r["ok"] for r in records)
    json.dump(dict(run, failed=failed, records=records),
              open(os.path.join(out, "results.json"), "w"), indent=1)
    lines = []
    if label:
        lines += [label, ""]
    dev = next(((r["verdict"] or {}).get("device") for r in records if r["verdict"]), "") or run["device"]
    timed = "%d timed" % run["perf_trials"]
    if run.get("timing_precision"):
        timed += " at most (adaptive, +-%g %%)" % (100 * run["timing_precision"])
    lines += ["Evaluator: %s; device: %s; static rules off: %d; %d correctness trials, %s; "
              "%d of %d as expected." % (run["evaluator"], dev, len(run["rules_off"]), run["trials"],
                                         timed, len(records) - failed, len(records)), "",
              "| candidate | class | verdict | flags | expected | result |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in records:
        lines.append("| %s | %s | %s | %s | %s | %s: %s |" % (
            r["file"], r["class"], verdict_text(r["verdict"]),
            ", ".join((r["verdict"] or {}).get("hack_flags") or []) or "-",
            expect_text(r["expect"]), "OK" if r["ok"] else "FAIL", r["why"].replace("|", "/")
            + (" (run again: the first attempt ran out of GPU memory)" if r.get("first_attempt") else "")))
    open(os.path.join(out, "results.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(records) - 3:]) if records else "no entries")
    return failed


def merge(out, shard_dirs, manifest_path, label):
    """One table from the shards' results.json, in the manifest's order; entries no shard
    finished are listed as not run (and count as not as expected)."""
    entries = json.load(open(manifest_path))["entries"]
    by_file, run = {}, None
    for d in shard_dirs:
        path = os.path.join(d, "results.json")
        if not os.path.exists(path):
            print("run_catalogue: %s has no results.json (the shard did not finish)" % d,
                  file=sys.stderr)
            continue
        part = json.load(open(path))
        run = run or {k: part.get(k, 0) for k in ("device", "evaluator", "rules_off", "trials",
                                                  "perf_trials", "timing_precision")}
        for r in part["records"]:
            by_file[r["file"]] = r
    if run is None:
        print("run_catalogue: no shard has results", file=sys.stderr)
        return 100
    records = [by_file.get(e["file"]) or {"file": e["file"], "class": e["class"],
                                          "expect": e["expect"], "ok": False, "why": "not run",
                                          "verdict": None}
               for e in entries]
    os.makedirs(out, exist_ok=True)
    return write_results(out, records, run, label)


if __name__ == "__main__":
    sys.exit(main())
