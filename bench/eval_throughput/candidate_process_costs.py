#!/usr/bin/env python3
"""What a fresh candidate process pays before and around its candidate's work, on this machine:
the fixed costs behind issue 16's process isolation and time-coverage profile.

    python3 bench/eval_throughput/candidate_process_costs.py [--repeat 3] [--json OUT]

Each repetition starts a new Python process (as the zygote's fork would be, torch imported
before the clock starts) and times, in order: CUDA context creation, the profiler's first use
(Kineto + CUPTI), a second profile, the first cuBLAS matmul, the first cuDNN convolution, and
process exit with a live CUDA context. Needs a GPU."""

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import torch
t = {}
def mark(name, t0):
    t[name] = time.perf_counter() - t0
t0 = time.perf_counter(); torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
mark("cuda_context", t0)
from torch.profiler import ProfilerActivity, profile
def profiled():
    x = torch.ones(1 << 20, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (x * 2).sum(); torch.cuda.synchronize()
    return len(prof.events())
t0 = time.perf_counter(); profiled(); mark("first_profile", t0)
t0 = time.perf_counter(); profiled(); mark("second_profile", t0)
a = torch.randn(512, 512, device="cuda")
t0 = time.perf_counter(); (a @ a).sum().item(); mark("first_cublas_matmul", t0)
x = torch.randn(8, 16, 64, 64, device="cuda"); w = torch.randn(32, 16, 3, 3, device="cuda")
t0 = time.perf_counter(); torch.nn.functional.conv2d(x, w).sum().item(); mark("first_cudnn_conv", t0)
t0 = time.perf_counter(); torch.nn.functional.conv2d(x, w).sum().item(); mark("second_cudnn_conv", t0)
print(json.dumps(t)); sys.stdout.flush()
"""


def one_run():
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("probe failed:\n" + p.stderr[-2000:])
    t = json.loads(p.stdout.strip().splitlines()[-1])
    t["process_wall_incl_torch_import_and_exit"] = wall
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    runs = [one_run() for _ in range(args.repeat)]
    keys = list(runs[0])
    summary = {k: statistics.median(r[k] for r in runs) for k in keys}
    for k in keys:
        print("%-42s %8.3f s (median of %d; %s)" % (
            k, summary[k], len(runs), ", ".join("%.3f" % r[k] for r in runs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "median": summary}, f, indent=1)


if __name__ == "__main__":
    main()
