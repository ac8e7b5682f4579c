"""The per-operator torch header: the CUDA build tier tried before the light header.

kbrl_torch_light.h includes all of ATen (ATen/ATen.h), while a kernel file calls a handful of
at:: functions, each declared on its own in ATen's per-operator headers (ATen/ops/NAME.h). The
ops copy of a source replaces the light header by one of its own: ATen's core Tensor, the
dispatch macros, the tensor operators, and the per-operator header of every name the source
calls. nvcc's front ends then parse far less (12 sources on an H200, torch 2.11: 8.2 s on the
driver's path against the light header's 14.2 s).

Fewer declarations could change what a source means without breaking its compile: a call that
overload resolution or argument-dependent lookup resolves, with the full header, to a
declaration the ops header lacks. So a source gets an ops copy only when none of the names it
calls is "split" (declared in namespace at, c10 or torch outside the ops header's fixed part
and outside its own per-operator header) and it has no preprocessor conditional (a macro only
the full header defines could change it). The split names come from clang's AST of the very
headers (bench/eval_throughput/ops_header_names.py names), one list per torch release in
split_names/; with a torch that has no list, or whose ATen/ops folder differs from the list's,
this tier is skipped. A source whose ops copy does not compile is built as written
(light_cuda_header.py says why not with the light header in between).

Not screened: operators used in expressions (other than the tensor operators, which the fixed
part declares as the full header does). A split operator overload reached that way would, with
these headers, most likely leave the expression without an overload and so fail to compile
(falling back); that is argued, not proven. The evidence for the tier as a whole is
bench/eval_throughput/build_times.py: identical SASS for every source of the 64-candidate set.

KBRL_EVAL_OPS_CUDA_HEADER=0 turns this tier off."""

import json
import os
import re

OPS_SUFFIX = ".kbrl-ops.cu"
HEADER_SUFFIX = ".kbrl-ops.h"
SPLIT_NAMES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "split_names")

# The fixed part of every ops header, in this order. ops_header_names.py's core translation
# unit is this same text: a name declared here is never split. TensorOperators.h brings the
# binary operators on tensors (with per-operator headers it includes only empty_like.h); the
# macro that selects that is taken back so the source sees the full header's macros.
FIXED_PART = """#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS
#define KBRL_UNDEF_AT_PER_OPERATOR_HEADERS
#endif
#include <ATen/TensorOperators.h>
#ifdef KBRL_UNDEF_AT_PER_OPERATOR_HEADERS
#undef AT_PER_OPERATOR_HEADERS
#undef KBRL_UNDEF_AT_PER_OPERATOR_HEADERS
#endif
"""

# a call, with template arguments or not: f(, f<float>(
_CALL = re.compile(r"(\.|->|::)?\s*\b([A-Za-z_]\w*)\s*(?:<[^;(){}]*>\s*)?\(")
_QUALIFIED_CALL = re.compile(r"\b(?:at|torch|c10)::(\w+)\s*(?:<[^;(){}]*>\s*)?\(")
_CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b", re.M)
_STATEMENT_WORDS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype",
                    "catch", "static_assert", "noexcept", "defined", "__launch_bounds__"}
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def called_names(text):
    """Functions a source calls by name: qualified with at::, torch:: or c10::, or unqualified
    (which argument-dependent lookup and `using` directives extend to those namespaces); not
    members, which follow a `.`, `->` or another qualifier and see the same class either way."""
    code = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', re.sub(r"//[^\n]*|/\*.*?\*/", " ", text,
                                                        flags=re.S))
    unqualified = {name for qualifier, name in _CALL.findall(code) if not qualifier}
    return (unqualified - _STATEMENT_WORDS) | set(_QUALIFIED_CALL.findall(code))


def has_conditionals(text):
    return bool(_CONDITIONAL.search(text))


def torch_release(version):
    """'2.11.0' from '2.11.0+cu130', '1.13.0' from '1.13.0a0'; None when it is not a version."""
    m = _RELEASE.match(version or "")
    return ".".join(m.groups()) if m else None


def list_path(release):
    return os.path.join(SPLIT_NAMES_DIR, "torch-%s.json" % release)


def operator_headers(include_dirs):
    """The names NAME of torch's ATen/ops/NAME.h in the first include folder that has them, or
    None when none has that folder."""
    for d in include_dirs:
        path = os.path.join(d, "ATen", "ops")
        if os.path.isdir(path):
            return {n[:-2] for n in os.listdir(path) if n.endswith(".h")}
    return None


class OpsHeader:
    """What the tier needs, read once before any candidate code runs: the split names of this
    torch release and the per-operator headers it has."""

    def __init__(self, light_header_text, split_names, operator_headers):
        self.light_header_text = light_header_text
        self.split_names = frozenset(split_names)
        self.operator_headers = frozenset(operator_headers)

    @classmethod
    def for_torch(cls, light_header_text, version, include_dirs):
        """The tier for this torch, or (None, why) when it has to be skipped."""
        release = torch_release(version)
        if release is None:
            return None, "torch's version %r is not a release number" % version
        try:
            with open(list_path(release)) as f:
                data = json.load(f)
        except OSError:
            return None, "kbrl has no split-name list for torch %s" % release
        headers = operator_headers(include_dirs)
        if headers is None:
            return None, "torch's headers have no ATen/ops folder"
        if len(headers) != data.get("operator_headers"):
            return None, ("torch %s's ATen/ops has %d headers, the split-name list was made "
                          "from %s" % (release, len(headers), data.get("operator_headers")))
        return cls(light_header_text, data["split"], headers), ""

    def names_to_include(self, text):
        """The per-operator headers for a source's text, or None when the source must not be
        built with them (it calls a split name or has a preprocessor conditional)."""
        called = called_names(text)
        if called & self.split_names or has_conditionals(text):
            return None
        return sorted(called & self.operator_headers)

    def header_text(self, operators):
        ops = "".join("#include <ATen/ops/%s.h>\n" % n for n in operators)
        return self.light_header_text.replace("#include <ATen/ATen.h>\n", FIXED_PART + ops, 1)
