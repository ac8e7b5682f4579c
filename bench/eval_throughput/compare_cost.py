#!/usr/bin/env python3
"""What judging one output costs the trusted process: kbrl's comparison (tools/kbrl_eval/
compare.py, KernelBench's verdict and the strict one) against KernelBench's own check (the
peer: one torch.allclose), on outputs of a level-1 size (KernelBench's elementwise problems
return 4096 x 393216 float32 values, 6.4 GB). A correctness phase judges each of its trials'
outputs once (the first trial twice), so this is a floor on that phase for such problems.

    compare_cost.py [--shape 4096,393216] [--dtype float32] [--repeats 3] [--device cuda]
        [--against OTHER_COMPARE.py]

Prints seconds per comparison for each side, and the bytes an ideal one-pass comparison would
read (both tensors once) as a bandwidth figure for scale. Where the fused GPU passes apply
(fused_compare.py), kbrl's chunked torch path is timed too, and its verdicts and figures are
checked against the fused ones (the float64 sums to 1e-12). --against times another version of
compare.py in the same run (e.g. `git show REV:tools/kbrl_eval/compare.py > OTHER.py`) and
checks that it gives the same verdicts and figures on these outputs."""

import argparse
import importlib.util
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kbrl_eval import fused_compare  # noqa: E402
from kbrl_eval.compare import OutputComparison, strict_tolerances  # noqa: E402


def other_version(path):
    """compare.py's module loaded from another file (its relative imports resolve in
    kbrl_eval, as the real one's do)."""
    spec = importlib.util.spec_from_file_location("kbrl_eval.compare_other", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(c):
    return (c.strict_ok, c.kernelbench_ok, sorted(c.flags), c.max_abs_diff, c.mean_abs_diff,
            c.max_rel_diff, c.norm_rel_diff)


def same_figures(a, b):
    """Verdicts, flags and maxima equal; the float64 sums (mean, norm) to 1e-12: the fused
    GPU path adds them in another order."""
    return a[:4] == b[:4] and a[5] == b[5] and all(
        math.isclose(x, y, rel_tol=1e-12) for x, y in ((a[4], b[4]), (a[6], b[6])))


def chunked(fn):
    """fn() with the fused GPU comparison off: compare.py's chunked torch path."""
    def run():
        os.environ["KBRL_EVAL_FUSED_COMPARE"] = "0"
        try:
            return fn()
        finally:
            del os.environ["KBRL_EVAL_FUSED_COMPARE"]
    return run


def timed(fn, device, repeats):
    fn()  # warm-up: the caching allocator's first blocks, kernels' first launch
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="4096,393216")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--against", default="", help="another compare.py to time and check")
    args = ap.parse_args(argv[1:])
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    shape = [int(s) for s in args.shape.split(",")]
    precision = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[args.dtype]
    tol = strict_tolerances(precision)
    atol = rtol = 1e-2 if precision != "fp32" else 1e-4  # KernelBench's per-precision default
    expected = torch.rand(shape, device=device).to(dtype)
    got = expected + (torch.rand(shape, device=device) * 1e-6).to(dtype)
    n = expected.numel()
    peer = timed(lambda: torch.allclose(expected, got, atol=atol, rtol=rtol), device,
                 args.repeats)
    ours = timed(lambda: OutputComparison(expected, got, atol, rtol, tol), device, args.repeats)
    fused = fused_compare.applies(expected, got)
    in_chunks = timed(chunked(lambda: OutputComparison(expected, got, atol, rtol, tol)), device,
                      args.repeats) if fused else None
    mine = figures(OutputComparison(expected, got, atol, rtol, tol))
    other = None
    if args.against:
        module = other_version(args.against)
        other = timed(lambda: module.OutputComparison(expected, got, atol, rtol, tol), device,
                      args.repeats)
        theirs = figures(module.OutputComparison(expected, got, atol, rtol, tol))
    one_pass = 2 * n * expected.element_size()
    if device.type == "cuda":
        print(torch.cuda.get_device_name(device))
    print("outputs %s %s: %.2f GB each" % ("x".join(map(str, shape)), args.dtype,
                                          n * expected.element_size() / 1e9))
    print("KernelBench (torch.allclose, the peer)  %8.1f ms" % (1e3 * peer))
    print("kbrl (OutputComparison: both verdicts)  %8.1f ms  (%.1fx the peer)%s" % (
        1e3 * ours, ours / peer, ", fused GPU passes" if fused else ""))
    if in_chunks is not None:
        same = same_figures(mine, figures(chunked(
            lambda: OutputComparison(expected, got, atol, rtol, tol))()))
        print("kbrl, chunked torch path                %8.1f ms  (%.1fx the peer); same verdicts "
              "and figures: %s" % (1e3 * in_chunks, in_chunks / peer, "yes" if same else "NO"))
    if other is not None:
        print("%s (--against)  %8.1f ms  (%.1fx the peer); same verdicts and figures: %s" % (
            os.path.basename(args.against), 1e3 * other, other / peer,
            "yes" if same_figures(mine, theirs) else "NO: %r against %r" % (mine, theirs)))
    print("one pass over both outputs reads %.1f GB: as if at %.0f GB/s (kbrl), %.0f GB/s "
          "(the peer)" % (one_pass / 1e9, one_pass / ours / 1e9, one_pass / peer / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
