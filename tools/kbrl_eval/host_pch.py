"""A precompiled header for the host half of nvcc's builds: nvcc's host compiler, wrapped.

nvcc compiles a .cu file's host side in three passes over the whole translation unit: the
preprocessor, cudafe++ (which writes X.cudafe1.cpp: the unit regenerated as C++, with device
code stubbed out) and the host compiler on X.cudafe1.cpp. With torch's headers that last pass
parses some 370k lines, most of them the headers. cudafe1.cpp regenerates the headers' part
the same way for every source that includes the same headers first, with one exception: the
unit's module id (a hash nvcc makes per source) names the anonymous namespaces in it, and the
line markers of a header in the build's own folder (kbrl's light header) name that folder. So
the host compile can be split where the source's own code starts (the first line marker that
names the main file): the part before it, with the module id replaced by a fixed name
everywhere in the file and the folder in its line markers by another, is compiled once into a
GCC precompiled header and shared by every source with the same headers and flags (from the
second source that has them on; at most MAX_HEADERS); each source then compiles its own part
with `-include` of that header.

This file is the wrapper: nvcc is given `-ccbin WRAPPER` (wrapper_path, called from
extension_builds.install_torch_pch), and the wrapper runs the real compiler as it was asked,
except for the compile of a cudafe1.cpp, which goes through the precompiled header. Anything
unexpected (the file's shape, the header not compiling, the split compile failing) falls back
to the real compiler on the original file, so a build's outcome and its error messages are
those of nvcc without the wrapper. What the split changes in the object file is the name of
the anonymous namespaces (hidden symbols, local to the candidate's library); the code is
GCC's for the same text. KBRL_EVAL_NO_PCH=1 turns it off with the other precompiled header.

    python3 host_pch.py REAL_COMPILER CACHE_DIR [compiler arguments...]"""

import hashlib
import os
import re
import shutil
import subprocess
import sys

try:
    from . import pch_maker
except ImportError:  # run as a script by the wrapper: its folder's parent is not on the path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from kbrl_eval import pch_maker

FIXED_MODULE_ID = "_kbrl_host_pch"
PREFIX_HEADER = pch_maker.PREFIX_HEADER
MIN_PREFIX_LINES = 20000  # below this the header part is not worth a precompiled header
# A header is some 330 MB and costs more than the compile it replaces, so it is made for a
# prefix seen before (a second source with the same headers), and at most MAX_HEADERS of them.
MAX_HEADERS = pch_maker.MAX_HOST_HEADERS

_ANON_DEFINE = re.compile(r"^#define _NV_ANON_NAMESPACE _GLOBAL__N_(_\w+)$", re.M)
_MAIN_MARKER = re.compile(r'^# 1 "([^"\n]+)"\n')


_GCC_NAME = re.compile(r"^([A-Za-z0-9_.]+-)*gcc(-[0-9]+(\.[0-9]+)*)?$")


def default_host_compilers():
    """The host compilers nvcc runs in kbrl's builds unless a candidate names another, as
    absolute paths: $CC where it is a gcc (torch passes $CC to nvcc as -ccbin; the GPU
    machines set CC=/opt/gcc/bin/gcc) and the gcc on PATH (nvcc's own default). From the
    worker's environment, never from a candidate's flags."""
    out = []
    for name in (os.environ.get("CC"), "gcc"):
        path = shutil.which(name) if name else None
        if path and _GCC_NAME.match(os.path.basename(path)):
            path = os.path.abspath(path)
            if path not in out:
                out.append(path)
    return out


def wrapper_path(real_compiler, cache_dir, bin_dir):
    """The wrapper script for real_compiler (its headers kept in cache_dir), written once into
    bin_dir/bin-<hash>/ under the real compiler's own name (nvcc tells compiler families apart
    by name); None when it is not there and cannot be written. A fenced candidate process
    writes neither (write_fence.py): the script is written before its code runs, into bin_dir,
    apart from the headers the worker has made into cache_dir (pch_maker.py)."""
    return compiler_wrapper(__file__, "bin", real_compiler, cache_dir, bin_dir)


def compiler_wrapper(script_file, tag, real_compiler, cache_dir, bin_dir):
    """A script in bin_dir/TAG-<hash>/, named as real_compiler, that runs
    `python3 SCRIPT_FILE REAL_COMPILER CACHE_DIR ARGS...` (wrapper_path, and main.cpp's
    object cache: main_object_cache.py); written once, None when it is not there and cannot
    be written."""
    key = hashlib.sha256(("%s\0%s" % (real_compiler, sys.executable)).encode()).hexdigest()[:12]
    folder = os.path.join(bin_dir, "%s-%s" % (tag, key))
    path = os.path.join(folder, os.path.basename(real_compiler))
    script = "#!/bin/sh\nexec %s %s %s %s \"$@\"\n" % tuple(
        _sh_quote(x) for x in (sys.executable, os.path.abspath(script_file), real_compiler,
                               cache_dir))
    try:
        with open(path) as f:
            if f.read() == script:
                return path
    except OSError:
        pass
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write(script)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def _sh_quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def split_unit(text):
    """(prefix, rest) of a cudafe1.cpp text, or None when it has no usable split.

    prefix: the lines before the main file's own code, from the second line on (the first
    names the main file), the main file's folder in its line markers given a fixed name.
    rest: that first line, then the main file's code to the end. In both, the module id is
    replaced by FIXED_MODULE_ID."""
    first = _MAIN_MARKER.match(text)
    ids = set(_ANON_DEFINE.findall(text))
    if first is None or len(ids) != 1:
        return None
    text = text.replace(ids.pop(), FIXED_MODULE_ID)
    own_code = re.compile(r'^# \d+ "%s"' % re.escape(first.group(1)), re.M)
    cut = own_code.search(text, first.end())
    if cut is None:
        return None
    prefix = text[first.end():cut.start()]
    if prefix.count("\n") < MIN_PREFIX_LINES:
        return None
    return _shared_paths(prefix, first.group(1)), first.group(0) + text[cut.start():]


def _shared_paths(prefix, main_file):
    """The prefix with the main file's folder in its line markers replaced by a fixed name.

    A load_inline build writes its sources into a folder of its own, and kbrl's light header
    beside them (light_cuda_header.py), so the markers of that header name a different folder
    in every build. Line markers only tell diagnostics where a line came from (the unit is
    already preprocessed: __FILE__ is expanded), so one name serves every build."""
    folder = os.path.dirname(main_file)
    if not folder:
        return prefix
    marker = re.compile(r'^(# \d+ ")%s/' % re.escape(folder), re.M)
    return marker.sub(lambda m: m.group(1) + "kbrl-source-folder/", prefix)


def parse_compile(args):
    """(flags, source, output) when args compile one cudafe1.cpp file as C++ (-c -x c++ SRC
    -o OUT), else None. flags: the other arguments in order, without -c, -o and -x."""
    if args.count("-c") != 1 or args.count("-o") != 1 or args.count("-x") != 1:
        return None
    out, lang = args.index("-o"), args.index("-x")
    if out + 1 >= len(args) or lang + 1 >= len(args) or args[lang + 1] != "c++":
        return None
    sources = [i for i, a in enumerate(args) if a.endswith(".cudafe1.cpp")]
    if len(sources) != 1 or sources[0] in (out + 1, lang + 1) or sources[0] < lang:
        return None
    skip = {sources[0], out, out + 1, lang, lang + 1, args.index("-c")}
    flags = [a for i, a in enumerate(args) if i not in skip]
    if any(f in ("-include", "-imacros") or f.startswith("-include=") for f in flags):
        return None  # a forced include ahead of ours: leave it to the compiler
    return flags, args[sources[0]], args[out + 1]


def precompiled_prefix(real, flags, prefix, cache_dir):
    """The path of PREFIX_HEADER for this prefix and flags, with its .gch beside it, or None
    when there is none to use: the prefix is seen for the first time (it is marked seen), the
    cache already holds MAX_HEADERS, or making it failed. One process makes it; the others
    wait for it and reuse it. A fenced candidate's build (write_fence.py) only reads the cache:
    on a miss it wishes for the header, and the worker has it made (pch_maker.py)."""
    folder = pch_maker.host_folder(cache_dir, real, flags, prefix)
    header = os.path.join(folder, PREFIX_HEADER)
    gch, failed = header + ".gch", os.path.join(folder, "failed")
    if os.path.exists(gch):
        return header
    if os.path.exists(failed):
        return None
    if pch_maker.fenced():
        # a fenced candidate's build reads the cache only: the worker has the header made (a
        # prefix seen before: pch_maker._plan). This build does not wait for it: making a host
        # header under load took longer than the compile it replaces (H200, 2026-11-29: the
        # first builds that waited took 82-88 s, against 54 s without the header).
        pch_maker.wish("host", {"compiler": real, "flags": flags}, prefix)
        return None
    if not pch_maker.seen_before(folder):
        return None
    if len(pch_maker.headers_made(cache_dir, PREFIX_HEADER)) >= MAX_HEADERS:
        return None
    # one process makes it; the others wait, then reuse it
    return pch_maker.compile_header(folder, PREFIX_HEADER, prefix,
                                    pch_maker.host_header_command(real, flags))


def compile_with_prefix(real, args, cache_dir):
    """Compiles a cudafe1.cpp through the precompiled prefix; True when that worked (the
    output is written), False when the caller should run the compiler as asked."""
    parsed = parse_compile(args)
    if parsed is None:
        return False
    flags, source, output = parsed
    try:
        with open(source, errors="surrogateescape") as f:
            split = split_unit(f.read())
        if split is None:
            return False
        prefix, rest = split
        header = precompiled_prefix(real, flags, prefix, cache_dir)
        if header is None:
            return False
        # under the original's own name (GCC names the unit's static-initializer symbol
        # after it), in a folder beside it; -iquote finds the stub file that the original
        # includes from its own folder
        folder = os.path.abspath(source) + ".kbrl-host-pch"
        os.makedirs(folder, exist_ok=True)
        rest_path = os.path.join(folder, os.path.basename(source))
        with open(rest_path, "w", errors="surrogateescape") as f:
            f.write(rest)
    except OSError:
        return False
    cmd = [real] + flags + ["-iquote", os.path.dirname(os.path.abspath(source)),
                            "-include", header, "-c", "-x", "c++", rest_path, "-o", output]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # nvcc removes its own temporaries only
    if proc.returncode != 0:
        return False  # the compile as asked gives the errors, against the original file
    sys.stdout.buffer.write(proc.stdout)
    sys.stderr.buffer.write(proc.stderr)
    return True


def wrapper_main(argv, enabled, shortcut):
    """A compiler wrapper's main (`WRAPPER REAL_COMPILER CACHE_DIR ARGS...`, compiler_wrapper):
    shortcut(real, cache_dir, args) when enabled, and the real compiler as asked when that did
    not do the compile (returned False or failed)."""
    real, cache_dir, args = argv[1], argv[2], argv[3:]
    if enabled:
        try:
            if shortcut(real, args, cache_dir):
                return 0
        except Exception:  # noqa: BLE001 - the speed-up is optional; the build is not
            pass
    os.execv(real, [real] + args)
    return 127


def main(argv):
    return wrapper_main(argv, os.environ.get("KBRL_EVAL_NO_PCH", "") in ("", "0"),
                        compile_with_prefix)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
