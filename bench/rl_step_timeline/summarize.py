#!/usr/bin/env python3
"""The per-stage step timeline of one or more runs, from their metrics.jsonl.

    python3 summarize.py sync=RUN1/metrics.jsonl async=RUN2/metrics.jsonl [--skip 1] [--json OUT]

For each run: one row per step (wall, each stage's wall time with its summed time, busy
fractions, wall / slowest stage), then the mean over the steps after the first --skip (warm-up:
the first step pays for compiling kernels and filling caches). The last line compares the modes:
in async mode the step wall time should approach the slowest stage (ratio near 1).

In async mode a step's own requests overlap the steps before and after it, so their wall times
are not that step's stage times. Two views of the async ratio are printed: the async step wall
time over the slowest stage of the sync run (where each stage ran alone, so its wall time is the
stage's cost per step), and 1 / the largest busy fraction over the steps' whole wall time (1.0:
some stage never idled).
"""
import argparse
import json
import sys

FIELDS = ["wall_s", "sampling_s", "sampling_wall_s", "evaluating_s", "evaluating_wall_s",
          "training_s", "publishing_s", "sampler_busy", "evaluator_busy", "learner_busy",
          "slowest_stage_s", "steps_in_flight", "stale_dropped", "rate/correct"]


def read_steps(path):
    """step -> {timeline field or metric: value}, from either layout of metrics.jsonl: one line
    per step with flat keys (step_timeline/wall_s, ...), or one record per line (older runs:
    "name": "step_timeline.wall_s")."""
    steps = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            items = [(r["name"], r.get("value"))] if "name" in r else list(r.items())
            for name, value in items:
                for prefix in ("step_timeline/", "step_timeline."):
                    if name.startswith(prefix):
                        steps.setdefault(r["step"], {})[name[len(prefix):]] = value
                if name in ("reward/mean", "rate/correct", "rate/compiled"):
                    steps.setdefault(r["step"], {})[name] = value
    return {s: v for s, v in steps.items() if "wall_s" in v}


def row(step, v):
    slowest = v.get("slowest_stage_s", 0) or 0
    return "%5s  %7.1f  %7.1f (%7.1f)  %7.1f (%7.1f)  %7.1f  %7.2f  %4.0f%%/%4.0f%%/%4.0f%%  %6.2f  %9.0f  %4.0f%%" % (
        step, v["wall_s"], v.get("sampling_wall_s", 0), v.get("sampling_s", 0),
        v.get("evaluating_wall_s", 0), v.get("evaluating_s", 0), v.get("training_s", 0),
        v.get("publishing_s", 0), 100 * v.get("sampler_busy", 0), 100 * v.get("evaluator_busy", 0),
        100 * v.get("learner_busy", 0), v["wall_s"] / slowest if slowest > 0 else float("nan"),
        v.get("steps_in_flight", 0), 100 * v.get("rate/correct", 0))


HEADER = ("%5s  %7s  %17s  %17s  %7s  %7s  %16s  %6s  %9s  %5s" % (
    "step", "wall s", "sampling s (sum)", "evaluating s (sum)", "train s", "publish", "busy S/E/L",
    "wall/slowest", "in flight", "correct"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="LABEL=metrics.jsonl")
    ap.add_argument("--skip", type=int, default=1, help="warm-up steps left out of the means")
    ap.add_argument("--json", help="write the means here")
    args = ap.parse_args()
    means = {}
    for spec in args.runs:
        label, _, path = spec.partition("=")
        steps = read_steps(path)
        print("\n== %s (%s): %d step(s)" % (label, path, len(steps)))
        if not steps:
            print("   no step_timeline records")
            continue
        print(HEADER)
        for s in sorted(steps):
            print(row(s, steps[s]))
        kept = [steps[s] for s in sorted(steps)][args.skip:] or [steps[s] for s in sorted(steps)]
        mean = {k: sum(v.get(k, 0) for v in kept) / len(kept) for k in FIELDS}
        # Busy fractions over the kept steps' whole wall time: in async mode a step can end a
        # second after the one before (its requests ran during that one), and a plain mean would
        # count its fraction of that second as much as another step's of a minute and a half.
        walls = sum(v["wall_s"] for v in kept)
        for k in ("sampler_busy", "evaluator_busy", "learner_busy"):
            mean[k] = sum(v.get(k, 0) * v["wall_s"] for v in kept) / walls if walls > 0 else 0.0
        mean["ratio_wall_to_slowest"] = (mean["wall_s"] / mean["slowest_stage_s"]
                                         if mean["slowest_stage_s"] > 0 else float("nan"))
        mean["steps_averaged"] = len(kept)
        means[label] = mean
        print(row("mean", mean))
        print("%s: step wall %.1f s, slowest stage %.1f s, ratio %.2f (over %d step(s) after "
              "%d warm-up)" % (label, mean["wall_s"], mean["slowest_stage_s"],
                               mean["ratio_wall_to_slowest"], len(kept), args.skip))
    if "sync" in means and "async" in means and means["async"]["wall_s"] > 0:
        print("\nasync / sync step wall time: %.2f (%.1f s vs %.1f s); wall / slowest stage: sync "
              "%.2f, async %.2f" % (means["async"]["wall_s"] / means["sync"]["wall_s"],
                                    means["async"]["wall_s"], means["sync"]["wall_s"],
                                    means["sync"]["ratio_wall_to_slowest"],
                                    means["async"]["ratio_wall_to_slowest"]))
    if "sync" in means and "async" in means and means["sync"]["slowest_stage_s"] > 0:
        a, sy = means["async"], means["sync"]
        busiest = max(a["sampler_busy"], a["evaluator_busy"], a["learner_busy"])
        a["ratio_wall_to_sync_slowest"] = a["wall_s"] / sy["slowest_stage_s"]
        a["ratio_wall_to_busiest"] = 1.0 / busiest if busiest > 0 else float("nan")
        print("async step wall / slowest stage of the sync run: %.2f (%.1f s vs %.1f s); "
              "1 / busiest stage's share: %.2f (goal: <= 1.25)" % (
                  a["ratio_wall_to_sync_slowest"], a["wall_s"], sy["slowest_stage_s"],
                  a["ratio_wall_to_busiest"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(means, f, indent=2)
    if not means:
        sys.exit(1)


if __name__ == "__main__":
    main()
