#!/usr/bin/env python3
"""Where nvcc's time goes in CUDA candidates' builds, phase by phase (nvcc -time), for three
versions of each candidate's cuda.cu:
  - full:  as load_inline writes it (torch's headers as the candidate included them);
  - light: with kbrl's light torch header (light_cuda_header.py), what kbrl's builds compile;
  - ops:   kbrl's per-operator tier's header (ops_cuda_header.py: ATen's core Tensor, the
           dispatch macros, the tensor operators and the per-operator headers of the functions
           the source calls by name), tried before the light header where the tier's screen
           allows it (ops_header_names.py screen).
Each cuda.cu is compiled alone (--jobs at a time) with the flags torch gives nvcc, into its
own folder; no kbrl build is needed. The summary compares the variants over the sources every
variant compiled: each phase's mean, their sum (one nvcc as is) and the critical path of kbrl's
nvcc driver (nvcc_driver.py: the host front end beside the device side, then the host compile;
kbrl also gives that compile a precompiled header, which this does not).

    nvcc_phases.py --candidates C [--sources N] [--variants full,light,ops] [--jobs 1]
        [--out FILE.json] [--arch 9.0] [--limit SECONDS]

--limit starts no compile after that many seconds (those running finish), so that a device
call with a time limit still gets the summary of what did run.

C is make_candidates.py's output; compile-error candidates and duplicates are left out."""

import argparse
import concurrent.futures as futures
import csv
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from kbrl_eval import light_cuda_header  # noqa: E402

# What load_inline puts before a candidate's CUDA sources (torch.utils.cpp_extension).
LOAD_INLINE_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>"
OPS_HEADER = "kbrl_torch_ops.h"
FRONT_HOST = ("gcc (preprocessing 4)", "cudafe++")
FRONT_DEVICE = ("gcc (preprocessing 1)", "cicc", "ptxas", "fatbinary")
HOST_COMPILE = "gcc (compiling)"


class Captured(Exception):
    def __init__(self, arguments):
        super().__init__("load_inline captured")
        self.arguments = arguments


def captured_load_inline(candidate_path):
    """load_inline's arguments as the candidate's module passes them (nothing is built), or
    None when the module does not call it."""
    import torch.utils.cpp_extension as cpp_extension
    original = cpp_extension.load_inline
    signature = inspect.signature(original)

    def capture(*args, **kwargs):
        raise Captured(dict(signature.bind(*args, **kwargs).arguments))

    cpp_extension.load_inline = capture
    try:
        with open(candidate_path) as f:
            code = compile(f.read(), candidate_path, "exec")
        exec(code, {"__name__": "kbrl_candidate", "__file__": candidate_path})
    except Captured as c:
        return c.arguments
    finally:
        cpp_extension.load_inline = original
    return None


def buildable_cuda_candidates(candidates):
    """The manifest entries of make_candidates.py's folder worth compiling: CUDA sources, each
    once (no duplicates), without the planted compile errors."""
    with open(os.path.join(candidates, "manifest.json")) as f:
        manifest = json.load(f)
    return [m for m in manifest if m.get("backend") == "cuda" and not m.get("duplicate_of")
            and not m["kind"].startswith("compile_error")]


def as_list(v):
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def nvcc_flags(name, extra_cuda_cflags):
    """What torch gives nvcc for a load_inline CUDA source (its ninja file's cuda_cflags)."""
    import torch.utils.cpp_extension as ce
    try:
        includes = ce.include_paths(device_type="cuda")
    except TypeError:  # torch before 2.4
        includes = ce.include_paths(cuda=True)
    flags = ["-DTORCH_EXTENSION_NAME=%s" % name, "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for helper in ("_get_pybind11_abi_build_flags", "_get_glibcxx_abi_build_flags"):
        if hasattr(ce, helper):
            flags += getattr(ce, helper)()
    for path in includes:
        flags += ["-isystem", path]
    import sysconfig
    flags += ["-isystem", sysconfig.get_paths()["include"]]
    flags += list(ce.COMMON_NVCC_FLAGS) + ce._get_cuda_arch_flags()
    flags += ["--compiler-options", "-fPIC"] + as_list(extra_cuda_cflags) + ["-std=c++17"]
    return flags, includes


def ops_header(light_header, text, includes):
    """The ops variant's header for a source: what kbrl's per-operator tier writes
    (tools/kbrl_eval/ops_cuda_header.py), whether or not its screen would allow the source."""
    from kbrl_eval import ops_cuda_header
    ops = ops_cuda_header.OpsHeader(light_header, [],
                                    ops_cuda_header.operator_headers(includes) or ())
    return ops.header_text(ops.names_to_include(text))


def phases_of(csv_path):
    """{phase name: seconds} from nvcc -time's CSV."""
    seconds = {}
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    head = [h.strip() for h in rows[0]]
    at = head.index("metric")
    for row in rows[1:]:
        if len(row) > at and row[1].strip():
            seconds[row[1].strip()] = seconds.get(row[1].strip(), 0.0) + float(row[at]) / 1000.0
    return seconds


def compile_variant(folder, variant, text, flags, extra_files):
    os.makedirs(folder, exist_ok=True)
    for name, content in extra_files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(content)
    source = os.path.join(folder, variant + ".cu")
    with open(source, "w") as f:
        f.write(text)
    times = os.path.join(folder, variant + ".csv")
    cmd = ["nvcc"] + flags + ["-I", folder, "-c", source, "-o", source[:-3] + ".o",
                              "-time", times]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ok = proc.returncode == 0
    return {"ok": ok, "phases": phases_of(times) if ok and os.path.exists(times) else {},
            "error": "" if ok else proc.stdout.decode(errors="replace")[-1500:]}


def critical_path(p):
    host = sum(p.get(k, 0.0) for k in FRONT_HOST)
    device = sum(p.get(k, 0.0) for k in FRONT_DEVICE)
    return max(host, device) + p.get(HOST_COMPILE, 0.0)


def summarize(results, variants):
    """Printed table over the sources that every variant compiled."""
    both = [r for r in results if all(r["variants"].get(v, {}).get("ok") for v in variants)]
    print("%d sources; compiled by every variant: %d" % (len(results), len(both)))
    for v in variants:
        ok = sum(1 for r in results if r["variants"].get(v, {}).get("ok"))
        tried = sum(1 for r in results if v in r["variants"])
        print("  %-6s compiled %d of %d" % (v, ok, tried))
    if not both:
        return
    names = []
    for r in both:
        for v in variants:
            names += [n for n in r["variants"][v]["phases"] if n not in names]
    print("%-24s" % "mean seconds" + "".join("%10s" % v for v in variants))
    for n in names + ["(sum)", "(driver's path)"]:
        row = []
        for v in variants:
            if n == "(sum)":
                xs = [sum(r["variants"][v]["phases"].values()) for r in both]
            elif n == "(driver's path)":
                xs = [critical_path(r["variants"][v]["phases"]) for r in both]
            else:
                xs = [r["variants"][v]["phases"].get(n, 0.0) for r in both]
            row.append(statistics.mean(xs))
        print("%-24s" % n + "".join("%10.2f" % x for x in row))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", required=True, help="make_candidates.py's output folder")
    ap.add_argument("--sources", type=int, default=8, help="how many candidates (manifest order)")
    ap.add_argument("--variants", default="full,light,ops")
    ap.add_argument("--jobs", type=int, default=1, help="nvcc runs at a time")
    ap.add_argument("--out", default="", help="a JSON file for every compile's phases")
    ap.add_argument("--limit", type=float, default=0,
                    help="start no compile after this many seconds (0: no limit)")
    ap.add_argument("--arch", default="", help="TORCH_CUDA_ARCH_LIST for the flags (default: "
                    "torch's choice, the GPU's; needed where there is none, e.g. 9.0)")
    args = ap.parse_args(argv[1:])
    if args.arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = args.arch
    variants = [v for v in args.variants.split(",") if v]
    picked = buildable_cuda_candidates(args.candidates)[:args.sources]
    light_header = light_cuda_header.read_header()
    work = tempfile.mkdtemp(prefix="kbrl-nvcc-phases-")
    jobs = []
    results = []
    for m in picked:
        arguments = captured_load_inline(os.path.join(args.candidates, m["candidate"]))
        if not arguments or not arguments.get("cuda_sources"):
            print("%s: no load_inline with CUDA sources; left out" % m["id"])
            continue
        text = "\n".join([LOAD_INLINE_PRELUDE] + as_list(arguments["cuda_sources"]))
        flags, includes = nvcc_flags(arguments["name"], arguments.get("extra_cuda_cflags"))
        light = light_cuda_header.light_source(text)
        record = {"id": m["id"], "problem": m["problem"], "variants": {}}
        results.append(record)
        for v in variants:
            if v == "full":
                jobs.append((record, v, text, flags, {}))
            elif light is None:
                continue  # the source would be built as written
            elif v == "light":
                jobs.append((record, v, light, flags, {light_cuda_header.HEADER_NAME: light_header}))
            elif v == "ops":
                jobs.append((record, v, light.replace(light_cuda_header.HEADER_NAME, OPS_HEADER),
                             flags, {OPS_HEADER: ops_header(light_header, text, includes)}))
    started = time.monotonic()
    with futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        running = {pool.submit(compile_variant, os.path.join(work, r["id"]), v, t, f, extra):
                   (r, v) for r, v, t, f, extra in jobs}
        for done in futures.as_completed(running):
            if args.limit and time.monotonic() - started > args.limit:
                stopped = sum(1 for f in running if f.cancel())
                if stopped:
                    print("--limit %g s reached: %d compiles not started" % (args.limit, stopped),
                          flush=True)
            if done.cancelled():
                continue
            record, v = running[done]
            record["variants"][v] = done.result()
            outcome = record["variants"][v]
            print("%s %-6s %s %.1f s" % (record["id"], v, "ok" if outcome["ok"] else "FAILED",
                                         sum(outcome["phases"].values())), flush=True)
    summarize(results, variants)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"variants": variants, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
