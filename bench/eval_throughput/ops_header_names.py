#!/usr/bin/env python3
"""Could a per-operator torch header serve a CUDA candidate without changing what its code means?
A screen for that decision (nvcc_phases.py's `ops` header compiles a kernel file in about 60 %
of the light header's time); nothing in kbrl builds with it.

The `ops` header declares fewer names than kbrl's light header (all of ATen): ATen's core Tensor,
the dispatch macros, and ATen/ops/NAME.h for the functions the source calls. A source that
compiles with both means the same with both when every function it calls by name (qualified
with at::, torch:: or c10::, or unqualified, which argument-dependent lookup and `using`
directives extend to those namespaces) has the same overload set in both: all of that name's
declarations in namespaces at, c10 and torch lie in the core headers or in its own
ATen/ops/NAME.h (or NAME_ops.h). Member calls see the same class in both. Binary operators on
tensors (ATen/TensorOperators.h, not in the core headers) do not compile without the full
header, because a Tensor converts to no arithmetic type, so such a source falls back.

  names    clang's AST of two translation units (ATen/ATen.h; ATen/core/Tensor.h with
           ATen/Dispatch.h) gives every namespace-scope function, function template and using
           declaration of at, c10 and torch with its file; a name declared outside the core
           headers and outside its own per-operator header is "split". Needs clang++ and
           torch's headers, no GPU.
  screen   each candidate's called names against the split ones; a source that calls a split
           name, or has preprocessor conditionals (a macro only the full header defines could
           change them), stays on the light header.

    ops_header_names.py names --out SPLIT.json [--include DIR ...]
    ops_header_names.py screen --split SPLIT.json --candidates C [--out FILE.json]

--include defaults to torch's own include folders. This screen is an argument, not a proof: a
build tier would still check that the binaries are the same (build_times.py's SASS and
host-object comparisons) on a candidate set before it is trusted."""

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
CORE_TU = "#include <ATen/core/Tensor.h>\n#include <ATen/Dispatch.h>\n"
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


# a call, with template arguments or not: f(, f<float>(
CALL = re.compile(r"(\.|->|::)?\s*\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>\s*)?\(")
QUALIFIED_CALL = re.compile(r"\b(?:at|torch|c10)::(\w+)\s*(?:<[^;(){}]*>\s*)?\(")
CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b", re.M)


STATEMENT_WORDS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype",
                   "catch", "static_assert", "noexcept", "defined", "__launch_bounds__"}


def called_names(text):
    """Functions a source calls by name: qualified with at::, torch:: or c10::, or unqualified
    (not members: those follow a `.`, `->` or another qualifier)."""
    code = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', re.sub(r"//[^\n]*|/\*.*?\*/", " ", text,
                                                        flags=re.S))
    unqualified = {name for qualifier, name in CALL.findall(code) if not qualifier}
    return (unqualified - STATEMENT_WORDS) | set(QUALIFIED_CALL.findall(code))


def screen(split, candidates):
    import nvcc_phases
    from nvcc_phases import light_cuda_header
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
            calls_split = sorted(called_names(text) & set(split))
            record["calls_split_names"] = calls_split
            record["preprocessor_conditionals"] = bool(CONDITIONAL.search(text))
            record["outcome"] = ("light header" if calls_split or record["preprocessor_conditionals"]
                                 else "ops header")
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
        with open(args.out, "w") as f:
            json.dump(split, f, indent=1)
        print("%d namespace-scope declarations with ATen/ATen.h, %d with the core headers; %d "
              "names of at, c10 and torch are split" % (full, core, len(split)))
        files = collections.Counter(p for paths in split.values() for p in paths)
        print("headers with the most split names: %s" % ", ".join(
            "%s (%d)" % kv for kv in files.most_common(8)))
        return 0
    split = json.load(open(args.split))
    records = screen(split, args.candidates)
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
