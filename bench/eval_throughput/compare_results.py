#!/usr/bin/env python3
"""Puts the two sides of the evaluator-throughput benchmark side by side.

    compare_results.py --baseline results.json [more.json ...] --kbrl kbrl.json [--manifest M]

Several --baseline files are shards of one baseline run (kernelbench_baseline.py --start/--limit,
for example one per GPU): their candidates are merged and their wall times added, which is the
time one sequential baseline process would have taken.

results.json: kernelbench_baseline.py; kbrl.json: build-gpu/kbrl-bench-eval --out. Both hold
{"candidates": [{"id", "correct", "kernel_ms", "reference_ms", ...}], "total_seconds",
"candidates_per_minute"}. Prints every candidate whose `correct` differs, the agreement count,
both throughputs and their ratio, and how the timings of candidates correct on both sides compare.
Exit status 1 when a verdict differs.
"""

import argparse
import json
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    cands = doc.get("candidates", doc if isinstance(doc, list) else [])
    return doc, {c["id"]: c for c in cands if isinstance(c, dict) and "id" in c}


def merge_shards(paths):
    """One baseline document from shards: candidates united, seconds added."""
    merged = {"candidates": [], "total_seconds": 0.0, "estimated_seconds": 0.0}
    for path in paths:
        doc, _ = load(path)
        merged["candidates"] += doc.get("candidates", [])
        merged["total_seconds"] += doc.get("total_seconds") or 0.0
        merged["estimated_seconds"] += doc.get("estimated_seconds") or 0.0
    n = len(merged["candidates"])
    seconds = merged["total_seconds"] + merged["estimated_seconds"]
    merged["candidates_per_minute"] = n / (seconds / 60.0) if seconds > 0 else None
    return merged, {c["id"]: c for c in merged["candidates"] if "id" in c}


def phase_sums(cands, keys):
    """Seconds per phase summed over candidates; a phase is a key of phase_seconds or a field."""
    sums = dict.fromkeys(keys, 0.0)
    for c in cands:
        phases = c.get("phase_seconds") or {}
        for k in keys:
            sums[k] += float(phases.get(k, c.get(k, 0.0)) or 0.0)
    return sums


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, nargs="+")
    ap.add_argument("--kbrl", required=True)
    ap.add_argument("--manifest")
    args = ap.parse_args(argv)
    bdoc, base = merge_shards(args.baseline)
    kdoc, kbrl = load(args.kbrl)
    kinds = {}
    if args.manifest:
        with open(args.manifest) as f:
            kinds = {m["id"]: m.get("kind") for m in json.load(f)}
    ids = [i for i in base if i in kbrl]
    differ = []
    for i in ids:
        b, k = bool(base[i].get("correct")), bool(kbrl[i].get("correct"))
        if b != k:
            differ.append(i)
            print("verdicts differ on %s (%s, manifest: %s): baseline %s (%s), kbrl %s (%s)" % (
                i, base[i].get("problem", "?"), kinds.get(i, base[i].get("kind", "?")),
                "correct" if b else "incorrect", base[i].get("error", "?"),
                "correct" if k else "incorrect", kbrl[i].get("error", "?")))
    print("verdicts: %d of %d candidates agree (baseline only: %d, kbrl only: %d)" % (
        len(ids) - len(differ), len(ids), len(set(base) - set(kbrl)), len(set(kbrl) - set(base))))
    bc, kc = bdoc.get("candidates_per_minute"), kdoc.get("candidates_per_minute")
    print("throughput: baseline %s candidates/min (%d candidates, %.1f s%s), kbrl %s candidates/min"
          " (%d candidates, %.1f s)%s" % (
              "%.2f" % bc if bc else "?", len(base), bdoc.get("total_seconds") or 0.0,
              ", %.1f s estimated" % bdoc["estimated_seconds"] if bdoc.get("estimated_seconds")
              else "", "%.2f" % kc if kc else "?", len(kbrl), kdoc.get("total_seconds") or 0.0,
              "; kbrl / baseline = %.1fx" % (kc / bc) if bc and kc else ""))
    b_phases = phase_sums(base.values(), ("startup", "build", "correctness", "timing", "reference"))
    print("baseline time by phase (s, summed): " + ", ".join(
        "%s %.1f" % kv for kv in b_phases.items()))
    k_phases = phase_sums(kbrl.values(), ("build_seconds", "compile_seconds", "correctness_seconds",
                                          "timing_seconds", "reference_seconds"))
    print("kbrl time by phase (s, summed; CPU builds overlap the GPU): " + ", ".join(
        "%s %.1f" % kv for kv in k_phases.items()))
    ratios = []
    for i in ids:
        b, k = base[i], kbrl[i]
        if b.get("correct") and k.get("correct") and b.get("kernel_ms") and k.get("kernel_ms"):
            ratios.append(k["kernel_ms"] / b["kernel_ms"])
    if ratios:
        print("kernel time kbrl / baseline over %d candidates correct on both: median %.3f, "
              "min %.3f, max %.3f" % (len(ratios), median(ratios), min(ratios), max(ratios)))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
