#!/usr/bin/env python3
"""The KernelBench-protocol baseline of the evaluator-throughput benchmark.

    kernelbench_baseline.py --manifest M --candidates DIR --kernelbench DIR --out results.json
                            [--limit N] [--start K] [--resume] [--device cuda|cpu]
                            [--timeout 600] [--gpu I]

Evaluates the candidates of make_candidates.py the way KernelBench's `eval_kernel_against_ref`
does (src/kernelbench/eval.py and timing.py), one after another, each in a fresh Python process
(sys.executable) with a fresh, empty TORCH_EXTENSIONS_DIR (no build reuse, also not for
byte-identical duplicates):

  1. import torch, first CUDA allocation                                      (startup)
  2. reference: exec the problem source into a context dict; seed(42);
     get_init_inputs(); seed(42); Model(*init)                                 (reference)
  3. candidate: exec its source into the same context (load_inline builds
     here, TORCH_USE_CUDA_DSA=1); seed(42); ModelNew(*init); both models
     .to(device, fp32)                                                         (build)
  4. 5 correctness trials: torch.manual_seed(42) then one
     torch.randint(0, 2**32 - 1, (1,)) per trial; per trial seed, get_inputs(),
     reference and candidate under no_grad, shape check (stops at a
     mismatch), torch.allclose(ref, new, atol=1e-4, rtol=1e-4)                 (correctness)
  5. if correct: seed(42), get_inputs(); cuda_event timing of the candidate:
     3 warm-up calls (each synchronized), empty_cache, 1 + 100 trials (first
     discarded), each: synchronize, new events, L2 flush (a fresh 256 MiB
     int64 tensor filled), record, call, record, synchronize                   (timing)
  6. the same timing for the reference (KernelBench's "excessive speedup"
     check; --reference-timing always times it for every candidate that
     built, as upstream does, the default only for correct ones)               (reference)

The child prints one JSON verdict line; the parent adds the wall time it saw (process start to
exit), writes results.json after every candidate ({"candidates": [...], "total_seconds": T,
"candidates_per_minute": x, ...}) and prints a progress line per candidate. A candidate that runs
past --timeout is killed with its process group (compilers included): error "timeout".
A run can be split (--start/--limit) and continued (--resume): total_seconds is then the sum of
the runs' wall times. --device cpu runs the same protocol on the CPU (perf_counter timing, no
L2 flush) for the C++-only smoke candidates of make_candidates.py --cpu-smoke.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

THIS = os.path.abspath(__file__)
VERDICT_PREFIX = '{"id"'


# =============================================================================================
# the child: one candidate, KernelBench's protocol


def _excerpt(text, limit=3000):
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n[... %d characters left out ...]\n" % (len(text) - limit) + \
        text[-half:]


def _build_error_excerpt(e):
    """The first line and the compiler's error lines of a failed load_inline build."""
    msg = "%s: %s" % (type(e).__name__, e)
    lines = msg.splitlines()
    errs = [l for l in lines[1:] if "error" in l.lower() and len(l) < 400]
    if "Error building extension" in lines[0] and errs:
        return _excerpt("\n".join([lines[0].split(":")[0] + ": " + lines[0].split(":")[1].split(
            "[")[0].strip()] + errs[:20]))
    return _excerpt(msg)


def finite(obj):
    """JSON without NaN/Infinity (strict parsers, e.g. simdjson, reject them): +-1e308."""
    if isinstance(obj, float):
        if obj != obj:
            return 1e308
        if obj in (float("inf"), float("-inf")):
            return 1e308 if obj > 0 else -1e308
        return obj
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _stats(times):
    """timing.get_timing_stats (population std), unrounded, plus KernelBench's 3-digit view."""
    n = len(times)
    if not n:
        return None
    mean = sum(times) / n
    std = (sum((t - mean) ** 2 for t in times) / n) ** 0.5
    s = {"mean": mean, "std": std, "min": min(times), "max": max(times), "num_trials": n}
    s["kernelbench"] = {k: float("%.3g" % s[k]) for k in ("mean", "std", "min", "max")}
    return s


def child_main(a):
    verdict = {"id": a.id, "compiled": False, "correct": False, "trials_passed": 0,
               "trials_total": a.trials, "kernel_ms": None, "reference_ms": None,
               "speedup": None,
               "phase_seconds": {"startup": 0.0, "build": 0.0, "correctness": 0.0,
                                 "timing": 0.0, "reference": 0.0},
               "error": "none", "error_excerpt": "", "max_difference": [], "device": None,
               "kernel_stats": None, "reference_stats": None}
    ph = verdict["phase_seconds"]
    try:
        _child_evaluate(a, verdict, ph)
    except BaseException as e:  # noqa: BLE001 - the protocol itself failed
        verdict["correct"] = False
        verdict["error"] = "infrastructure"
        verdict["error_excerpt"] = _excerpt("".join(traceback.format_exception(
            type(e), e, e.__traceback__)))
    for k in ph:
        ph[k] = round(ph[k], 4)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout.write("\n" + json.dumps(finite(verdict), allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0


def _child_evaluate(a, verdict, ph):
    import torch
    cuda = a.device == "cuda"
    if cuda:
        device = torch.device("cuda:0")
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)  # first CUDA allocation: the context exists
        torch.cuda.synchronize(device)
        verdict["device"] = torch.cuda.get_device_name(device)
    else:
        device = torch.device("cpu")
        verdict["device"] = "cpu (%s)" % platform.processor() if platform.processor() else "cpu"
    verdict["torch"] = torch.__version__
    ph["startup"] = max(0.0, time.time() - a.spawn_time)
    precision = torch.float32
    tol = 1e-4  # get_tolerance_for_precision(fp32)
    now = time.perf_counter

    def sync():
        if cuda:
            torch.cuda.synchronize(device=device)

    def set_seed(s):
        torch.manual_seed(s)
        if cuda:
            torch.cuda.manual_seed(s)

    def process(x):  # _process_input_tensor: every tensor cast to the precision, then moved
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(dtype=precision).to(device=device)

    with open(a.reference, encoding="utf-8") as f:
        ref_src = f.read()
    with open(a.candidate, encoding="utf-8") as f:
        cand_src = f.read()

    # -- reference (load_original_model_and_inputs) ---------------------------------------
    t0 = now()
    context = {}
    compile(ref_src, "<string>", "exec")
    exec(ref_src, context)
    Model, get_init_inputs, get_inputs = (context.get("Model"), context.get("get_init_inputs"),
                                          context.get("get_inputs"))
    set_seed(a.seed)
    init_inputs = [process(x) for x in get_init_inputs()]
    with torch.no_grad():
        set_seed(a.seed)
        original_model = Model(*init_inputs)
        assert hasattr(original_model, "forward")
    ph["reference"] += now() - t0

    # -- candidate: build (load_custom_model) and construction ------------------------------
    t0 = now()
    os.environ["TORCH_EXTENSIONS_DIR"] = a.build_dir
    os.environ["TORCH_USE_CUDA_DSA"] = "1"  # KernelBench compiles with device-side assertions
    try:
        compile(cand_src, "<string>", "exec")
        exec(cand_src, context)
        ModelNew = context.get("ModelNew")
        sync()
    except Exception as e:  # noqa: BLE001 - a compilation failure (SyntaxError included)
        ph["build"] += now() - t0
        verdict["error"] = "compile"
        verdict["error_excerpt"] = _build_error_excerpt(e)
        return
    if ModelNew is None:
        ph["build"] += now() - t0
        verdict["error"] = "compile"
        verdict["error_excerpt"] = "ModelNew not found in the candidate"
        return
    verdict["compiled"] = True
    try:
        with torch.no_grad():
            set_seed(a.seed)
            custom_model = ModelNew(*init_inputs)
            assert hasattr(custom_model, "forward")
            original_model = original_model.to(device=device, dtype=precision)
            custom_model = custom_model.to(device=device, dtype=precision)
            sync()
    except Exception as e:  # noqa: BLE001 - KernelBench: compiled, not able to run
        ph["build"] += now() - t0
        verdict["error"] = "runtime"
        verdict["error_excerpt"] = _excerpt("%s: %s" % (type(e).__name__, e))
        return
    ph["build"] += now() - t0

    # -- correctness (run_and_check_correctness) -----------------------------------------
    t_corr = now()
    ref_in_corr = 0.0
    torch.manual_seed(a.seed)
    trial_seeds = [torch.randint(0, 2 ** 32 - 1, (1,)).item() for _ in range(a.trials)]
    passed = 0
    stopped = None
    with torch.no_grad():
        for trial_seed in trial_seeds:
            set_seed(trial_seed)
            inputs = [process(x) for x in get_inputs()]
            set_seed(trial_seed)
            t_ref = now()
            model = original_model.to(device=device, dtype=precision)
            set_seed(trial_seed)
            model_new = custom_model.to(device=device, dtype=precision)
            output = model(*inputs)
            sync()
            ref_in_corr += now() - t_ref
            try:
                output_new = model_new(*inputs)
                sync()
                if output.shape != output_new.shape:
                    stopped = ("mismatch", "Output shape mismatch: Expected %s, got %s" % (
                        tuple(output.shape), tuple(output_new.shape)))
                    break
                if not torch.allclose(output, output_new, atol=tol, rtol=tol):
                    diff = torch.abs(output - output_new)
                    verdict["max_difference"].append(float(torch.max(diff).item()))
                else:
                    passed += 1
            except Exception as e:  # noqa: BLE001
                stopped = ("runtime", "%s: %s" % (type(e).__name__, e))
                break
            del output_new
        del inputs
    ph["reference"] += ref_in_corr
    ph["correctness"] += now() - t_corr - ref_in_corr
    verdict["trials_passed"] = passed
    correct = stopped is None and passed == a.trials
    verdict["correct"] = correct
    if stopped:
        verdict["error"], verdict["error_excerpt"] = stopped[0], _excerpt(stopped[1])
    elif not correct:
        verdict["error"] = "mismatch"
        verdict["error_excerpt"] = "%d of %d trials failed (Output mismatch)" % (
            a.trials - passed, a.trials)

    # -- timing (timing.time_execution_with_cuda_event; no no_grad, as KernelBench) --------
    def clear_l2_cache():
        dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)
        dummy.fill_(42)
        del dummy

    def time_fn(fn, args, discard_first=1):
        for _ in range(a.warmup):
            fn(*args)
            sync()
        if cuda:
            torch.cuda.empty_cache()
        times = []
        for trial in range(a.perf_trials + discard_first):
            if cuda:
                torch.cuda.synchronize(device=device)
                start_event = torch.cuda.Event(enable_timing=True)
                end_event = torch.cuda.Event(enable_timing=True)
                clear_l2_cache()
                start_event.record()
                _ = fn(*args)
                end_event.record()
                torch.cuda.synchronize(device=device)
                ms = start_event.elapsed_time(end_event)
            else:
                t = time.perf_counter()
                _ = fn(*args)
                ms = (time.perf_counter() - t) * 1000.0
            del _
            if trial >= discard_first:
                times.append(ms)
        return times

    if a.perf_trials <= 0:
        return
    if correct:
        t0 = now()
        try:
            sync()
            set_seed(a.seed)
            inputs = [process(x) for x in get_inputs()]
            model_new = custom_model.to(device=device, dtype=precision)
            sync()
            ks = _stats(time_fn(model_new, inputs))
            verdict["kernel_stats"] = ks
            verdict["kernel_ms"] = ks["mean"]
            del inputs
        except Exception as e:  # noqa: BLE001 - KernelBench: error_during_performance
            verdict["error_excerpt"] = _excerpt("error during performance: %s: %s" % (
                type(e).__name__, e))
        ph["timing"] += now() - t0
    if correct or a.reference_timing == "always":
        t0 = now()
        try:
            sync()
            set_seed(a.seed)
            inputs = [process(x) for x in get_inputs()]
            sync()
            rs = _stats(time_fn(original_model, inputs))
            verdict["reference_stats"] = rs
            verdict["reference_ms"] = rs["mean"]
            del inputs
        except Exception as e:  # noqa: BLE001 - e.g. a device left broken by the candidate
            if correct:
                raise
            verdict["reference_timing_error"] = _excerpt("%s: %s" % (type(e).__name__, e), 1000)
        ph["reference"] += now() - t0
        if verdict["kernel_ms"]:
            verdict["speedup"] = verdict["reference_ms"] / verdict["kernel_ms"]
    # graceful_eval_cleanup
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.synchronize(device=device)


# =============================================================================================
# the parent: one candidate after another


def resolve_problem(kb_dir, rel):
    for cand in (os.path.join(kb_dir, rel), os.path.join(kb_dir, "KernelBench", rel)):
        if os.path.isfile(cand):
            return cand
    return None


def verdict_word(v):
    if v.get("error") in ("timeout", "crashed", "infrastructure"):
        return v["error"]
    if not v.get("compiled"):
        return "compile_error"
    if v.get("correct"):
        return "correct"
    return "runtime_error" if v.get("error") == "runtime" else "wrong"


def agrees(kind, v):
    """Does the verdict match what the manifest says the candidate is?"""
    if kind == "correct":
        return bool(v.get("correct"))
    if kind == "wrong":
        return bool(v.get("compiled")) and not v.get("correct")
    if kind == "compile_error":
        return not v.get("compiled") and v.get("error") == "compile"
    return None


def find_verdict(stdout_path, cid):
    try:
        with open(stdout_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith(VERDICT_PREFIX):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict) and v.get("id") == cid:
                return v
    return None


def tail(path, limit=2000):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-limit:]
    except OSError:
        return ""


def _descendants(pid):
    """pids of every process below pid (from /proc), deepest last."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    """SIGKILL the child and everything it started. ninja puts each compiler job in a process
    group of its own, so the child's group alone would leave nvcc/cc1plus running: the tree is
    frozen first (SIGSTOP, until no new process shows up), then every process and every process
    group in it is killed."""
    frozen, groups = [], set()

    def stop(p):
        try:
            groups.add(os.getpgid(p))
            os.kill(p, signal.SIGSTOP)
            frozen.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    stop(proc.pid)
    for _ in range(20):
        new = [p for p in _descendants(proc.pid) if p not in frozen]
        if not new:
            break
        for p in new:
            stop(p)
    for g in groups:
        if g > 1 and g != os.getpgrp():
            try:
                os.killpg(g, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in reversed(frozen):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_one(entry, args, ref_path, cand_path, logs):
    cid = entry["id"]
    build_dir = tempfile.mkdtemp(prefix="kb_baseline_%s_" % cid)
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = build_dir
    env.setdefault("PYTHONUNBUFFERED", "1")
    if args.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    out_path = os.path.join(logs, cid + ".out")
    err_path = os.path.join(logs, cid + ".err")
    spawn = time.time()
    cmd = [sys.executable, THIS, "--child", "--id", cid, "--reference", ref_path,
           "--candidate", cand_path, "--device", args.device, "--build-dir", build_dir,
           "--spawn-time", repr(spawn), "--seed", str(args.seed), "--trials", str(args.trials),
           "--perf-trials", str(args.perf_trials), "--warmup", str(args.warmup),
           "--reference-timing", args.reference_timing]
    t0 = time.perf_counter()
    with open(out_path, "w") as fo, open(err_path, "w") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc)  # the child and its ninja, nvcc, cc1plus ...
            rc = proc.wait()
        except BaseException:
            kill_tree(proc)
            proc.wait()
            raise
    wall = time.perf_counter() - t0
    v = None if timed_out else find_verdict(out_path, cid)
    if v is None:
        v = {"id": cid, "compiled": False, "correct": False, "trials_passed": 0,
             "trials_total": args.trials, "kernel_ms": None, "reference_ms": None,
             "speedup": None, "phase_seconds": None}
        if timed_out:
            v["error"] = "timeout"
            v["error_excerpt"] = "killed after %g s" % args.timeout
        else:
            v["error"] = "crashed"
            v["error_excerpt"] = "exit status %s without a verdict; stderr: %s" % (
                rc, tail(err_path))
    v["exit_status"] = rc
    v["wall_seconds"] = round(wall, 3)
    if not args.keep_builds:
        shutil.rmtree(build_dir, ignore_errors=True)
    else:
        v["build_dir"] = build_dir
    return v


def summarize(cands):
    s = {"evaluated": len(cands)}
    s["compiled"] = sum(1 for c in cands if c.get("compiled"))
    s["correct"] = sum(1 for c in cands if c.get("correct"))
    s["timeouts"] = sum(1 for c in cands if c.get("error") == "timeout")
    s["crashed"] = sum(1 for c in cands if c.get("error") == "crashed")
    ag = [c["agrees_with_manifest"] for c in cands if c.get("agrees_with_manifest") is not None]
    s["agree_with_manifest"] = sum(1 for x in ag if x)
    built = [c["wall_seconds"] for c in cands if c.get("compiled")]
    failed = [c["wall_seconds"] for c in cands if not c.get("compiled")
              and c.get("error") == "compile"]
    s["mean_wall_seconds_built"] = round(sum(built) / len(built), 2) if built else None
    s["mean_wall_seconds_compile_failed"] = round(sum(failed) / len(failed), 2) if failed else None
    phases = {}
    for c in cands:
        for k, x in (c.get("phase_seconds") or {}).items():
            phases[k] = phases.get(k, 0.0) + x
    s["phase_seconds_total"] = {k: round(x, 2) for k, x in phases.items()}
    return s


def write_results(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(finite(doc), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def parent_main(args):
    with open(args.manifest) as f:
        manifest = json.load(f)
    cand_dir = args.candidates or os.path.dirname(os.path.abspath(args.manifest))
    todo = manifest[args.start:]
    if args.limit is not None:
        todo = todo[:args.limit]

    doc = None
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            doc = json.load(f)
    if doc is None:
        doc = {"tool": "bench/eval_throughput/kernelbench_baseline.py",
               "protocol": {"kernelbench_function": "eval_kernel_against_ref",
                            "fresh_process_per_candidate": True, "build_cache": "none",
                            "seed": args.seed, "correctness_trials": args.trials,
                            "perf_trials": args.perf_trials, "warmup": args.warmup,
                            "timing": "cuda_event + L2 flush" if args.device == "cuda"
                            else "perf_counter", "atol": 1e-4, "rtol": 1e-4,
                            "precision": "fp32", "reference_timing": args.reference_timing,
                            "timeout_s": args.timeout},
               "manifest": os.path.abspath(args.manifest), "device": None,
               "python": platform.python_version(), "host": platform.node(),
               "candidates": [], "runs": [], "total_seconds": 0.0, "measured_seconds": 0.0,
               "estimated_seconds": 0.0, "candidates_per_minute": None}
    done = {c["id"] for c in doc["candidates"]}
    todo = [e for e in todo if e["id"] not in done]
    logs = args.logs or (os.path.splitext(args.out)[0] + ".logs")
    os.makedirs(logs, exist_ok=True)

    run = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "seconds": 0.0,
           "candidates": 0, "ids": []}
    doc["runs"].append(run)
    previous_total = float(doc.get("measured_seconds", doc.get("total_seconds")) or 0.0)
    estimated = float(doc.get("estimated_seconds") or 0.0)

    position = {e["id"]: k for k, e in enumerate(manifest)}

    def totals():
        doc["candidates"].sort(key=lambda c: position.get(c["id"], len(position)))
        doc["measured_seconds"] = round(previous_total + run["seconds"], 3)
        doc["estimated_seconds"] = round(estimated, 3)
        doc["total_seconds"] = round(doc["measured_seconds"] + estimated, 3)
        doc["candidates_per_minute"] = round(
            len(doc["candidates"]) / (doc["total_seconds"] / 60.0), 4) \
            if doc["total_seconds"] > 0 and doc["candidates"] else None
        doc["summary"] = summarize(doc["candidates"])
    t_run = time.perf_counter()
    n = len(todo)
    try:
        for k, entry in enumerate(todo, 1):
            cid = entry["id"]
            ref_path = resolve_problem(args.kernelbench, entry["problem"])
            cand_path = os.path.join(cand_dir, entry["candidate"])
            if ref_path is None:
                raise SystemExit("%s: problem %s not found under %s" % (
                    cid, entry["problem"], args.kernelbench))
            orig = entry.get("duplicate_of")
            prior = [c for c in doc["candidates"]
                     if c["id"] == orig and not c.get("estimated_from")]
            if args.estimate_duplicates and orig and prior:
                # the same bytes as an evaluated candidate: its verdict and its wall time (the
                # baseline shares nothing between candidates, so a duplicate costs the same)
                v = {k: x for k, x in prior[0].items() if k not in (
                    "id", "problem", "kind", "duplicate_of", "agrees_with_manifest")}
                v["estimated_from"] = orig
                estimated += v["wall_seconds"]
            else:
                v = run_one(entry, args, os.path.abspath(ref_path), os.path.abspath(cand_path),
                            logs)
            rec = {"id": cid, "problem": entry["problem"], "kind": entry.get("kind"),
                   "duplicate_of": entry.get("duplicate_of")}
            rec.update(v)
            rec["agrees_with_manifest"] = agrees(entry.get("kind"), v)
            doc["candidates"].append(rec)
            if doc["device"] is None and v.get("device"):
                doc["device"] = v["device"]
                doc["torch"] = v.get("torch")
            run["candidates"] += 1
            run["ids"].append(cid)
            run["seconds"] = round(time.perf_counter() - t_run, 3)
            totals()
            write_results(args.out, doc)
            word = verdict_word(v)
            note = "" if rec["agrees_with_manifest"] in (True, None) else \
                "   (manifest: %s)" % entry.get("kind")
            extra = ""
            if v.get("speedup"):
                extra = "  %.3f ms vs %.3f ms, speedup %.2fx" % (v["kernel_ms"], v["reference_ms"],
                                                                v["speedup"])
            if v.get("estimated_from"):
                extra += "  (not run: the verdict and time of %s)" % v["estimated_from"]
            print("[%d/%d] %s %s %s %.1f s%s%s" % (k, n, cid, entry["problem"].rsplit(".py", 1)[0],
                                                   word, v["wall_seconds"], extra, note),
                  flush=True)
    except KeyboardInterrupt:
        print("interrupted: %d candidates recorded in %s" % (len(doc["candidates"]), args.out),
              flush=True)
    run["seconds"] = round(time.perf_counter() - t_run, 3)
    totals()
    write_results(args.out, doc)
    s = doc["summary"]
    est = ""
    if doc["estimated_seconds"]:
        est = " (%.1f s of it estimated for %d duplicates not run)" % (
            doc["estimated_seconds"], sum(1 for c in doc["candidates"] if c.get("estimated_from")))
    print("total: %d candidates in %.1f s%s = %.2f candidates per minute; %d compiled, "
          "%d correct, %d of %d as the manifest says; results in %s" % (
              len(doc["candidates"]), doc["total_seconds"], est,
              doc["candidates_per_minute"] or 0.0, s["compiled"], s["correct"],
              s["agree_with_manifest"], len(doc["candidates"]), args.out), flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest")
    ap.add_argument("--candidates", help="the candidates' folder (default: the manifest's)")
    ap.add_argument("--kernelbench", help="KernelBench problems (levelN/...)")
    ap.add_argument("--out")
    ap.add_argument("--limit", type=int, default=None, help="evaluate at most N candidates")
    ap.add_argument("--start", type=int, default=0, help="skip the first K manifest entries")
    ap.add_argument("--resume", action="store_true",
                    help="keep the candidates already in --out and skip them")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpu", type=int, default=None, help="CUDA_VISIBLE_DEVICES for the children")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per candidate")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--trials", type=int, default=5, help="correctness trials")
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reference-timing", choices=("correct", "always"), default="correct",
                    help="time the reference for correct candidates only (default), or for "
                         "every candidate that built (upstream eval_kernel_against_ref)")
    ap.add_argument("--estimate-duplicates", action="store_true",
                    help="do not run byte-identical duplicates of candidates already evaluated: "
                         "record the original's verdict and wall time (marked estimated_from; "
                         "counted in estimated_seconds)")
    ap.add_argument("--logs", help="children's stdout/stderr (default: <out>.logs)")
    ap.add_argument("--keep-builds", action="store_true")
    # the child's side
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--id", help=argparse.SUPPRESS)
    ap.add_argument("--reference", help=argparse.SUPPRESS)
    ap.add_argument("--candidate", help=argparse.SUPPRESS)
    ap.add_argument("--build-dir", help=argparse.SUPPRESS)
    ap.add_argument("--spawn-time", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if args.spawn_time is None:
            args.spawn_time = time.time()
        return child_main(args)
    for req in ("manifest", "kernelbench", "out"):
        if not getattr(args, req):
            ap.error("--%s is required" % req)
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
