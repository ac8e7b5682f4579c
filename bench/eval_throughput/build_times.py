#!/usr/bin/env python3
"""CUDA candidate builds, kbrl's against torch's full headers, on the candidate set of
make_candidates.py.

Each build is one fresh Python process running the candidate's module-level load_inline, as a
kbrl builder does, in one of five modes (main.cpp compiles with the precompiled
torch/extension.h in every mode):
  - full:  cuda.cu as written, nvcc as is (the peer: what KernelBench's protocol compiles);
  - light: cuda.cu with kbrl's light torch header (light_cuda_header.py), nvcc as is;
  - ops:   the per-operator header where its screen allows (ops_cuda_header.py), else light;
           nvcc as is;
  - kbrl:  the per-operator and light headers, nvcc's two front ends side by side
           (nvcc_driver.py) and the host half through a precompiled header (host_pch.py): what
           kbrl's builds do now;
  - kbrl-light: kbrl without the per-operator tier (KBRL_EVAL_OPS_CUDA_HEADER=0).
A build's time is from after `import torch` to the loaded extension. Duplicates are built
once. Then, for every source built in the first mode and another:
  - the kernels' SASS (cuobjdump), internal-linkage name hashes aside, must be identical;
  - ModelNew's output on the problem's inputs (same seed) must be bitwise identical.

    build_times.py --candidates C --kernelbench KB --out OUT [--modes kbrl,full] [--jobs 12]
        [--sources N] [--lone 3] [--lone-modes kbrl,light,full] [--outputs] [--limit SECONDS]

OUT/build_times.json holds every build and check, written after each phase (a call that runs
out of time keeps what was done); the summary goes to stdout. Phases: the builds --jobs at a
time, one mode after the other; build outcomes and SASS compared; --lone N sources built alone
(one build on the machine at a time) in each of --lone-modes, into fresh folders; with
--outputs, ModelNew's outputs compared, while --limit lasts."""

import argparse
import concurrent.futures as futures
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")

# kbrl's build hooks, installed in the order a candidate process installs them
# (tools/kbrl_eval/zygote.py, child_main).
HOOKS = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import torch, torch.utils.cpp_extension as ce
from kbrl_eval.extension_builds import (install_build_reuse, install_library_reuse,
                                        install_torch_pch)
mode = os.environ["KBRL_BUILD_MODE"]
if not mode.startswith("kbrl"):
    # the host compiler wrapper (host_pch.py) passes every call through; main.cpp keeps its
    # precompiled header in every mode
    os.environ["KBRL_EVAL_NO_PCH"] = "1"
install_build_reuse(ce)
if mode in ("light", "kbrl-light"):
    os.environ["KBRL_EVAL_OPS_CUDA_HEADER"] = "0"
if mode in ("light", "ops", "kbrl", "kbrl-light"):
    from kbrl_eval.light_cuda_header import install_light_cuda_header
    install_light_cuda_header(ce, log=lambda m: print(
        ("FALLBACK " if "did not compile" in m else "NOTE ") + m, file=sys.stderr))
install_library_reuse(ce)
if mode.startswith("kbrl"):
    from kbrl_eval.nvcc_driver import install_parallel_nvcc
    install_parallel_nvcc(ce)
install_torch_pch(ce)
"""

# Runs in the build process: kbrl's build hooks as a candidate process installs them, then the
# candidate's module (its load_inline).
BUILD_DRIVER = HOOKS + r"""
import time, json
t0 = time.perf_counter()
ok, err = True, ""
try:
    exec(compile(open(sys.argv[2]).read(), sys.argv[2], "exec"), {"__name__": "candidate"})
except BaseException as e:
    ok, err = False, str(e)[-2000:]
print(json.dumps({"seconds": time.perf_counter() - t0, "ok": ok, "error": err}))
"""

# Runs ModelNew once on the problem's inputs (the build is found and loaded); prints the
# output's sha256.
RUN_DRIVER = HOOKS + r"""
import hashlib, importlib.util
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
problem = load(sys.argv[2], "problem")
cand = load(sys.argv[3], "candidate")
torch.manual_seed(0)
init = problem.get_init_inputs()
torch.manual_seed(0)
model = cand.ModelNew(*init).cuda()
torch.manual_seed(1)
inputs = [x.cuda() if torch.is_tensor(x) else x for x in problem.get_inputs()]
with torch.no_grad():
    out = model(*inputs)
torch.cuda.synchronize()
outs = out if isinstance(out, (tuple, list)) else [out]
h = hashlib.sha256()
for o in outs:
    h.update(o.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes())
print(h.hexdigest())
"""


def build(candidate, mode, ext_dir, log_dir):
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir, KBRL_BUILD_MODE=mode)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", BUILD_DRIVER, TOOLS, candidate],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    wall = time.monotonic() - t0
    name = os.path.basename(candidate)
    with open(os.path.join(log_dir, "%s.%s.log" % (name, mode)), "wb") as f:
        f.write(proc.stdout + b"\n" + proc.stderr)
    try:
        result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"seconds": None, "ok": False, "error": proc.stderr.decode()[-2000:]}
    result.update(candidate=name, mode=mode, process_wall=wall,
                  fallback=b"FALLBACK" in proc.stderr)
    return result


def build_all(candidates, mode, ext_dir, log_dir, jobs, deadline):
    results = []
    with futures.ThreadPoolExecutor(jobs) as pool:
        pending = {}
        for c in candidates:
            if time.monotonic() > deadline:
                break
            pending[pool.submit(build, c, mode, ext_dir, log_dir)] = c
        for f in futures.as_completed(pending):
            results.append(f.result())
    return results


def sass_of(ext_dir, name):
    """The SASS of every kernel in the extension built for candidate `name`, with the
    internal-linkage hashes nvcc derives from the file's path and name taken out."""
    sos = [os.path.join(r, f) for r, _, fs in os.walk(ext_dir) for f in fs
           if f.endswith(".so") and name in r]
    if len(sos) != 1:
        return None
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    out = subprocess.run([tool, "-sass", sos[0]], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT).stdout.decode(errors="replace")
    out = re.sub(r"_INTERNAL_[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]+", "_INTERNAL_", out)
    return "\n".join(l for l in out.splitlines() if "Fatbin" not in l and "code for" not in l
                     and "arch =" not in l and "identifier =" not in l)


def ext_name(candidate_path):
    with open(candidate_path) as f:
        m = re.search(r'name\s*=\s*"([^"]+)"', f.read())
    return m.group(1) if m else None


def output_hash(problem, candidate, ext_dir, mode):
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir, KBRL_BUILD_MODE=mode)
    proc = subprocess.run([sys.executable, "-c", RUN_DRIVER, TOOLS, problem, candidate], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def summarize(rows):
    ok = [r["seconds"] for r in rows if r["ok"] and r["seconds"] is not None]
    if not ok:
        return "none built"
    return "%d built, %d failed; mean %.1f s, median %.1f s, max %.1f s" % (
        len(ok), len(rows) - len(ok), statistics.mean(ok), statistics.median(ok), max(ok))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--kernelbench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", default="kbrl,full")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--sources", type=int, default=0, help="the first N unique sources (0: all)")
    ap.add_argument("--lone", type=int, default=3)
    ap.add_argument("--lone-modes", default="kbrl,light,full")
    ap.add_argument("--outputs", action="store_true")
    ap.add_argument("--check-jobs", type=int, default=4)
    ap.add_argument("--limit", type=float, default=500)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    lone_modes = [m for m in args.lone_modes.split(",") if m]
    deadline = time.monotonic() + args.limit
    os.makedirs(args.out, exist_ok=True)
    logs = os.path.join(args.out, "logs")
    os.makedirs(logs, exist_ok=True)
    manifest = json.load(open(os.path.join(args.candidates, "manifest.json")))
    unique = [e for e in manifest if not e.get("duplicate_of") and e.get("backend") == "cuda"]
    if args.sources:
        unique = unique[:args.sources]
    paths = {e["candidate"]: os.path.join(args.candidates, e["candidate"]) for e in unique}
    report = {"jobs": args.jobs, "sources": len(unique), "modes": modes}
    scratch = "/tmp/kbrl-build-times"
    shutil.rmtree(scratch, ignore_errors=True)
    dirs = {m: os.path.join(scratch, m) for m in modes}
    # the precompiled headers (torch/extension.h for main.cpp, the host half's for kbrl) made
    # before anything is timed, as on a builder that has built before
    # (the host half's header is made by the second build of a prefix: two warm-ups for kbrl)
    for mode in sorted(set(modes + lone_modes) & {"kbrl", "kbrl-light", "full"}):
        for n in range(2 if mode.startswith("kbrl") else 1):
            warm = build(next(iter(paths.values())), mode,
                         os.path.join(scratch, "warm-up-%s-%d" % (mode, n)), logs)
            print("warm-up build, %s (makes the precompiled headers): %.1f s"
                  % (mode, warm["process_wall"]), flush=True)
    for mode in modes:
        t0 = time.monotonic()
        rows = build_all(list(paths.values()), mode, dirs[mode], logs, args.jobs, deadline)
        report[mode] = {"wall": time.monotonic() - t0, "builds": rows}
        print("%s, %d at a time: %s; %.1f s wall, %d fell back to a heavier header"
              % (mode, args.jobs, summarize(rows), report[mode]["wall"],
                 sum(r["fallback"] for r in rows)), flush=True)
        save(args.out, report)
    built = {m: {r["candidate"] for r in report[m]["builds"] if r["ok"]} for m in dirs}
    attempted = {m: {r["candidate"] for r in report[m]["builds"]} for m in dirs}
    first = modes[0] if modes else None
    report["build_outcome_differs"], report["sass"] = {}, {}
    both = {}
    for other in modes[1:]:
        report["build_outcome_differs"][other] = sorted(
            c for c in attempted[first] & attempted[other]
            if (c in built[first]) != (c in built[other]))
        print("built as %s and not as %s or the other way: %s" % (
            first, other, ", ".join(report["build_outcome_differs"][other]) or "none"))
        both[other] = [e for e in unique
                       if e["candidate"] in built[first] and e["candidate"] in built[other]]
        # the kernels of each source built both ways (fast: no GPU)
        same = {}
        for e in both[other]:
            name = ext_name(paths[e["candidate"]])
            a, b = sass_of(dirs[first], name), sass_of(dirs[other], name)
            same[e["candidate"]] = a is not None and a == b
        report["sass"][other] = same
        print("%s and %s: %d sources built both ways; SASS identical %d"
              % (first, other, len(same), sum(same.values())), flush=True)
    save(args.out, report)
    for row in ninja_steps(dirs):
        print(row)
    # alone on the machine
    report["lone"] = {m: [] for m in lone_modes}
    for e in unique[:args.lone]:
        for mode in lone_modes:
            if time.monotonic() < deadline:
                d = os.path.join(scratch, "lone-" + mode + "-" + e["candidate"])
                report["lone"][mode].append(build(paths[e["candidate"]], mode, d, logs))
                r = report["lone"][mode][-1]
                print("alone, %s %s: %.1f s%s" % (e["candidate"], mode, r["seconds"] or -1,
                                                  "" if r["ok"] else " (failed)"), flush=True)
        save(args.out, report)
    for mode in lone_modes:
        print("%s, alone: %s" % (mode, summarize(report["lone"][mode])), flush=True)
    lone_dirs = {m: os.path.join(scratch, "lone-" + m) for m in lone_modes}
    for row in ninja_steps({m: d for m, d in lone_dirs.items()}, prefix=True):
        print(row)
    if not args.outputs or len(modes) < 2:
        return

    # ModelNew's outputs, same seeds, each source built in the first two modes (slowest: last)
    other = modes[1]

    def check(e):
        if time.monotonic() > deadline:
            return None
        problem = os.path.join(args.kernelbench, e["problem"])
        outs = {m: output_hash(problem, paths[e["candidate"]], dirs[m], m) for m in (first, other)}
        return {"candidate": e["candidate"], "kind": e["kind"], "outputs": outs,
                "identical": outs[first] is not None and outs[first] == outs[other]}

    with futures.ThreadPoolExecutor(args.check_jobs) as pool:
        report["outputs"] = [r for r in pool.map(check, both[other]) if r is not None]
    print("outputs compared for %d of %d sources: bitwise identical %d"
          % (len(report["outputs"]), len(both[other]),
             sum(r["identical"] for r in report["outputs"])))
    save(args.out, report)


def save(out, report):
    with open(os.path.join(out, "build_times.json"), "w") as f:
        json.dump(report, f, indent=1)


def ninja_steps(dirs, prefix=False):
    """ninja_steps.py's table per mode: for each folder of dirs, or with prefix=True for the
    folders whose names start with it (the lone builds' own folders)."""
    rows = []
    for mode, d in dirs.items():
        folders = [d] if not prefix else sorted(
            os.path.join(os.path.dirname(d), f) for f in os.listdir(os.path.dirname(d))
            if f.startswith(os.path.basename(d) + "-")) if os.path.isdir(os.path.dirname(d)) \
            else []
        if not folders:
            continue
        proc = subprocess.run([sys.executable, os.path.join(HERE, "ninja_steps.py")] + folders,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        rows.append("build steps, %s%s:\n%s" % (mode, " (alone)" if prefix else "",
                                                proc.stdout.decode(errors="replace")))
    return rows


if __name__ == "__main__":
    main()
