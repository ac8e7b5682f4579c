"""The timed loop, one for both sides: the reference's in the trusted process (time_calls) and
the candidate's in its own process (runner.py calls timed_loop). KernelBench's cuda_event
method with a device-wide synchronize before the end event, an L2 flush and persisting-L2 lines
reset before every trial, input sets rotated, the first trial discarded; perf_counter around the
call on the CPU. How many trials a loop runs is its TrialPlan: KernelBench's fixed count, or
adaptive (until the mean is known to a stated precision)."""

import math
import time

import torch

from . import cudart
from .common import DISCARD_FIRST, L2_FLUSH_MIN_BYTES


def flush_buffer(device, l2_bytes):
    """What each trial overwrites to thrash L2: max(256 MiB, 2 x L2)."""
    nbytes = max(L2_FLUSH_MIN_BYTES, 2 * l2_bytes)
    return torch.empty(nbytes // 8, dtype=torch.int64, device=device)


Z95 = 1.959964  # the normal distribution's two-sided 95 % quantile
MIN_ADAPTIVE_TRIALS = 10
# An adaptive loop also runs until its unchecked trials add up to this many ms of events. The
# harness's wall-clock check (harness.py) allows a loop 10 ms once plus 0.05 ms a trial beyond
# its events: over a short loop that is room for work hidden from the events on every call
# (1 ms a call over 8 trials), which KernelBench's 100 trials would show. Calls under 1 ms keep
# their 100 trials (a loop that is short anyway); the ones adaptive timing saves time on, calls
# of several ms, reach the window in a few trials.
MIN_ADAPTIVE_WINDOW_MS = 100.0


def mean_is_known(n, total, total_sq, precision):
    """Whether the 95 % confidence interval of the mean of n times (their sum and sum of
    squares given) lies within +-precision x the mean; sample standard deviation, n >= 2.
    Sums, not the list: the loop and the harness's check add the same floats in the same order,
    so they agree to the bit, in O(1) a trial."""
    if n < 2:
        return False
    mean = total / n
    if mean <= 0:
        return True  # nothing measurable to refine (a timer's resolution)
    var = max(0.0, (total_sq - total * mean) / (n - 1))
    return Z95 * math.sqrt(var / n) <= precision * mean


class TrialPlan:
    """How many timed trials a loop runs, the DISCARD_FIRST first not counted. precision 0:
    exactly max_trials (KernelBench's protocol). precision > 0: trials until the mean is known
    to that relative precision (mean_is_known), at least min_trials and min_window_ms of
    unchecked trials (MIN_ADAPTIVE_WINDOW_MS says why), at most max_trials. The
    last `checked` trials (at most max_trials) are the ones whose outputs the harness checks:
    they start once the trials before them (the probes) satisfy the plan, so they are timed
    and counted too. The candidate's process runs it; the harness checks that the reported
    times end where the plan ends them."""

    def __init__(self, max_trials, precision=0.0, checked=0, min_trials=MIN_ADAPTIVE_TRIALS,
                 min_window_ms=MIN_ADAPTIVE_WINDOW_MS):
        self.max_trials = max(0, int(max_trials))
        self.precision = max(0.0, float(precision))
        self.checked = min(max(0, int(checked)), self.max_trials)
        self.min_trials = max(2, int(min_trials))
        self.min_window_ms = max(0.0, float(min_window_ms))

    @classmethod
    def from_message(cls, msg):
        return cls(msg["max_trials"], msg.get("precision", 0.0), msg.get("checked", 0),
                   msg.get("min_trials", MIN_ADAPTIVE_TRIALS),
                   msg.get("min_window_ms", MIN_ADAPTIVE_WINDOW_MS))

    def message(self):
        return {"max_trials": self.max_trials, "precision": self.precision,
                "checked": self.checked, "min_trials": self.min_trials,
                "min_window_ms": self.min_window_ms}

    def checked_trials_start(self, n, total, total_sq):
        """After n probe trials with these sums: do the checked trials start now?"""
        if n + self.checked >= self.max_trials:
            return True
        return (self.precision > 0 and n + self.checked >= self.min_trials
                and total >= self.min_window_ms
                and mean_is_known(n, total, total_sq, self.precision))

    def ends_as_planned(self, timed):
        """Whether a loop's timed trials (DISCARD_FIRST excluded) stop where the plan stops:
        the checked trials start after the first probe count the plan accepts."""
        probes = len(timed) - self.checked
        if probes < 0 or len(timed) > self.max_trials:
            return False
        total = total_sq = 0.0
        for n in range(probes + 1):
            if self.checked_trials_start(n, total, total_sq):
                return n == probes
            if n < probes:
                total += timed[n]
                total_sq += timed[n] * timed[n]
        return False


def timed_loop(call, arg_sets, plan, flush, on_trial=None, event=None, synchronize=None,
               perf_counter=time.perf_counter, before_trial=None):
    """ms of every trial, the DISCARD_FIRST first included; as many as `plan` (a TrialPlan)
    says. flush is None on the CPU. on_trial(trial, set index, output, checked) runs after
    each trial's timing (checked: one of the plan's checked trials), before_trial() before it
    starts: neither is timed (the candidate's process restores torch's flags there, work the
    reference's loop does not have). The candidate's process passes the event class and
    synchronize it captured before any candidate code ran."""
    event = event or torch.cuda.Event
    synchronize = synchronize or torch.cuda.synchronize
    k = len(arg_sets)
    times = []
    checked_from = None  # the first checked trial, once the plan has said when
    probes, total, total_sq = 0, 0.0, 0.0
    t = 0
    while True:
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
            on_trial(t, t % k, out, checked_from is not None)
        del out
        t += 1
        if checked_from is None and t >= DISCARD_FIRST:
            if t > DISCARD_FIRST:  # trial t - 1 was a probe
                probes += 1
                total += ms
                total_sq += ms * ms
            if plan.checked_trials_start(probes, total, total_sq):
                checked_from = t
        if checked_from is not None and t >= checked_from + plan.checked:
            return times


def time_calls(worker, model, arg_sets, warmup, plan):
    """The reference's timing: warm-up calls, then the timed loop (`plan`, a TrialPlan with no
    checked trials); ms per trial without the discarded first ones. Runs under torch.no_grad()."""
    with torch.no_grad():
        for i in range(warmup):
            model(*arg_sets[i % len(arg_sets)])
            if worker.cuda:
                torch.cuda.synchronize()
        flush = None
        if worker.cuda:
            torch.cuda.empty_cache()
            flush = flush_buffer(worker.device, worker.l2_bytes)
        times = timed_loop(lambda args: model(*args), arg_sets, plan, flush)
    return times[DISCARD_FIRST:]
