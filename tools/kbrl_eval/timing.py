"""The reference's timed loop, in the trusted process: the same method as the candidate's loop
in runner.py (KernelBench's cuda_event timing with a device-wide synchronize before the end
event, an L2 flush and persisting-L2 lines reset before every trial, input sets rotated, the
first trial discarded; perf_counter around the call on the CPU)."""

import time

import torch

from . import cudart
from .common import DISCARD_FIRST, L2_FLUSH_MIN_BYTES


def time_calls(worker, model, arg_sets, warmup, trials):
    """ms per trial, the discarded first ones left out. Runs under torch.no_grad()."""
    k = len(arg_sets)
    cuda = worker.cuda
    flush = None
    times = []
    with torch.no_grad():
        for i in range(warmup):
            model(*arg_sets[i % k])
            if cuda:
                torch.cuda.synchronize()
        if cuda:
            torch.cuda.empty_cache()
            nbytes = max(L2_FLUSH_MIN_BYTES, 2 * worker.l2_bytes)
            flush = torch.empty(nbytes // 8, dtype=torch.int64, device=worker.device)
        for t in range(trials + DISCARD_FIRST):
            args = arg_sets[t % k]
            if cuda:
                torch.cuda.synchronize()
                cudart.reset_persisting_l2()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                flush.fill_(t)
                start.record()
                out = model(*args)
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                out = model(*args)
                ms = (time.perf_counter() - t0) * 1000.0
            if t >= DISCARD_FIRST:
                times.append(ms)
            del out
    del flush
    return times
