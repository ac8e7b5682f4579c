#!/usr/bin/env python3
"""Recorded completions for sampler.replay_completions from the evaluator benchmark's candidates.

Reads the manifest that bench/eval_throughput/make_candidates.py writes (entries {"id",
"problem": "level1/19_ReLU.py", "candidate": "c001.py", "kind", ...}) and writes one JSON line
per candidate of the chosen problems:

    {"problem": "level1/19_ReLU", "completion": "<think>...</think>\n<KERNEL>...</KERNEL>",
     "kind": "correct", "candidate": "c029.py"}

in the answer format the episodes parse (runtime/episode/answer_format.hpp), with the candidate
file's bytes between the tags as they are, so that the kernel an episode sends to the evaluators
is byte-equal to the candidate (test/test_replay_candidates.cpp checks it). A problem's
candidates keep the manifest's order, so a group of G samples cycles through correct, wrong and
failing ones as a GRPO group would.

    python3 make_replay.py --manifest C/manifest.json --candidates C --level 1 \
        --numbers 19,20,21,22,25,26,27,28 --out replay.jsonl
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--candidates", required=True, help="folder holding the candidate files")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--numbers", default="", help="problem numbers, comma-separated (default: all)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    wanted = {int(n) for n in args.numbers.split(",") if n.strip()}
    with open(args.manifest) as f:
        manifest = json.load(f)
    lines, problems = [], {}
    for entry in manifest:
        problem = entry["problem"][:-3] if entry["problem"].endswith(".py") else entry["problem"]
        level, _, name = problem.partition("/")
        if level != "level%d" % args.level:
            continue
        number = int(name.split("_", 1)[0])
        if wanted and number not in wanted:
            continue
        # Bytes, decoded as UTF-8 without newline translation: the kernel the episode parses
        # out of the completion is then byte-equal to the file kbrl-bench-eval reads (same
        # source hash, same build folder, same line numbers in error excerpts).
        with open(os.path.join(args.candidates, entry["candidate"]), "rb") as f:
            code = f.read().decode("utf-8")
        if "<KERNEL>" in code or "</KERNEL>" in code:
            sys.exit("make_replay: %s holds a <KERNEL> tag: its completion would not parse as "
                     "the candidate" % entry["candidate"])
        # Nothing between the tags but the file: the episode's parser takes the text between
        # <KERNEL> and </KERNEL> as it is (runtime/episode/answer_format.cpp).
        completion = ("<think>Write one CUDA kernel for the operator and call it from "
                      "ModelNew.forward.</think>\n<KERNEL>" + code + "</KERNEL>")
        lines.append({"problem": problem, "completion": completion, "kind": entry.get("kind", ""),
                      "candidate": entry["candidate"]})
        problems.setdefault(problem, []).append(entry.get("kind", "?"))
    missing = sorted(wanted - {int(p.split("/")[1].split("_", 1)[0]) for p in problems})
    if missing:
        sys.exit("make_replay: no candidates for level %d problem(s) %s in %s" % (
            args.level, ",".join(map(str, missing)), args.manifest))
    if not lines:
        sys.exit("make_replay: no candidates selected from %s" % args.manifest)
    with open(args.out, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    for p in sorted(problems):
        print("%-40s %s" % (p, ", ".join(problems[p])))
    print("wrote %d recorded completions of %d problems to %s" % (len(lines), len(problems), args.out))


if __name__ == "__main__":
    main()
