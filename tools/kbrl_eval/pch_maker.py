"""The precompiled headers' trusted maker.

A precompiled header in .kbrl-pch (torch/extension.h for main.cpp, extension_builds.py) or
.kbrl-host-pch (the torch part of nvcc's host compile, host_pch.py) is included by every later
build with the same flags. A candidate that could write one would compile its own code into
other candidates' libraries, so fenced candidate processes (write_fence.py) only read these
caches. When a fenced build finds no header for its flags it leaves a wish in its own build
folder (`wish`). While the candidate builds, the worker hands the folder to `collect` every
quarter second (`collecting`), and once more when the candidate is gone. `collect` checks each
wish - the compiler is the one kbrl runs, every flag is of
a known kind and names only trusted folders - and starts a maker process for it. The maker writes
only the header's own cache folder (its own write fence) and builds the header from what the key
is made of: compiler, flags and, for the host header, the prefix text. What a header holds is so
a function of its key, and a candidate can put into another's build only what that build would
compile itself. On a fresh machine the first builds' wishes are the only early notice of the
flags candidates use, so makers start while those builds run. A build that wished compiles
without the header: the header is chosen before ninja starts, so waiting for it held back
nvcc's step too (the first twelve builds of the 64-candidate run took 78-88 s waiting against
54 s without headers, H200, 2026-11-29), and making the header costs about what the build's
own parse of torch/extension.h does. Later builds with those flags find the headers.

    python3 -m kbrl_eval.pch_maker SPEC.json      (what collect starts)"""

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading

WISHES = ".kbrl-pch-wishes"
PCH_DIR = ".kbrl-pch"
HOST_PCH_DIR = ".kbrl-host-pch"
TORCH_HEADER = "kbrl_torch_extension.h"
PREFIX_HEADER = "prefix.h"
# A host header is some 330 MB and costs more than the compile it replaces: made for a prefix
# seen before (a second source with the same headers), at most this many (host_pch.py).
MAX_HOST_HEADERS = 12
MAX_TORCH_HEADERS = 32  # one per flag set (candidates' extra_cflags), some 200 MB each
PCH_TIMEOUT_S = 600
# What one candidate's wishes may ask of the worker: a wish is read only when its files are
# small enough, and only so many makers run at once.
MAX_WISH_BYTES = 1 << 20
MAX_PREFIX_BYTES = 64 << 20
MAX_MAKERS = 4
# main.cpp objects (main_object_cache.py): each maker does a compile a waiting build would do
# itself, so these are not held back by the headers' makers, only bounded.
MAX_MAIN_MAKERS = 32
# How often the worker looks at a building candidate's wishes (collecting).
COLLECT_EVERY_S = 0.25

_makers = []  # maker processes started and not yet reaped
_collect_lock = threading.Lock()  # collect runs in the worker's thread and in `collecting`'s

# Flags without a path: macros, language and code-generation switches, warnings. Anything that
# runs or loads another program (-fplugin, -B, -specs, -Wl, -Wp, -Xlinker) or names a file is
# not among them.
# Torch's flags reach the maker's compile through /bin/sh (as through ninja): a macro's value
# and a path are plain shell words, with no character the shell would expand or split on.
_PLAIN_FLAG = re.compile(r"^(-D[A-Za-z_]\w*(=[\w.\\\"+,:/=-]*)?|-U[A-Za-z_]\w*|-std=[\w+]+|-O[0-3sgz]?|-Ofast"
                         r"|-fPIC|-fpic|-pthread|-m64|-m(arch|tune)=[\w.-]+|-g[0-3]?|-w"
                         r"|-W(no-)?[a-z][\w=+-]*|-f(no-)?[a-z][\w=+-]*|-x|c\+\+|c\+\+-header)$")
_FORBIDDEN = ("-fplugin", "-fdump", "-fprofile", "-fauto-profile", "-fcallgraph", "-fstack-usage",
              "-fopt-info", "-fsave", "-frecord")
_PATH_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter")
_SHELL_WORD = re.compile(r"^[\w./+-]+$")


def main_compiler():
    """The C++ compiler whose main.cpp objects a maker makes: the one torch's builds run ($CXX,
    else c++), as an absolute path, from the worker's environment."""
    found = shutil.which(os.environ.get("CXX", "c++"))
    return os.path.abspath(found) if found else None


def torch_folder(build_dir, compiler, flags):
    """The .kbrl-pch folder of torch/extension.h made with compiler and flags (the flags without
    -DTORCH_EXTENSION_NAME=, which no torch header uses), beside build_dir's parent."""
    key = hashlib.sha256("\0".join([compiler] + list(flags)).encode()).hexdigest()[:16]
    return os.path.join(os.path.dirname(os.path.abspath(build_dir)), PCH_DIR, key)


def host_folder(cache_dir, real, flags, prefix):
    """The .kbrl-host-pch folder of a cudafe1 prefix compiled by real with flags."""
    key = hashlib.sha256()
    for part in [real] + list(flags):
        key.update(part.encode("utf-8", "surrogateescape") + b"\0")
    key.update(prefix.encode("utf-8", "surrogateescape"))
    return os.path.join(cache_dir, key.hexdigest()[:24])


def fenced():
    """Whether this process's writes are fenced (runner sets it once the fence is on; the
    builds it starts inherit it): its builds wish for headers instead of making them."""
    return os.environ.get("KBRL_WRITE_FENCE") == "on"


def wish(kind, spec, prefix=None):
    """Leaves a wish for a header (or a main.cpp object: main_object_cache.py) in this build's
    folder (TORCH_EXTENSIONS_DIR); best effort. The wish file's path, None when none was left."""
    build_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not build_dir:
        return None
    folder = os.path.join(build_dir, WISHES)
    name = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    try:
        os.makedirs(folder, exist_ok=True)
        if prefix is not None:
            with open(os.path.join(folder, name + ".h"), "w", errors="surrogateescape") as f:
                f.write(prefix)
        # the worker reads wishes while the build runs: a wish appears whole or not at all
        part = os.path.join(folder, name + ".part")
        with open(part, "w") as f:
            json.dump(dict(spec, kind=kind), f)
        os.replace(part, os.path.join(folder, name + ".json"))
    except OSError:
        return None
    return os.path.join(folder, name + ".json")


def _trusted_roots(build_dir):
    """Folders a header's include paths may name: torch's, Python's, the system's, CUDA's, and
    the wishing build's own folder (only builds of the same source share that path)."""
    import torch
    paths = sysconfig.get_paths()
    roots = [os.path.dirname(os.path.abspath(torch.__file__)), "/usr/include", "/usr/local/include",
             paths.get("include"), paths.get("platinclude"), os.environ.get("CUDA_HOME"),
             "/usr/local/cuda", os.path.abspath(build_dir)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    return [os.path.realpath(r) for r in roots if r]


def check_flags(flags, roots):
    """'' when every flag is allowed, else why not."""
    i = 0
    while i < len(flags):
        f = flags[i]
        if not isinstance(f, str):
            return "a flag that is not text"
        path = None
        for p in _PATH_FLAGS:
            if f == p and i + 1 < len(flags):
                path, i = flags[i + 1], i + 1  # "-isystem", "/x" (nvcc's host flags)
                break
            if f.startswith(p + " "):
                path = f[len(p) + 1:]  # "-isystem /x": torch's, one shell line to be
                break
            if f.startswith(p) and len(f) > len(p) and p == "-I":
                path = f[2:]
                break
        if path is not None:
            if not _SHELL_WORD.match(path):
                return "include folder %r is not a plain path" % path
            real = os.path.realpath(path)
            if not any(real == r or real.startswith(r + os.sep) for r in roots):
                return "include folder %s is not a trusted one" % path
        elif f.startswith(_FORBIDDEN) or not _PLAIN_FLAG.match(f):
            return "flag %r is not allowed" % f
        i += 1
    return ""


def headers_made(cache, header_name):
    """The folders of cache that hold header_name's .gch."""
    return [d for d in os.listdir(cache)
            if os.path.exists(os.path.join(cache, d, header_name + ".gch"))]


def seen_before(folder):
    """Whether a host prefix's folder was seen before; marks it seen. A prefix seen once gets
    no header (most are never seen again); the second sight does."""
    seen = os.path.join(folder, "seen")
    if os.path.exists(seen):
        return True
    os.makedirs(folder, exist_ok=True)
    open(seen, "w").close()
    return False


def _plan(wish_file, build_dir, roots):
    """(spec for the maker, None) for a wish worth making, or (None, why not)."""
    if os.path.getsize(wish_file) > MAX_WISH_BYTES:
        return None, "the wish is too large"
    with open(wish_file) as f:
        w = json.load(f)
    if not isinstance(w, dict):
        return None, "the wish is not an object"
    if w.get("kind") == "main":
        return _plan_main(w, wish_file, build_dir, roots)
    flags = w.get("flags")
    if not isinstance(flags, list):
        return None, "no flags"
    why = check_flags(flags, roots)
    if why:
        return None, why
    if w.get("kind") == "torch":
        compiler = os.environ.get("CXX", "c++")
        if w.get("compiler") != compiler:
            return None, "compiler %r is not %r" % (w.get("compiler"), compiler)
        folder = torch_folder(build_dir, compiler, flags)
        cache = os.path.dirname(folder)
        if os.path.isdir(cache) and len(headers_made(cache, TORCH_HEADER)) >= MAX_TORCH_HEADERS:
            return None, "the cache holds %d torch headers" % MAX_TORCH_HEADERS
        return {"kind": "torch", "folder": folder, "compiler": compiler, "flags": flags}, None
    if w.get("kind") == "host":
        from .host_pch import default_host_compilers
        real = w.get("compiler")
        if real not in default_host_compilers():
            return None, "host compiler %r is not one kbrl runs ($CC or PATH's gcc)" % real
        parent = os.path.dirname(os.path.abspath(build_dir))
        prefix_file = wish_file[:-len(".json")] + ".h"
        if os.path.getsize(prefix_file) > MAX_PREFIX_BYTES:
            return None, "the prefix is too large"
        with open(prefix_file, errors="surrogateescape") as f:
            prefix = f.read()
        cache = os.path.join(parent, HOST_PCH_DIR)
        folder = host_folder(cache, real, flags, prefix)
        if not seen_before(folder):
            return None, "seen once"
        if len(headers_made(cache, PREFIX_HEADER)) >= MAX_HOST_HEADERS:
            return None, "the cache holds %d host headers" % MAX_HOST_HEADERS
        return {"kind": "host", "folder": folder, "compiler": real, "flags": flags,
                "prefix": prefix}, None
    return None, "unknown kind"


def _plan_main(w, wish_file, build_dir, roots):
    """_plan for a main.cpp object (main_object_cache.plan checks it)."""
    from . import main_object_cache
    text_file = wish_file[:-len(".json")] + ".h"
    if os.path.getsize(text_file) > main_object_cache.MAX_TEXT_BYTES:
        return None, "the main.cpp text is too large"
    with open(text_file, "rb") as f:
        text = f.read()
    return main_object_cache.plan(w, text, os.path.dirname(os.path.abspath(build_dir)),
                                  main_compiler(), lambda flags: check_flags(flags, roots))


def collect(build_dir, log=lambda m: None, final=True, nice=10):
    """Starts a maker for every sound wish left in build_dir and removes the wishes it read;
    returns how many makers started. While the candidate builds (final=False) a wish left for
    lack of a maker slot stays for the next look; final (the candidate is gone) removes the
    whole wish folder. Makers run at `nice`: below the evaluations, whose timings share the
    machine, unless builds wait for them. Never raises."""
    with _collect_lock:
        return _collect(build_dir, log, final, nice)


def _collect(build_dir, log, final, nice):
    _reap()
    folder = os.path.join(build_dir, WISHES)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return 0
    started = 0
    try:
        roots = _trusted_roots(build_dir)
        for name in names:
            wish_file = os.path.join(folder, name)
            try:
                spec, why = _plan(wish_file, build_dir, roots)
            except (OSError, ValueError) as e:
                spec, why = None, str(e)
            if spec is not None and _slots_full(spec["kind"]):
                continue  # the next look, or the final one, starts it
            what = _what(wish_file) if spec is None else ""
            _forget(wish_file)
            if spec is None:
                if why != "seen once":
                    log("%s not made: %s" % (what, why))
                continue
            if _start_maker(spec, nice):
                started += 1
    except Exception as e:  # noqa: BLE001 - a missing speed-up is not an evaluation's failure
        log("precompiled headers: %s" % e)
    if final:
        shutil.rmtree(folder, ignore_errors=True)
    return started


def _slots_full(kind):
    """Whether as many makers of kind's family (main.cpp objects, or headers) run as may."""
    busy = sum(1 for p in _makers if (getattr(p, "kbrl_kind", "") == "main") == (kind == "main"))
    return busy >= (MAX_MAIN_MAKERS if kind == "main" else MAX_MAKERS)


def _what(wish_file):
    """What a wish asks for, in words for the log."""
    try:
        with open(wish_file) as f:
            main = json.load(f).get("kind") == "main"
    except (OSError, ValueError, AttributeError):
        main = False
    return "main.cpp object" if main else "precompiled header"


def _forget(wish_file):
    for path in (wish_file, wish_file[:-len(".json")] + ".h"):
        try:
            os.unlink(path)
        except OSError:
            pass


def _start_maker(spec, nice):
    """Starts spec's maker unless what it makes is there, failed or being made."""
    if (any(os.path.exists(os.path.join(spec["folder"], p)) for p in _products(spec))
            or _being_made(spec["folder"])):
        return False
    os.makedirs(spec["folder"], exist_ok=True)
    with open(os.path.join(spec["folder"], "spec.json"), "w", errors="surrogateescape") as f:
        json.dump(spec, f)
    nice_cmd = shutil.which("nice") if nice else None
    maker = subprocess.Popen(
        ([nice_cmd, "-n", str(nice)] if nice_cmd else [])
        + [sys.executable, "-c", "import sys; sys.path.insert(0, %r); "
           "from kbrl_eval.pch_maker import main; sys.exit(main(sys.argv[1:]))"
           % os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
           os.path.join(spec["folder"], "spec.json")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        close_fds=True, start_new_session=True)
    maker.kbrl_folder = spec["folder"]
    maker.kbrl_kind = spec["kind"]
    _makers.append(maker)
    return True


class collecting:
    """`with collecting(build_dir, log, nice):` around a candidate's build - its wishes are
    collected every COLLECT_EVERY_S while it runs, so the makers start while the build that
    wished waits for them - and once more, finally, after it."""

    def __init__(self, build_dir, log=lambda m: None, nice=10):
        self.build_dir, self.log, self.nice = os.path.abspath(build_dir), log, nice
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, daemon=True)

    def _look(self):
        while not self._stop.wait(COLLECT_EVERY_S):
            collect(self.build_dir, self.log, final=False, nice=self.nice)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        collect(self.build_dir, self.log, final=True, nice=self.nice)
        return False


def _being_made(folder):
    """Whether a maker works on folder now: one this process started, or another process's
    (it holds the folder's lock)."""
    if any(getattr(p, "kbrl_folder", None) == folder for p in _makers):
        return True
    try:
        with open(os.path.join(folder, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def _reap():
    for p in list(_makers):
        if p.poll() is not None:
            _makers.remove(p)


def wait_for_makers(timeout_s):
    """Tests and benchmarks: until the makers started so far are done."""
    for p in list(_makers):
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    _reap()


def _products(spec):
    """What a maker leaves in its folder: what it made, or why not."""
    if spec["kind"] == "main":
        from . import main_object_cache as m
        return (m.OBJECT, m.FAILED, m.UNCACHEABLE, m.REFUSED)
    return (_header_name(spec) + ".gch", "failed")


def _header_name(spec):
    return TORCH_HEADER if spec["kind"] == "torch" else PREFIX_HEADER


TORCH_HEADER_TEXT = "#pragma once\n#include <torch/extension.h>\n"


def torch_header_command(compiler, flags):
    """command(header, output) for compile_header: the torch header's compile as a shell line.
    torch's ninja runs its flags through /bin/sh, so this does too, or a macro like
    PYBIND11_COMPILER_TYPE would differ from the real compile's."""
    return lambda header, out: " ".join([shlex.quote(compiler), "-x", "c++-header"] + flags
                                        + [shlex.quote(header), "-o", shlex.quote(out)])


def host_header_command(compiler, flags):
    """command(header, output) for compile_header: a host prefix's compile, with nvcc's host
    flags as nvcc passes them (a list, no shell)."""
    return lambda header, out: [compiler] + flags + ["-x", "c++-header", header, "-o", out]


def compile_header(folder, name, text, command, wait=True):
    """folder/name holding text, and its GCC precompiled copy name.gch made by
    command(header, output) (a list, or a shell line), one process at a time per folder (its
    lock: the others wait, or with wait=False give up). The header's path when the .gch is
    there afterwards, else None. A failed compile leaves `failed` (the command and what it
    printed), and no later call tries again."""
    header = os.path.join(folder, name)
    gch = header + ".gch"
    failed = os.path.join(folder, "failed")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None  # another process makes it
        if os.path.exists(gch):
            return header
        if os.path.exists(failed):
            return None
        with open(header, "w", errors="surrogateescape") as f:
            f.write(text)
        out = "%s.%d.tmp" % (gch, os.getpid())
        cmd = command(header, out)
        try:
            proc = subprocess.run(cmd, shell=isinstance(cmd, str), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=PCH_TIMEOUT_S)
            ok, printed = proc.returncode == 0, proc.stdout.decode(errors="replace")
        except (OSError, subprocess.SubprocessError) as e:
            ok, printed = False, str(e)
        if not ok:
            with open(failed, "w", errors="surrogateescape") as f:
                f.write((cmd if isinstance(cmd, str) else " ".join(cmd)) + "\n"
                        + printed[-4000:])
            return None
        os.replace(out, gch)
    return header


def make(spec):
    """Builds the header of spec in spec['folder'] (one maker at a time per folder); True when
    the .gch is there afterwards."""
    from .write_fence import restrict_writes
    folder = spec["folder"]
    tmp = os.path.join(folder, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    restrict_writes([folder])  # flags are checked; whatever they do stays in this folder
    if spec["kind"] == "torch":
        text, command = TORCH_HEADER_TEXT, torch_header_command(spec["compiler"], spec["flags"])
    else:
        text, command = spec["prefix"], host_header_command(spec["compiler"], spec["flags"])
    made = compile_header(folder, _header_name(spec), text, command, wait=False)
    shutil.rmtree(tmp, ignore_errors=True)
    return made is not None


def main(argv):
    with open(argv[0], errors="surrogateescape") as f:
        spec = json.load(f)
    if spec.get("kind") == "main":
        from . import main_object_cache
        return 0 if main_object_cache.make(spec) else 1
    return 0 if make(spec) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
