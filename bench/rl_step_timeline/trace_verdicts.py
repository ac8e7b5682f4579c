#!/usr/bin/env python3
"""Summarises the verdicts in a run's traces.jsonl: per problem, how many turns were correct,
compiled-but-wrong, failed and with which error; then the first error excerpt of each error kind.

    python3 trace_verdicts.py RUN_DIR/traces.jsonl
"""
import collections
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    per_problem = collections.defaultdict(collections.Counter)
    first_excerpt = {}
    ends = collections.Counter()
    with open(sys.argv[1]) as f:
        for line in f:
            t = json.loads(line)
            ends[t.get("end", "?").split(":")[0]] += 1
            for turn in t.get("turns", []):
                if turn.get("correct"):
                    kind = "correct"
                elif not turn.get("compiled"):
                    kind = "not compiled: " + str(turn.get("error", "?"))
                else:
                    kind = "wrong or failed: " + str(turn.get("error", "?"))
                per_problem[t.get("problem", "?")][kind] += 1
                excerpt = turn.get("error_excerpt", "")
                if excerpt and kind not in first_excerpt:
                    first_excerpt[kind] = excerpt
    for problem in sorted(per_problem):
        print("%-28s %s" % (problem, ", ".join("%s %d" % kv for kv in per_problem[problem].items())))
    print("episode ends:", dict(ends))
    for kind, excerpt in first_excerpt.items():
        print("--- %s\n%s" % (kind, excerpt[:800]))


if __name__ == "__main__":
    main()
