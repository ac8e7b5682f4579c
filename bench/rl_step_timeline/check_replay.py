#!/usr/bin/env python3
"""Checks, for gpu_bench.sh, that the evaluators of an RL timeline run get the candidates as
kbrl-bench-eval does. Three subcommands:

  kernels REPLAY CANDIDATES
      For each recorded completion: the kernel an episode parses out of it (the text between
      <KERNEL> and </KERNEL>, runtime/episode/answer_format.cpp) compared byte for byte with its
      candidate file, and its source hash (FNV-1a 64: the name of its build folder,
      runtime/eval/eval_engine.cpp build_dir_of).
  extract REPLAY PROBLEM OUT
      Writes the kernel of PROBLEM's first recorded completion of kind "correct" to OUT (for a
      kbrl-eval-kernel check on a free GPU); prints its candidate file name.
  received REPLAY CANDIDATES RUN_ROOT EXTENSIONS_DIR
      What the run's workers were handed: the build folders present for the replayed kernels'
      hashes, and the programs the CPU builders received (RUN_ROOT/**/builder.*/build-*/
      candidate.py, kept after each build) matched byte for byte against the candidate files.
"""
import glob
import json
import os
import sys


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def kernel_of(completion):
    """The episode parser's answer for tagged completions (think block first, then one
    <KERNEL> block), or None."""
    rest = completion
    think = rest.find("<think>")
    if think >= 0:
        close = rest.find("</think>", think)
        if close < 0:
            return None
        rest = rest[close + len("</think>"):]
    start = rest.find("<KERNEL>")
    if start < 0 or rest.count("<KERNEL>") != 1:
        return None
    end = rest.find("</KERNEL>", start)
    return None if end < 0 else rest[start + len("<KERNEL>"):end]


def replayed(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def kernels(replay, cands):
    equal = 0
    rows = replayed(replay)
    for r in rows:
        code = kernel_of(r["completion"])
        code_b = code.encode("utf-8") if code is not None else b""
        cand = r.get("candidate", "")
        want = read_bytes(os.path.join(cands, cand)) if cand else None
        same = want is not None and code_b == want
        equal += same
        why = "byte-equal" if same else (
            "no candidate named" if want is None else
            "DIFFERS (%d bytes parsed, %d in the file; first difference at byte %d)" % (
                len(code_b), len(want),
                next((i for i, (a, b) in enumerate(zip(code_b, want)) if a != b),
                     min(len(code_b), len(want)))))
        print("  %-22s %-9s %-8s hash %s  %s" % (r["problem"], cand, r.get("kind", ""),
                                                 fnv1a64(code_b), why))
    print("replay: %d of %d parsed kernels byte-equal to their candidate files" % (equal, len(rows)))
    return 0 if equal == len(rows) else 1


def extract(replay, problem, out):
    for r in replayed(replay):
        if r["problem"] == problem and r.get("kind") == "correct":
            with open(out, "wb") as f:
                f.write(kernel_of(r["completion"]).encode("utf-8"))
            print(r.get("candidate", "?"))
            return 0
    sys.stderr.write("check_replay: no correct completion of %s in %s\n" % (problem, replay))
    return 1


def received(replay, cands, run_root, ext_dir):
    rows = replayed(replay)
    by_hash = {}
    for r in rows:
        code = kernel_of(r["completion"]) or ""
        by_hash.setdefault(fnv1a64(code.encode("utf-8")), r)
    present = [h for h in by_hash if os.path.isdir(os.path.join(ext_dir, h))]
    others = sorted(set(os.listdir(ext_dir)) - set(by_hash)) if os.path.isdir(ext_dir) else []
    print("build folders in %s: %d of %d distinct replayed kernels%s" % (
        ext_dir, len(present), len(by_hash),
        "; %d other folder(s): %s" % (len(others), " ".join(others[:4])) if others else ""))
    files = {c: read_bytes(os.path.join(cands, c))
             for c in {r.get("candidate", "") for r in rows} if c}
    got = sorted(glob.glob(os.path.join(run_root, "**", "builder.*", "build-*", "candidate.py"),
                           recursive=True))
    matched = 0
    for path in got:
        data = read_bytes(path)
        name = next((c for c, b in sorted(files.items()) if b == data), None)
        matched += name is not None
        if name is None and got.index(path) < 3:
            print("  %s matches no candidate file (%d bytes, hash %s)" % (
                path, len(data), fnv1a64(data)))
    print("programs the builders received: %d, byte-equal to a candidate file: %d" % (
        len(got), matched))
    return 0


def main():
    args = sys.argv[1:]
    if args[:1] == ["kernels"] and len(args) == 3:
        return kernels(*args[1:])
    if args[:1] == ["extract"] and len(args) == 4:
        return extract(*args[1:])
    if args[:1] == ["received"] and len(args) == 5:
        return received(*args[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
