#!/usr/bin/env python3
"""Where a decode step's device time goes, from a kbrl-bench-generate --profile trace.

The profiled run prefills its prompts before it decodes, and with long prompts the prefill's
kernels dominate the trace (kbrl-bench-generate's own table counts them in). This keeps the
kernels from the first decode-attention kernel on (the first decode step; the prefill uses other
attention kernels) and divides by the decode steps; then the device's idle time between kernels,
by the length of each wait. With programmatic dependent launch (the default on sm_90) a kernel
starts before the one before it ends and its duration includes that wait: the table's times then
overlap and over-count, and the span and idle lines are the ones to read:

    python3 decode_profile.py TRACE.json STEPS [--top 20] [--marker decode_attention]
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("steps", type=int, help="decode steps in the profiled run")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--marker", default="decode_attention",
                    help="a substring of the first decode step's attention kernel")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    kernels = sorted((e for e in events if e.get("ph") == "X"
                      and str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")),
                     key=lambda e: e["ts"])
    start = next((e["ts"] for e in kernels if args.marker in e["name"]), None)
    if start is None:
        raise SystemExit("no kernel named like %r in %s" % (args.marker, args.trace))
    # the decode step's kernels before its attention (norm, qkv GEMM, rope) come just before it
    window = [e for e in kernels if e["ts"] >= start]
    total = collections.Counter()
    calls = collections.Counter()
    for e in window:
        total[e["name"]] += e.get("dur", 0)
        calls[e["name"]] += 1
    all_us = sum(total.values())
    print("decode steps: %d; device time %.1f us per step (from the first %r kernel on)"
          % (args.steps, all_us / args.steps, args.marker))
    print("%8s %10s %9s %6s  kernel" % ("calls", "us/step", "us/call", "share"))
    for name, us in total.most_common(args.top):
        print("%8d %10.1f %9.2f %5.1f%%  %s" % (calls[name], us / args.steps, us / calls[name],
                                                100.0 * us / all_us, name[:110]))
    print_idle(window, args.steps)


def print_idle(window, steps):
    """Where the device waits: the time between one kernel's end and the next one's start,
    by the length of the wait (short ones are kernel-to-kernel handovers inside a graph, long
    ones the host's turn between steps)."""
    bins = [(0, 2), (2, 5), (5, 20), (20, 100), (100, float("inf"))]
    count = collections.Counter()
    waited = collections.Counter()
    end = window[0]["ts"] + window[0].get("dur", 0)
    for e in window[1:]:
        gap = e["ts"] - end
        if gap > 0:
            for lo, hi in bins:
                if lo <= gap < hi:
                    count[lo] += 1
                    waited[lo] += gap
        end = max(end, e["ts"] + e.get("dur", 0))
    span = end - window[0]["ts"]
    idle = sum(waited.values())
    print("span %.1f us per step, device idle %.1f us per step (%.1f%%):"
          % (span / steps, idle / steps, 100.0 * idle / span))
    for lo, hi in bins:
        label = "%g-%g us" % (lo, hi) if hi != float("inf") else ">= %g us" % lo
        print("  waits of %-10s %8.1f a step, %8.1f us a step" % (label, count[lo] / steps,
                                                                waited[lo] / steps))


if __name__ == "__main__":
    main()
