#!/usr/bin/env python3
"""Prints the table of a learner_throughput run: every row's figures, kbrl / peft on the same
shapes (goal: at least 1.5x), and data-parallel scaling against one GPU.

    summarize.py OUT        (reads OUT/*.json written by gpu_bench.sh)
"""

import glob
import json
import os
import sys

GiB = 2.0 ** 30


def load(out):
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        try:
            doc = json.load(open(path))
        except Exception as e:  # a torn file is a failed row, not a failed summary
            doc = {"error": "unreadable %s: %s" % (path, e)}
        rows[os.path.splitext(os.path.basename(path))[0]] = doc
    return rows


def peak_gib(doc):
    peaks = [m.get("peak_allocated_bytes", -1) for m in doc.get("memory", [])]
    peaks = [p for p in peaks if p is not None and p >= 0]
    return "%.1f" % (max(peaks) / GiB) if peaks else "-"


def main():
    out = sys.argv[1]
    rows = load(out)
    if not rows:
        print("no results under %s" % out)
        return
    print("%-28s %12s %9s %7s %7s %10s" % ("row", "tokens/s", "s/step", "MFU", "HFU", "peak GiB"))
    for name, d in rows.items():
        if "error" in d:
            print("%-28s FAILED: %s" % (name, d["error"][:160]))
            continue
        print("%-28s %12.0f %9.3f %6.1f%% %6.1f%% %10s" % (
            name, d["tokens_per_s"], d["mean_step_s"], 100 * d["mfu"], 100 * d["hfu"],
            peak_gib(d)))
    print()
    for name, d in rows.items():
        if not name.startswith("kbrl-") or "-dp" in name \
                or name.endswith(("-lora-fp32", "-mask", "-old")):
            continue
        peer = rows.get("peft-" + name[len("kbrl-"):])
        if peer is None:
            continue
        if "error" in d or "error" in peer:
            print("%s vs peft: no ratio (%s failed)" % (name, "kbrl" if "error" in d else "peft"))
            continue
        ratio = d["tokens_per_s"] / peer["tokens_per_s"]
        print("%s: kbrl / peft = %.2fx tokens/s (goal 1.5x: %s), memory %s vs %s GiB" % (
            name[len("kbrl-"):], ratio, "met" if ratio >= 1.5 else "NOT met", peak_gib(d),
            peak_gib(peer)))
    # The trainer's older paths (row set paths, 16kmask) against the default row of the same
    # shapes: how much each faster path gives.
    for name, d in rows.items():
        for suffix in ("-lora-fp32", "-mask", "-old"):
            if not (name.startswith("kbrl-") and name.endswith(suffix)):
                continue
            default = rows.get(name[: -len(suffix)])
            if default is None or "error" in d or "error" in default:
                print("%s: no comparison (a row is missing or failed)" % name)
                continue
            # Same seed and samples: the losses after the last step should agree to bf16
            # rounding, a check on the GPU that the paths compute the same training.
            print("%s: the default paths are %.2fx the%s row's tokens/s, memory %s vs %s GiB, "
                  "last loss %.4f vs %.4f" % (
                      name[: -len(suffix)], default["tokens_per_s"] / d["tokens_per_s"], suffix,
                      peak_gib(default), peak_gib(d), default.get("last_loss", float("nan")),
                      d.get("last_loss", float("nan"))))
    one = rows.get("kbrl-1.5b-8x2048")
    for n in (2, 4):
        dp = rows.get("kbrl-1.5b-8x2048-dp%d" % n)
        if dp is None:
            continue
        if "error" in dp or one is None or "error" in one:
            print("data parallel x%d: no figure (a row failed)" % n)
            continue
        speedup = dp["tokens_per_s"] / one["tokens_per_s"]
        print("data parallel x%d (%s): %.0f tokens/s = %.2fx one GPU (%.0f%% scaling efficiency)" % (
            n, dp.get("backend", "?"), dp["tokens_per_s"], speedup, 100 * speedup / n))


if __name__ == "__main__":
    main()
