#!/usr/bin/env python3
"""Peak memory of one evaluation in kbrl's evaluation worker (tools/kbrl_eval_worker.py), on the
CPU, in units of the problem's input tensor: with correctness trials only, then with timing.

    /usr/bin/python3 bench/rl_step_timeline/worker_memory.py [--mib 256]

A ReLU problem with one float32 input of --mib MiB, judged as the torch backend. Where a GPU run
holds the same tensors on the device, multiply by the real input size (19_ReLU: 6 GiB) to see
what an evaluation needs there. Measured 2026-11-21 (torch 1.13, CPU): 8.0 input-sized tensors
above the torch baseline for correctness, 14.0 with timing.
"""
import argparse
import os
import resource
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import kbrl_eval_worker as w  # noqa: E402

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(64, %d)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def peak_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="size of the input tensor")
    args = ap.parse_args()
    cols = args.mib * (1 << 20) // 4 // 64
    tensor = 64 * cols * 4
    scratch = tempfile.mkdtemp(prefix="kbrl-worker-memory-")
    worker = w.Worker(argparse.Namespace(scratch=scratch, device="cpu", no_pch=True))
    if worker.torch_error:
        sys.exit("worker_memory: " + worker.torch_error)
    base = peak_bytes()
    print("torch baseline %.0f MiB; input tensor %.0f MiB" % (base / 2**20, tensor / 2**20))
    for perf in (0, 5):
        req = {"op": "evaluate", "id": perf, "reference": REFERENCE % cols, "candidate": CANDIDATE,
               "backend": "torch", "precision": "fp32", "correctness_trials": 5,
               "perf_trials": perf, "warmup_runs": 1, "seed": 42, "atol": -1, "rtol": -1,
               "time_reference": perf > 0, "time_compiled_reference": False,
               "compile_check": False, "inputs_on": "host",
               "build_dir": os.path.join(scratch, "build"), "timeout_s": 600}
        worker.counter += 1
        ans = w.Evaluation(worker, req, worker.counter).run()
        print("%-22s correct %s, error %s: peak %.1f input-sized tensors above the baseline" % (
            "correctness only:" if perf == 0 else "with %d timed runs:" % perf, ans["correct"],
            ans["error"], (peak_bytes() - base) / tensor))


if __name__ == "__main__":
    main()
