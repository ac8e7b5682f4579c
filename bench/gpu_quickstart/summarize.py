"""The GPU quickstart's record: the RL curve from metrics.jsonl and kbrl-eval's pass@1 / fast_1
before and after training, as markdown for BENCHMARKS.md.

    python3 bench/gpu_quickstart/summarize.py OUT   (the folder gpu_run.sh wrote)"""

import json
import os
import sys


def curve(metrics_path):
    rows = []
    with open(metrics_path) as f:
        for line in f:
            rec = json.loads(line)
            if "rate/correct" in rec:
                rows.append(rec)
    return rows


def overall(results_path):
    with open(results_path) as f:
        agg = json.load(f)["aggregate"]["overall"]
    return agg


def main():
    out = sys.argv[1]
    run = os.path.join(out, "runs", "gpu-quickstart")
    rows = curve(os.path.join(run, "metrics.jsonl"))
    print("| step | mean reward | correct | mean speedup (correct) | step wall (s) | elapsed (s) |")
    print("|---|---|---|---|---|---|")
    elapsed = 0.0
    for r in rows:
        wall = r.get("time/total", 0.0)
        elapsed += wall
        print("| %d | %.3f | %.0f %% | %.2f | %.1f | %.0f |" % (
            r.get("step", 0), r.get("reward/mean", 0.0), 100 * r.get("rate/correct", 0.0),
            r.get("speedup/mean", 0.0), wall, elapsed))
    print()
    print("| held-out (config/gpu_quickstart/heldout) | pass@1 | fast_1 | fast_1.5 |")
    print("|---|---|---|---|")
    for name in ("before", "after"):
        path = os.path.join(out, name, "results.json")
        if not os.path.exists(path):
            print("| %s | (missing) | | |" % name)
            continue
        o = overall(path)
        p, f = o.get("pass_at_k", {}), o.get("fast_p", {})
        print("| %s | %s | %s | %s |" % (name, p.get("1", "?"), f.get("1.0", f.get("1", "?")),
                                         f.get("1.5", "?")))


if __name__ == "__main__":
    main()
