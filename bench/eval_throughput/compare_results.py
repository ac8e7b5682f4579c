#!/usr/bin/env python3
"""Puts the two sides of the evaluator-throughput benchmark side by side.

    compare_results.py --baseline results.json --kbrl kbrl.json [--manifest M]

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


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--kbrl", required=True)
    ap.add_argument("--manifest")
    args = ap.parse_args(argv)
    bdoc, base = load(args.baseline)
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
