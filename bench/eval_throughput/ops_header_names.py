#!/usr/bin/env python3
"""The split-name lists behind kbrl's per-operator CUDA build tier
(tools/kbrl_eval/ops_cuda_header.py), and a screen of a candidate set against one.

The ops header declares fewer names than kbrl's light header (all of ATen): its fixed part
(ATen's core Tensor, the dispatch macros, the tensor operators) and ATen/ops/NAME.h for the
functions the source calls. A source that compiles with both means the same with both when
every function it calls by name (qualified with at::, torch:: or c10::, or unqualified, which
argument-dependent lookup and `using` directives extend to those namespaces) has the same
overload set in both: all of that name's declarations in namespaces at, c10 and torch lie in
the fixed part or in its own ATen/ops/NAME.h (or NAME_ops.h). Member calls see the same class
in both.

  names    clang's AST of two translation units (ATen/ATen.h; the ops header's fixed part)
           gives every namespace-scope function, function template and using declaration of
           at, c10 and torch with its file; a name declared outside the fixed part and outside
           its own per-operator header is "split". Needs clang++ and torch's headers, no GPU.
           The output is the list kbrl reads: tools/kbrl_eval/split_names/torch-X.Y.Z.json
           (with the release and the count of ATen/ops headers it was made from).
  screen   each candidate's CUDA source through the tier's decision: a source that calls a
           split name, or has preprocessor conditionals (a macro only the full header defines
           could change them), stays on the light header.

    ops_header_names.py names --out SPLIT.json [--include DIR ...]
    ops_header_names.py screen --split SPLIT.json --candidates C [--out FILE.json]

--include defaults to torch's own include folders. This screen is an argument, not a proof:
build_times.py checks on a candidate set that the binaries behave the same (identical SASS,
bitwise-identical outputs)."""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from kbrl_eval import ops_cuda_header  # noqa: E402

# one node of `clang -Xclang -ast-dump`: its tree prefix (depth) and kind
NODE = re.compile(r"^([| `]*)[|`]-(\w+) ")
# the files a node's source range mentions, in order (the last is where its name is)
PATHS = re.compile(r"(/[^\s:<>,']+)(?=:\d+:\d+)")
NAME = re.compile(r"(?:col|line):[\d:]+(?: (?:used|referenced|implicit|invalid|constexpr))* "
                  r"(operator[^ ']*|~?\w+)(?: '|$| )")
DECLARATIONS = ("FunctionDecl", "FunctionTemplateDecl", "UsingDecl")
SCOPES = {"NamespaceDecl", "LinkageSpecDecl", "CXXRecordDecl", "ClassTemplateDecl",
          "ClassTemplateSpecializationDecl", "ClassTemplatePartialSpecializationDecl",
          "FunctionTemplateDecl", "FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl",
          "EnumDecl", "TypeAliasTemplateDecl"}
TOP = {"at", "c10", "torch"}
CORE_TU = ops_cuda_header.FIXED_PART  # what every ops header includes
FULL_TU = "#include <ATen/ATen.h>\n"


def namespace_declarations(ast_lines):
    """(namespace, name, file) of every function, function template and using declaration at
    namespace scope in a clang AST dump."""
    stack, current, found = [], None, []
    for line in ast_lines:
        m = NODE.match(line)
        if not m:
            continue
        depth, kind = len(m.group(1)) // 2, m.group(2)
        for path in PATHS.findall(line):
            current = path
        while stack and stack[-1][0] >= depth:
            stack.pop()
        name = None
        if kind == "NamespaceDecl":
            name = line.rstrip().split()[-1]
        elif kind == "UsingDecl":
            name = line.rstrip().split()[-1].split("::")[-1]
        elif kind in DECLARATIONS:
            found_name = NAME.search(line)
            name = found_name.group(1) if found_name else None
        if (kind in DECLARATIONS and name
                and all(s[1] in ("NamespaceDecl", "LinkageSpecDecl") for s in stack)):
            namespace = "::".join(s[2] for s in stack if s[1] == "NamespaceDecl")
            found.append((namespace, name, current))
        if kind in SCOPES:
            stack.append((depth, kind, name))
    return found


def ast_dump(source, includes):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(source)
    try:
        cmd = ["clang++", "-std=c++17", "-fsyntax-only", "-Xclang", "-ast-dump", f.name]
        for d in includes:
            cmd += ["-isystem", d]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, errors="replace")
        found = namespace_declarations(proc.stdout)
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise SystemExit("clang++ failed on %r:\n%s" % (source, err[-2000:]))
        return found
    finally:
        os.unlink(f.name)


def own_header(name, path):
    base = os.path.basename(path)
    return "/ATen/ops/" in path and base in (name + ".h", name + "_ops.h")


def split_names(includes):
    full, core = ast_dump(FULL_TU, includes), ast_dump(CORE_TU, includes)
    core_files = {f for _, _, f in core}
    split = collections.defaultdict(set)
    for namespace, name, path in full:
        if namespace in TOP and path and path not in core_files and not own_header(name, path):
            split[name].add(path.split("/include/")[-1])
    return {k: sorted(v) for k, v in sorted(split.items())}, len(full), len(core)


def torch_release_of(includes):
    """X.Y.Z from torch/version.h in the include folders."""
    for d in includes:
        for sub in ("torch", os.path.join("torch", "headeronly"),
                    os.path.join("torch", "csrc", "api", "include", "torch")):
            path = os.path.join(d, sub, "version.h")
            if os.path.exists(path):
                text = open(path).read()
                parts = [re.search(r"#define TORCH_VERSION_%s (\d+)" % p, text)
                         for p in ("MAJOR", "MINOR", "PATCH")]
                if all(parts):
                    return ".".join(m.group(1) for m in parts)
    raise SystemExit("no torch/version.h with TORCH_VERSION_MAJOR/MINOR/PATCH in %s" % includes)


def screen(data, candidates):
    import nvcc_phases
    from nvcc_phases import light_cuda_header
    ops = ops_cuda_header.OpsHeader("", data["split"], [])
    records = []
    for m in nvcc_phases.buildable_cuda_candidates(candidates):
        arguments = nvcc_phases.captured_load_inline(os.path.join(candidates, m["candidate"]))
        if not arguments or not arguments.get("cuda_sources"):
            continue
        text = "\n".join(nvcc_phases.as_list(arguments["cuda_sources"]))
        record = {"id": m["id"], "problem": m["problem"]}
        if light_cuda_header.light_source(nvcc_phases.LOAD_INLINE_PRELUDE + "\n" + text) is None:
            record["outcome"] = "built as written"
        else:
            record["calls_split_names"] = sorted(ops_cuda_header.called_names(text)
                                                 & ops.split_names)
            record["preprocessor_conditionals"] = ops_cuda_header.has_conditionals(text)
            record["outcome"] = ("ops header" if ops.names_to_include(text) is not None
                                 else "light header")
        records.append(record)
    return records


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    names = sub.add_parser("names")
    names.add_argument("--out", required=True)
    names.add_argument("--include", action="append", default=[])
    scr = sub.add_parser("screen")
    scr.add_argument("--split", required=True)
    scr.add_argument("--candidates", required=True)
    scr.add_argument("--out", default="")
    args = ap.parse_args(argv[1:])
    if args.command == "names":
        includes = args.include
        if not includes:
            import torch.utils.cpp_extension as ce
            includes = ce.include_paths()
        split, full, core = split_names(includes)
        data = {"torch_release": torch_release_of(includes),
                "operator_headers": len(ops_cuda_header.operator_headers(includes) or ()),
                "split": split}
        with open(args.out, "w") as f:
            json.dump(data, f, indent=0, sort_keys=True)
            f.write("\n")
        print("%d namespace-scope declarations with ATen/ATen.h, %d with the core headers; %d "
              "names of at, c10 and torch are split" % (full, core, len(split)))
        files = collections.Counter(p for paths in split.values() for p in paths)
        print("headers with the most split names: %s" % ", ".join(
            "%s (%d)" % kv for kv in files.most_common(8)))
        return 0
    records = screen(json.load(open(args.split)), args.candidates)
    outcomes = collections.Counter(r["outcome"] for r in records)
    for r in records:
        if r.get("calls_split_names") or r.get("preprocessor_conditionals"):
            print("%s stays on the light header: calls %s%s" % (
                r["id"], ", ".join(r["calls_split_names"]) or "no split name",
                "; has #if" if r["preprocessor_conditionals"] else ""))
    print("%d CUDA sources: %s" % (len(records), ", ".join(
        "%s %d" % kv for kv in sorted(outcomes.items()))))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
