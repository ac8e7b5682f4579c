"""The timed loop, one for both sides: the reference's in the trusted process (time_calls) and
the candidate's in its own process (runner.py calls timed_loop). KernelBench's cuda_event
method with a device-wide synchronize before the end event, an L2 flush and persisting-L2 lines
reset before every trial, input sets rotated, the first trial discarded; perf_counter around the
call on the CPU."""

import time

import torch

from . import cudart
from .common import DISCARD_FIRST, L2_FLUSH_MIN_BYTES


def flush_buffer(device, l2_bytes):
    """What each trial overwrites to thrash L2: max(256 MiB, 2 x L2)."""
    nbytes = max(L2_FLUSH_MIN_BYTES, 2 * l2_bytes)
    return torch.empty(nbytes // 8, dtype=torch.int64, device=device)


def timed_loop(call, arg_sets, trials, flush, on_trial=None, event=None, synchronize=None,
               perf_counter=time.perf_counter, before_trial=None):
    """ms of every trial, the DISCARD_FIRST first included. flush is None on the CPU. on_trial
    (trial, set index, output) runs after each trial's timing, before_trial() before it starts:
    neither is timed (the candidate's process restores torch's flags there, work the
    reference's loop does not have). The candidate's process passes the event class and
    synchronize it captured before any candidate code ran."""
    event = event or torch.cuda.Event
    synchronize = synchronize or torch.cuda.synchronize
    k = len(arg_sets)
    times = []
    for t in range(trials + DISCARD_FIRST):
        args = arg_sets[t % k]
        if before_trial is not None:
            before_trial()
        if flush is not None:
            synchronize()
            cudart.reset_persisting_l2()
            start = event(enable_timing=True)
            end = event(enable_timing=True)
            flush.fill_(t)  # thrash L2: cold-cache performance
            start.record()
            out = call(args)
            synchronize()  # every stream of the device
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = perf_counter()
            out = call(args)
            ms = (perf_counter() - t0) * 1000.0
        times.append(ms)
        if on_trial is not None:
            on_trial(t, t % k, out)
        del out
    return times


def time_calls(worker, model, arg_sets, warmup, trials):
    """The reference's timing: warm-up calls, then the timed loop; ms per trial without the
    discarded first ones. Runs under torch.no_grad()."""
    with torch.no_grad():
        for i in range(warmup):
            model(*arg_sets[i % len(arg_sets)])
            if worker.cuda:
                torch.cuda.synchronize()
        flush = None
        if worker.cuda:
            torch.cuda.empty_cache()
            flush = flush_buffer(worker.device, worker.l2_bytes)
        times = timed_loop(lambda args: model(*args), arg_sets, trials, flush)
    return times[DISCARD_FIRST:]
