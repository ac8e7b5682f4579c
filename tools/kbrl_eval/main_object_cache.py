"""main.cpp compiled once per text: the C++ half of load_inline builds, shared by the builds
whose main.cpp is the same.

load_inline writes a candidate's cpp_sources into main.cpp, between `#include
<torch/extension.h>` and the PYBIND11_MODULE block that binds the listed functions. With the
precompiled torch header the parse is gone, but instantiating and compiling torch's and
pybind11's templates is not: about 10 s of CPU alone on the H200 machines, 30-40 s under twelve
builds, the longest step of a CUDA candidate's build. In a GRPO group the samples of a problem
often declare the same functions in the same words: their main.cpp texts are the same, and only
the extension's name differs (the macro TORCH_EXTENSION_NAME, and through the build folder's
path, __FILE__).

So the object is made once per key: the compiler, its arguments with the name, the source, the
output and the dependency file as placeholders, the name's length, the length of the build
folder's path, and the text. A trusted maker (pch_maker.py starts it from a build's wish; a
fenced candidate only reads the cache) compiles the text as main.cpp in a folder whose path has
the build folder's length, with a placeholder name of the name's length, both made of the key.
A build with that key takes the object with its own folder and name written over the
placeholders. Only strings of equal length change and no offset moves, so the bytes are those
its own compile gives (test_main_object_cache.py compares them). A build that finds no object
wishes for it and waits: the maker does the compile the build would have done, and the group's
other builds with the same key wait for that one compile instead of each doing their own.

What a cached object holds is a function of its key, as with the precompiled headers: the
maker checks the wish's compiler and flags (pch_maker.check_flags), and a candidate can put
into another's build only what that build would compile itself. Three things could make the
maker's compile differ from the build's own, and each leaves the build to compile itself: a
quoted #include (it would search the build's folder first, where the candidate can write; only
`#include <...>` lines of plain relative paths may mention "include"), an argument other than
the name's define that names the build folder or the name, and a text that already holds a
placeholder. A maker that fails, or finds no maker at all within UNSEEN_S, also leaves the
build to its own compile, which then gives the errors the build would give.
KBRL_EVAL_NO_MAIN_CACHE=1 turns it off.

    python3 main_object_cache.py REAL_COMPILER PARENT [compiler arguments...]   (the wrapper)"""

import fcntl
import hashlib
import os
import re
import sys
import time

CACHE_DIR = ".kbrl-main"
NAME_DEFINE = "-DTORCH_EXTENSION_NAME="
SOURCE, OUTPUT, DEPFILE, NAME = "<kbrl:source>", "<kbrl:output>", "<kbrl:depfile>", "<kbrl:name>"
OBJECT, DEPS = "main.o", "main.d"
# Markers a maker leaves instead of an object; a build that finds one compiles itself.
FAILED, UNCACHEABLE, REFUSED = "failed", "uncacheable", "refused"
# A placeholder this short could turn up in an object's bytes by chance: shorter names are
# compiled by their builds.
MIN_NAME = 8
KEY_LETTERS = 12  # the cache folder's name: letters of the key
MAX_TEXT_BYTES = 1 << 20
MAKE_TIMEOUT_S = 600
MAKE_MEMORY_BYTES = 16 << 30
UNSEEN_S = 3.0   # a wish no worker has started a maker for by then: the build compiles itself
STALE_S = 10.0   # a maker that started but holds no lock this long after: gone
POLL_S = 0.05

_PLAIN_INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include[ \t]*<([\w+-][\w./+-]*)>[ \t]*\r?$", re.M)


def disabled():
    return os.environ.get("KBRL_EVAL_NO_MAIN_CACHE", "") not in ("", "0")


def parse(args):
    """(template, name, source, output, depfile) for torch's compile of one C++ source
    (`-MMD -MF DEP $cflags -c SRC -o OUT $post_cflags`, the name in $cflags), else None. The
    template is args with the four replaced by placeholders."""
    if args.count("-c") != 1 or args.count("-o") != 1 or args.count("-MF") != 1:
        return None
    at = {flag: args.index(flag) + 1 for flag in ("-c", "-o", "-MF")}
    if max(at.values()) >= len(args):
        return None
    defines = [i for i, a in enumerate(args) if a.startswith(NAME_DEFINE)]
    if len(defines) != 1:
        return None
    name = args[defines[0]][len(NAME_DEFINE):]
    source, output, depfile = args[at["-c"]], args[at["-o"]], args[at["-MF"]]
    if not re.match(r"^[A-Za-z_]\w*$", name) or not source.endswith(".cpp"):
        return None
    folder = os.path.dirname(os.path.abspath(source))
    template = list(args)
    template[at["-c"]], template[at["-o"]], template[at["-MF"]] = SOURCE, OUTPUT, DEPFILE
    template[defines[0]] = NAME_DEFINE + NAME
    if any(name in a or folder in a for a in template):
        return None  # the name or the folder where the maker could not put its own
    return template, name, source, output, depfile


def fill(template, source, output, depfile, name):
    """template with a compile's source, output, depfile and name in the placeholders."""
    values = {SOURCE: source, OUTPUT: output, DEPFILE: depfile,
              NAME_DEFINE + NAME: NAME_DEFINE + name}
    return [values.get(a, a) for a in template]


def text_is_shareable(text):
    """Whether text's compile cannot depend on the folder it is in: every "include" in it is
    part of an `#include <relative/path>` line (a quoted include, __has_include or a macro
    include would search the build's own folder first, or could)."""
    if len(text) > MAX_TEXT_BYTES:
        return False
    paths = _PLAIN_INCLUDE.findall(text)
    return text.count(b"include") == len(paths) and not any(b".." in p for p in paths)


def key_of(real, template, name_length, folder_length, text):
    h = hashlib.sha256()
    for part in [real] + list(template) + [str(name_length), str(folder_length)]:
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    h.update(text)
    return h.hexdigest()


def _letters(hex_digits):
    return "".join(chr(ord("a") + int(c, 16)) for c in hex_digits)


def layout(parent, key, name_length, folder_length):
    """(cache folder, source folder, placeholder name) for key, or None when the build folder's
    path is too short to hold a source folder of its length beneath the cache folder."""
    cache = os.path.join(os.path.abspath(parent), CACHE_DIR, _letters(key[:KEY_LETTERS]))
    pad = folder_length - len(cache) - 1
    if pad < 1 or name_length < MIN_NAME:
        return None
    name = "k" + _letters(key[KEY_LETTERS:KEY_LETTERS + name_length - 1])
    return cache, os.path.join(cache, "s" * pad), name


def placed(data, source_folder, placeholder, folder, name):
    """A maker's output (object or dependency file) with a build's folder and name put in."""
    assert len(source_folder) == len(folder) and len(placeholder) == len(name)
    return data.replace(source_folder.encode(), folder.encode()).replace(
        placeholder.encode(), name.encode())


# -- the wrapper: in a candidate's build ----------------------------------------------------


def wrapper_path(real, parent, bin_dir):
    """The compiler wrapper that runs this file for real (host_pch.compiler_wrapper), the cache
    beside the build folders in parent; written by the worker before a candidate's code runs."""
    from .host_pch import compiler_wrapper
    return compiler_wrapper(__file__, "main", real, parent, bin_dir)


def use_wrapper(ninja_file, real, wrapper):
    """Points the C++ compiles of torch's ninja file at wrapper, when they run real (its `cxx`
    line names real, or a command PATH resolves to it). The link goes through the wrapper too,
    which runs it as it is."""
    import shutil
    with open(ninja_file) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("cxx = "):
            named = line[len("cxx = "):]
            if os.path.abspath(shutil.which(named) or named) != real:
                return False
            lines[i] = "cxx = " + wrapper
            with open(ninja_file, "w") as f:
                f.write("\n".join(lines))
            return True
    return False


def compile_from_cache(real, args, parent):
    """Writes the object (and dependency file) of this compile from the cache, waiting for a
    maker when it is not there yet; True when it did, False when the caller compiles."""
    parsed = parse(args)
    if parsed is None:
        return False
    template, name, source, output, depfile = parsed
    folder = os.path.dirname(os.path.abspath(source))
    if os.getcwd() != folder:
        return False  # with -g the object names the working folder; torch's ninja runs there
    with open(source, "rb") as f:
        text = f.read(MAX_TEXT_BYTES + 1)
    if not text_is_shareable(text):
        return False
    key = key_of(real, template, len(name), len(folder), text)
    where = layout(parent, key, len(name), len(folder))
    if where is None:
        return False
    cache = where[0]
    if not os.path.exists(os.path.join(cache, OBJECT)):
        from .pch_maker import wish
        spec = {"compiler": real, "template": template, "name_length": len(name),
                "folder_length": len(folder)}
        wish_file = wish("main", spec, text.decode("utf-8", "surrogateescape"))
        if not _wait_for_object(cache):
            if wish_file:
                _remove(wish_file)  # the build compiles itself: no maker for this one
            return False
    with open(os.path.join(cache, OBJECT), "rb") as f:
        obj = placed(f.read(), where[1], where[2], folder, name)
    with open(os.path.join(cache, DEPS), "rb") as f:
        deps = placed(f.read(), where[1], where[2], folder, name)
    _target, _, rest = deps.partition(b":")  # the maker's output path, then the inputs
    _write(depfile, output.encode() + b":" + rest)
    _write(output, obj)
    return True


def _wait_for_object(cache):
    t0 = time.monotonic()
    while time.monotonic() - t0 < MAKE_TIMEOUT_S + STALE_S:
        if os.path.exists(os.path.join(cache, OBJECT)):
            return True
        if any(os.path.exists(os.path.join(cache, m)) for m in (FAILED, UNCACHEABLE, REFUSED)):
            return False
        try:
            started = os.stat(os.path.join(cache, "spec.json")).st_mtime
        except OSError:
            started = None
        if started is None:
            if time.monotonic() - t0 > UNSEEN_S:
                return False
        elif not _locked(cache) and time.time() - started > STALE_S:
            return False
        time.sleep(POLL_S)
    return False


def _locked(folder):
    """Whether a maker holds folder's lock (read-only: a fenced process opens nothing else)."""
    try:
        fd = os.open(os.path.join(folder, "lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _write(path, data):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# -- the maker: a process of the worker's -------------------------------------------------


def plan(wish, text, parent, trusted_compiler, check_flags):
    """(spec, None) for a sound wish, else (None, why) - with why also left in the cache folder
    as REFUSED when the key could be made, so that the build waiting for it stops waiting."""
    template = wish.get("template")
    n, length = wish.get("name_length"), wish.get("folder_length")
    if (not isinstance(template, list) or not all(isinstance(a, str) for a in template)
            or not isinstance(n, int) or not isinstance(length, int) or len(text) > MAX_TEXT_BYTES):
        return None, "a malformed wish"
    real = wish.get("compiler")
    key = key_of(str(real), template, n, length, text)
    where = layout(parent, key, n, length)
    if where is None:
        return None, "the build folder's path or the name is too short"
    cache = where[0]
    why = _refusal(real, template, text, parent, trusted_compiler, check_flags)
    if why:
        try:
            os.makedirs(cache, exist_ok=True)
            with open(os.path.join(cache, REFUSED), "w") as f:
                f.write(why + "\n")
        except OSError:
            pass
        return None, why
    return {"kind": "main", "folder": cache, "source_folder": where[1], "name": where[2],
            "compiler": real, "template": template,
            "text": text.decode("utf-8", "surrogateescape")}, None


def _refusal(real, template, text, parent, trusted_compiler, check_flags):
    if real != trusted_compiler:
        return "compiler %r is not %r" % (real, trusted_compiler)
    if not text_is_shareable(text):
        return "the text has an include other than <relative/path>"
    for marker in (SOURCE, OUTPUT, DEPFILE, NAME_DEFINE + NAME):
        if template.count(marker) != 1:
            return "the arguments lack a placeholder"
    pch = os.path.join(os.path.abspath(parent), ".kbrl-pch") + os.sep
    pairs = {"-c": SOURCE, "-o": OUTPUT, "-MF": DEPFILE}
    flags, i = [], 0
    while i < len(template):
        a = template[i]
        following = template[i + 1] if i + 1 < len(template) else None
        if a in pairs:
            if following != pairs[a]:
                return "%s is not followed by its placeholder" % a
            i += 2
        elif a == "-include" and following is not None:
            if not os.path.realpath(following).startswith(pch):
                return "-include of %s, not a kbrl precompiled header" % following
            i += 2
        elif a in pairs.values():
            return "a placeholder out of place"
        else:
            if a not in ("-MMD", NAME_DEFINE + NAME):
                flags.append(a)
            i += 1
    return check_flags(flags)


def make(spec):
    """Compiles spec's text into spec['folder']/OBJECT (one maker per folder); True when the
    object is there afterwards. Writes only that folder."""
    import resource
    import subprocess
    from .write_fence import restrict_writes
    folder, source_folder, name = spec["folder"], spec["source_folder"], spec["name"]
    text = spec["text"].encode("utf-8", "surrogateescape")
    tmp = os.path.join(folder, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.makedirs(source_folder, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    restrict_writes([folder])  # flags are checked; whatever they do stays in this folder
    with open(os.path.join(folder, "lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # another maker has it
        if any(os.path.exists(os.path.join(folder, m))
               for m in (OBJECT, FAILED, UNCACHEABLE, REFUSED)):
            return os.path.exists(os.path.join(folder, OBJECT))
        if any(s.encode() in text for s in (folder, name)):
            _mark(folder, UNCACHEABLE, "the text holds a placeholder")
            return False
        source = os.path.join(source_folder, "main.cpp")
        with open(source, "wb") as f:
            f.write(text)
        out, dep = os.path.join(tmp, OBJECT), os.path.join(tmp, DEPS)
        argv = [spec["compiler"]] + fill(spec["template"], source, out, dep, name)

        def limits():
            resource.setrlimit(resource.RLIMIT_AS, (MAKE_MEMORY_BYTES, MAKE_MEMORY_BYTES))
        try:
            proc = subprocess.run(argv, cwd=source_folder, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=MAKE_TIMEOUT_S,
                                  preexec_fn=limits)
            ok, printed = proc.returncode == 0, proc.stdout.decode(errors="replace")
        except (OSError, subprocess.SubprocessError) as e:
            ok, printed = False, str(e)
        if not ok:
            _mark(folder, FAILED, " ".join(argv) + "\n" + printed[-4000:])
            return False
        os.replace(dep, os.path.join(folder, DEPS))
        os.replace(out, os.path.join(folder, OBJECT))  # last: the object's presence says done
    return True


def _mark(folder, marker, why):
    with open(os.path.join(folder, marker), "w", errors="replace") as f:
        f.write(why + "\n")


def main(argv):
    from .host_pch import wrapper_main
    return wrapper_main(argv, not disabled(), compile_from_cache)


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script by the wrapper
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from kbrl_eval.main_object_cache import main as _main
        sys.exit(_main(sys.argv))
    sys.exit(main(sys.argv))
