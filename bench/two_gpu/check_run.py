"""Whether an RL run's records hold every step exactly once: traces.jsonl has, for each training
step 1..S, exactly B x G trajectories with ids used once, and metrics.jsonl one line per step.
Prints what it found; exit 0 when the run directory is whole.

    python3 bench/two_gpu/check_run.py RUN_DIR STEPS PROBLEMS_PER_STEP GROUP_SIZE"""

import collections
import glob
import json
import os
import sys


def main():
    run, steps, b, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    per_step = collections.Counter()
    ids = collections.Counter()
    traces = sorted(glob.glob(os.path.join(run, "traces*.jsonl")))
    for path in traces:
        with open(path) as f:
            for line in f:
                t = json.loads(line)
                if t.get("eval"):
                    continue
                per_step[t["step"]] += 1
                ids[t["trajectory"]] += 1
    lines = collections.Counter()
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "rate/correct" in rec:
                lines[rec["step"]] += 1
    problems = []
    for s in range(1, steps + 1):
        if per_step[s] != b * g:
            problems.append("step %d: %d trajectories in traces, expected %d" % (s, per_step[s], b * g))
        if lines[s] != 1:
            problems.append("step %d: %d lines in metrics.jsonl, expected 1" % (s, lines[s]))
    extra = sorted(set(per_step) - set(range(1, steps + 1)))
    if extra:
        problems.append("traces of steps beyond the run: %s" % extra)
    twice = [i for i, n in ids.items() if n > 1]
    if twice:
        problems.append("%d trajectory ids appear more than once (e.g. %s)" % (len(twice), twice[:5]))
    print("%s: %d steps, %d trajectories in %d trace file(s), %d metrics lines" % (
        run, steps, sum(per_step.values()), len(traces), sum(lines.values())))
    for p in problems:
        print("  " + p)
    print("whole: every step once, no trajectory lost or counted twice" if not problems
          else "NOT whole")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
