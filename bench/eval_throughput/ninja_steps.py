#!/usr/bin/env python3
"""Where load_inline build time goes: reads every .ninja_log under a folder of extension builds
(kbrl-bench-eval --keep DIR: DIR/extensions) and prints, per kind of build step, how many ran and
their mean and total seconds; also how long the precompiled torch header took to make.

    ninja_steps.py DIR [DIR...]
"""

import collections
import glob
import os
import sys


def step_kind(output):
    if output.endswith(".so"):
        return "link (.so)"
    if output.endswith(".cuda.o"):
        return "nvcc (cuda.cu)"
    if output.endswith(".o"):
        return "c++ (main.cpp)"
    return "other"


def main(argv):
    roots = argv[1:]
    seconds = collections.defaultdict(list)
    logs = [l for root in roots for l in glob.glob(os.path.join(root, "**", ".ninja_log"),
                                                    recursive=True)]
    for log in logs:
        with open(log) as f:
            for line in f:
                parts = line.split("\t")
                if len(parts) < 4 or line.startswith("#"):
                    continue
                start_ms, end_ms, output = int(parts[0]), int(parts[1]), parts[3]
                seconds[step_kind(output)].append((end_ms - start_ms) / 1000.0)
    print("%-16s %6s %9s %9s" % ("build step", "count", "mean s", "total s"))
    for kind, xs in sorted(seconds.items()):
        print("%-16s %6d %9.1f %9.1f" % (kind, len(xs), sum(xs) / len(xs), sum(xs)))
    root = roots[0]
    for gch in glob.glob(os.path.join(root, ".kbrl-pch", "*", "*.gch")):
        header = gch[: -len(".gch")]
        print("precompiled torch/extension.h: %.1f s to make (%s)" % (
            os.path.getmtime(gch) - os.path.getmtime(header), os.path.basename(os.path.dirname(gch))))
    for failed in glob.glob(os.path.join(root, ".kbrl-pch", "*", "failed")):
        print("precompiled header FAILED:\n" + open(failed).read()[-1500:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
