"""Checks every example answer of solutions.jsonl against the real evaluator on a GPU, and
prints the speedup of each correct one (the rewards RL starts from).

    python3 config/gpu_quickstart/check_labels.py --kbrl-eval build-gpu/kbrl-eval --out DIR \
        [kbrl-eval options, e.g. --gpu 0 --builders 12 eval.cache_dir=...]

Writes the answers as a kbrl-eval generations folder (DIR/generations), runs kbrl-eval on them
with the cuda backend, and compares each sample's verdict with its label: correct, incorrect
(a mismatch), compile, runtime, format. Exit 0 when every label holds."""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def verdict_label(sample):
    if sample.get("correct"):
        return "correct"
    return {"mismatch": "incorrect"}.get(sample.get("error"), sample.get("error"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kbrl-eval", required=True)
    ap.add_argument("--out", required=True)
    args, extra = ap.parse_known_args()
    answers = [json.loads(line) for line in open(os.path.join(HERE, "solutions.jsonl"))]
    gens = os.path.join(args.out, "generations")
    index = {}
    for a in answers:
        problem = a["problem"]
        k = sum(1 for key in index if key[0] == problem)
        folder = os.path.join(gens, problem)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "sample_%d.txt" % k), "w") as f:
            f.write(a["completion"])
        index[(problem, k)] = a["label"]
    results = os.path.join(args.out, "eval")
    cmd = [args.kbrl_eval, "--generations", gens, "--kernelbench", os.path.join(HERE, "problems"),
           "--backend", "cuda", "--trials", "2", "--perf-trials", "20", "--output", results] + extra
    print(" ".join(cmd), flush=True)
    code = subprocess.call(cmd)
    if code != 0:
        print("kbrl-eval failed with exit status %d" % code)
        return 1
    with open(os.path.join(results, "results.json")) as f:
        samples = json.load(f)["samples"]
    wrong = 0
    print("%-26s %6s %-10s %-10s %8s" % ("problem", "sample", "label", "verdict", "speedup"))
    # kbrl-eval lists every problem with the most samples any has; the others are "missing"
    samples = [s for s in samples if (s["problem"], s["sample"]) in index]
    for s in sorted(samples, key=lambda s: (s["problem"], s["sample"])):
        label = index[(s["problem"], s["sample"])]
        got = verdict_label(s)
        wrong += got != label
        print("%-26s %6d %-10s %-10s %8.2f%s" % (s["problem"], s["sample"], label, got,
                                                 s.get("speedup", 0.0),
                                                 "" if got == label else "   <-- differs"))
    print("%d of %d labels hold" % (len(samples) - wrong, len(samples)))
    return 0 if wrong == 0 and len(samples) == len(answers) else 1


if __name__ == "__main__":
    sys.exit(main())
