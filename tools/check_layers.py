#!/usr/bin/env python3
"""The build's check that kbrl's layers point down (ARCHITECTURE.md, section 1).

    messages/  <  runtime/  <  actors/  <  applications (tools/node/, tools/evalcli/)
                                           <  mains (tools/*.cpp), test/, bench/

A file may include project headers of its own layer and the layers below, never above. libtorch
(<ATen/...>, <torch/...>, <c10/...>) may be reached, directly or through project headers, only
from the places listed in TORCH_PLACES (the model, training and device code), the actors that
own them (the learner), and the mains, tests and benchmarks: everything else compiles without it.

CMake runs this before it builds the libraries; a violation fails the build with one line per
include at fault, saying which file includes what and what its layer may use. With --list-torch
it prints the runtime sources that reach torch instead (CMake puts them into kbrl_torch, the rest
of runtime/ into kbrl_core). With --split CONFIGURED STAMP it also fails when that list differs
from the one CMake configured with, and touches STAMP so that the next build configures again. --root DIR checks another tree (its tests).
"""

import os
import re
import sys

LAYERS = ["messages", "runtime", "actors", "application", "main"]

MAY_USE = {
    "messages": "messages/",
    "runtime": "messages/ and runtime/",
    "actors": "messages/, runtime/ and actors/",
    "application": "messages/, runtime/, actors/ and tools/node|evalcli/",
    "main": "everything",
}

# Where torch may be reached (prefixes of paths relative to the repository root).
TORCH_PLACES = (
    "runtime/model/",
    "runtime/train/",
    "runtime/warmstart/",
    "runtime/device/",
    "runtime/rl/policy_loss.",
    "runtime/retrieval/model_embedder.",
    "runtime/sampler/builtin_backend.",
    "actors/learner.cpp",
)

SOURCE_DIRS = ("messages", "runtime", "actors", "tools", "test", "bench")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
RAW_STRING = re.compile(r'R"([^(\s"\\]{0,16})\((.*?)\)\1"', re.S)
TORCH_HEADER = re.compile(r"^(ATen|torch|c10|c10d)/")


def layer_of(path):
    top = path.split("/", 1)[0]
    if top in ("messages", "runtime", "actors"):
        return top
    if path.startswith(("tools/node/", "tools/evalcli/")):
        return "application"
    return "main"


def torch_allowed(path):
    return layer_of(path) == "main" or path.startswith(TORCH_PLACES)


def project_files(root):
    files = []
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("data", "node_modules", "__pycache__")]
            for name in filenames:
                if name.endswith((".hpp", ".cpp", ".h", ".cu")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(files)


def read_includes(root, path, known):
    """(project includes as repository paths, torch system headers) of one file."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Raw string literals (kernel sources in tests and examples) are not includes; their lines
    # stay as blank lines so that line numbers stay right.
    text = RAW_STRING.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    project, torch = [], []
    here = os.path.dirname(path)
    for number, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        if kind == "<":
            if TORCH_HEADER.match(name):
                torch.append((number, name))
            continue
        for candidate in (name, os.path.normpath(os.path.join(here, name))):
            if candidate in known:
                project.append((number, candidate))
                break
    return project, torch


def check_split(torch_sources, configured_file, stamp):
    """Problems if the runtime files that reach torch are not those CMake sorted into kbrl_torch
    when it configured (configured_file); touches `stamp` so that the next build configures
    again."""
    try:
        with open(configured_file, encoding="utf-8") as f:
            configured = [line for line in f.read().split("\n") if line]
    except OSError:
        return []
    now, then = set(torch_sources), set(configured)
    if now == then:
        return []
    os.utime(stamp) if os.path.exists(stamp) else open(stamp, "w").close()
    changed = [f"{p} now reaches libtorch" for p in sorted(now - then)]
    changed += [f"{p} no longer reaches libtorch" for p in sorted(then - now)]
    return ["; ".join(changed) + ": the next build sorts the runtime into kbrl_core and "
            "kbrl_torch again (run it again)"]


def main():
    args = sys.argv[1:]
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    if args[:1] == ["--root"] and len(args) >= 2:  # another tree (the checker's own tests)
        root, args = os.path.abspath(args[1]), args[2:]
    files = project_files(root)
    known = set(files)
    graph = {p: read_includes(root, p, known) for p in files}

    # The shortest include chain from each file to a torch header, if any.
    torch_path = {}

    def reach(path, visiting):
        if path in torch_path:
            return torch_path[path]
        project, torch = graph[path]
        best = [path, "<" + torch[0][1] + ">"] if torch else None
        visiting.add(path)
        for _, inc in project:
            if inc in visiting:
                continue
            sub = reach(inc, visiting)
            if sub and (best is None or len(sub) + 1 < len(best)):
                best = [path] + sub
        visiting.discard(path)
        torch_path[path] = best
        return best

    torch_sources = [p for p in files
                     if p.startswith("runtime/") and p.endswith(".cpp") and reach(p, set())]
    if args == ["--list-torch"]:
        for p in torch_sources:
            print(p)
        return 0

    problems = []
    for p in files:
        mine = LAYERS.index(layer_of(p))
        for number, inc in graph[p][0]:
            theirs = LAYERS.index(layer_of(inc))
            if theirs > mine:
                problems.append(f"{p}:{number}: includes {inc} ({layer_of(inc)}); "
                                f"{layer_of(p)} code may use {MAY_USE[layer_of(p)]} only")
        chain = reach(p, set())
        if chain and not torch_allowed(p):
            problems.append(f"{p}: reaches libtorch ({' -> '.join(chain)}); only "
                            + ", ".join(TORCH_PLACES) + " and the mains may")
    if args[:1] == ["--split"] and len(args) == 3:
        problems += check_split(torch_sources, args[1], args[2])
    for line in problems:
        print("layer check: " + line, file=sys.stderr)
    if problems:
        print(f"layer check: {len(problems)} problem(s); ARCHITECTURE.md says what each layer "
              "may use", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
