#!/usr/bin/env python3
"""Where load_inline build time goes: reads every .ninja_log under a folder of extension builds
(kbrl-bench-eval --keep DIR: DIR/extensions) and prints, per kind of build step, how many ran and
their mean and total seconds, for all builds and for the first N to start and the rest apart
(the first wave runs before any precompiled header is there); also how long the precompiled
torch header took to make.

    ninja_steps.py [--first N] DIR [DIR...]
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


def read_build(log):
    """One build's steps from its .ninja_log: (started, [(kind, seconds)], whole seconds), its
    start in seconds since the epoch (the log's last write, at its last step's end, less that
    step's end time in the build)."""
    steps, last_end_ms = [], 0
    with open(log) as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) < 4 or line.startswith("#"):
                continue
            start_ms, end_ms, output = int(parts[0]), int(parts[1]), parts[3]
            steps.append((step_kind(output), (end_ms - start_ms) / 1000.0))
            last_end_ms = max(last_end_ms, end_ms)
    return os.path.getmtime(log) - last_end_ms / 1000.0, steps, last_end_ms / 1000.0


def print_steps(title, builds):
    seconds = collections.defaultdict(list)
    for _, steps, _ in builds:
        for kind, s in steps:
            seconds[kind].append(s)
    print("%-16s %6s %9s %9s   %s" % ("build step", "count", "mean s", "total s", title))
    for kind, xs in sorted(seconds.items()):
        print("%-16s %6d %9.1f %9.1f" % (kind, len(xs), sum(xs) / len(xs), sum(xs)))
    if builds:
        print("%-16s %6d %9.1f" % ("whole build", len(builds),
                                   sum(b[2] for b in builds) / len(builds)))


def main(argv):
    args = argv[1:]
    first = 12  # the builders of gpu_bench.sh: the first wave ran before any header was made
    if args[:1] == ["--first"]:
        first, args = int(args[1]), args[2:]
    roots = args
    logs = [l for root in roots for l in glob.glob(os.path.join(root, "**", ".ninja_log"),
                                                    recursive=True)]
    builds = sorted(read_build(log) for log in logs)
    print_steps("all builds", builds)
    if len(builds) > first:
        print_steps("the first %d builds to start" % first, builds[:first])
        print_steps("the later ones", builds[first:])
    root = roots[0]
    for gch in glob.glob(os.path.join(root, ".kbrl-pch", "*", "*.gch")):
        header = gch[: -len(".gch")]
        print("precompiled torch/extension.h: %.1f s to make (%s)" % (
            os.path.getmtime(gch) - os.path.getmtime(header), os.path.basename(os.path.dirname(gch))))
    for failed in glob.glob(os.path.join(root, ".kbrl-pch", "*", "failed")):
        print("precompiled header FAILED:\n" + open(failed).read()[-1500:])
    print_main_objects(os.path.join(root, ".kbrl-main"))
    return 0


def print_main_objects(cache):
    """What main.cpp's object cache (tools/kbrl_eval/main_object_cache.py) holds: objects made
    (with the maker's compile time: spec written to object written), and what was not made."""
    folders = sorted(glob.glob(os.path.join(cache, "*")))
    if not folders:
        return
    made, others = [], collections.Counter()
    for folder in folders:
        obj = os.path.join(folder, "main.o")
        if os.path.exists(obj):
            made.append(os.path.getmtime(obj) - os.path.getmtime(os.path.join(folder, "spec.json")))
            continue
        for marker in ("failed", "uncacheable", "refused"):
            path = os.path.join(folder, marker)
            if os.path.exists(path):
                others[marker] += 1
                with open(path) as f:
                    print("main.cpp object %s: %s" % (marker, f.read()[-600:]))
                break
        else:
            others["unfinished"] += 1
    print("main.cpp objects made: %d (maker's compile mean %.1f s, total %.1f s); %s" % (
        len(made), sum(made) / max(1, len(made)), sum(made),
        ", ".join("%s %d" % kv for kv in sorted(others.items())) or "nothing else"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
