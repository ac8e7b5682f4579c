"""A lighter torch header for the CUDA half of load_inline builds, with the full one as fallback.

nvcc parses every header a .cu file includes three times (cudafe++ and cicc, then the host
compiler), and it has no precompiled headers. A candidate's `#include <torch/extension.h>`
brings in Python, pybind11 and all of the C++ frontend (torch/all.h), which a kernel file does
not use: on torch 2.11 that is about two thirds of a CUDA build's time. Before a build this
writes, beside each .cu source, a copy whose torch includes name kbrl_torch_light.h instead
(ATen and torch/types.h's names; the header says what it leaves out) and builds that. When the
light copy does not compile, the source is built again as written, so a candidate that needs
the full header still gets it, and its compile errors are those of the source as written.

In place of the light copy, a source may get one with the per-operator header
(ops_cuda_header.py: fewer declarations still, where that keeps the source's meaning). The one
copy a source gets is its only try: when it does not compile, the source is built as written.
A copy that fails is almost always a compile error of the candidate's own, which the build as
written must report anyway; a light copy tried in between would cost such a build a third
front-end pass (bench/eval_throughput/results/2026-11-29-h200-session28: the 64-candidate set's
compile errors took 52-64 s under load and ended the run; on the development machine one took
8.4 s with the ops copy, 10.1 s with the light one, 19.2 s as written). No source of that set
compiled with the light header but not the per-operator one.

KBRL_EVAL_FULL_CUDA_HEADER=1 (or the worker's --full-cuda-header) turns all of this off;
KBRL_EVAL_OPS_CUDA_HEADER=0 only the per-operator tier."""

import os
import re

from . import ops_cuda_header

HEADER_NAME = "kbrl_torch_light.h"
LIGHT_SUFFIX = ".kbrl-light.cu"
HEADER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), HEADER_NAME)

# The includes the light header stands in for (load_inline itself puts <torch/types.h> first).
_REPLACED_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|types|torch|all)\.h[>"][^\n]*$', re.M)

# What the light header would give another meaning or leave out on purpose: sources that
# mention these are built with the full header straight away. Only requires_grad changes a
# result (autograd's torch::empty & co. honour it, at::empty refuses it at run time); the rest
# would only fail to compile, which costs a wasted light build before the fallback.
_NEEDS_FULL_HEADER = re.compile(
    r"requires_grad|pybind11|PYBIND11_|\bpy::|\bPy(Object|_\w+|[A-Z][a-z]+_[A-Za-z]\w*)|\bTHP[A-Z]\w*"
    r"|torch::(autograd|nn|optim|jit|data|serialize|python|cuda|utils|Library|class_)\b"
    r"|torch::(tensor|save|load)\s*\(|TORCH_LIBRARY|\bIValue\b")


def light_source(text):
    """The light copy of a CUDA source's text, or None when it should be built as written:
    it includes none of the replaced headers, or mentions what the light header lacks."""
    if _NEEDS_FULL_HEADER.search(text) or not _REPLACED_INCLUDE.search(text):
        return None
    # one line for one line: a line number in the copy is the same line in the source
    return _REPLACED_INCLUDE.sub('#include "%s"  // kbrl: light torch header' % HEADER_NAME,
                                 text)


def _write_if_changed(path, text):
    """Writes text to path unless it already holds it (an unchanged mtime lets ninja skip)."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_header():
    with open(HEADER_PATH) as f:
        return f.read()


def _write_copies(sources, build_directory, copy_of):
    """The source list with each .cu that has a copy replaced by it, or None when none has.
    copy_of(text, base) gives {file name: text} for the build folder, the copy's name first,
    or None."""
    out, changed = [], False
    for src in sources:
        files = None
        if (src.endswith(".cu") and not src.endswith(LIGHT_SUFFIX)
                and not src.endswith(ops_cuda_header.OPS_SUFFIX)):
            with open(src, errors="replace") as f:
                files = copy_of(f.read(), os.path.basename(src)[:-len(".cu")])
        if files is None:
            out.append(src)
            continue
        for i, (name, text) in enumerate(files.items()):
            _write_if_changed(os.path.join(build_directory, name), text)
            if i == 0:
                out.append(os.path.join(build_directory, name))
        changed = True
    return out if changed else None


def write_light_sources(sources, build_directory, header_text=None):
    """The source list to build with the light header (each .cu with a light copy replaced by
    that copy, written into build_directory with the header beside it), or None when no source
    has a light copy."""
    header_text = read_header() if header_text is None else header_text

    def copy_of(text, base):
        light = light_source(text)
        if light is None:
            return None
        return {base + LIGHT_SUFFIX: light, HEADER_NAME: header_text}
    return _write_copies(sources, build_directory, copy_of)


def write_ops_sources(sources, build_directory, ops):
    """The source list to build with per-operator headers (ops: an OpsHeader), each .cu that
    can have one replaced by its copy, which includes a header of its own; or None."""
    def copy_of(text, base):
        light = light_source(text)
        operators = None if light is None else ops.names_to_include(text)
        if operators is None:
            return None
        header = base + ops_cuda_header.HEADER_SUFFIX
        copy = light.replace('"%s"  // kbrl: light torch header' % HEADER_NAME,
                             '"%s"  // kbrl: per-operator torch header' % header)
        return {base + ops_cuda_header.OPS_SUFFIX: copy, header: ops.header_text(operators)}
    return _write_copies(sources, build_directory, copy_of)


def _ops_tier(cpp_extension, header_text, log):
    """The per-operator tier for this process's torch, or None (said through log)."""
    if os.environ.get("KBRL_EVAL_OPS_CUDA_HEADER", "1") == "0":
        return None
    try:
        import torch
        ops, why = ops_cuda_header.OpsHeader.for_torch(header_text, torch.__version__,
                                                       cpp_extension.include_paths())
    except Exception as e:  # noqa: BLE001 - a missing speed-up is not an error
        ops, why = None, "%s: %s" % (type(e).__name__, e)
    if ops is None and log is not None:
        log("no per-operator torch header for CUDA builds: " + why)
    return ops


def install_light_cuda_header(cpp_extension, log=None, ops="this torch's"):
    """Wraps torch's build step: a build with per-operator copies (where this torch has a
    split-name list and the screen takes the source), else with light copies, and when that
    build fails, the build of the sources as written. `log(message)` hears of a fallback. The
    header and the list are read now, before any candidate code runs in this process. `ops`
    (tests): an OpsHeader, or None for no per-operator tier."""
    original = getattr(cpp_extension, "_write_ninja_file_and_build_library", None)
    if original is None or getattr(original, "_kbrl_light_header", False):
        return
    import functools
    import inspect
    signature = inspect.signature(original)
    header_text = read_header()
    if ops == "this torch's":
        ops = _ops_tier(cpp_extension, header_text, log)
    tiers = [("light", lambda sources, folder: write_light_sources(sources, folder,
                                                                   header_text))]
    if ops is not None:
        tiers.insert(0, ("per-operator", lambda sources, folder: write_ops_sources(
            sources, folder, ops)))

    # wraps: the wrappers installed around this one (install_library_reuse) bind torch's
    # arguments by name through inspect.signature, which follows __wrapped__
    @functools.wraps(original)
    def build_library(*args, **kwargs):
        for tier, write_copies in tiers:
            try:
                bound = signature.bind(*args, **kwargs)
                copies = write_copies(bound.arguments["sources"],
                                      bound.arguments["build_directory"])
            except BaseException:  # noqa: BLE001 - a missing speed-up is not an error
                copies = None
            if copies is None:
                continue
            bound.arguments["sources"] = copies
            try:
                return original(*bound.args, **bound.kwargs)
            except RuntimeError as e:  # torch's "Error building extension"
                if log is not None:
                    first = next((l for l in str(e).splitlines() if "error" in l), str(e)[:200])
                    log("the %s torch header did not compile (%s); building the source as "
                        "written" % (tier, first.strip()[:300]))
                break  # the module's docstring says why no other copy is tried
        return original(*args, **kwargs)

    build_library._kbrl_light_header = True
    cpp_extension._write_ninja_file_and_build_library = build_library
