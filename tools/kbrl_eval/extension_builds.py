"""Extension builds: lets a process load an extension that another process already built into
the same folder (or a builder node built elsewhere), compiles the C++ half of load_inline builds
with a precompiled torch/extension.h, and makes a build folder's lock die with its holder.
Installed into torch.utils.cpp_extension in every process that builds or loads candidates (a
candidate process, forked from the zygote)."""

import os

from .pch_maker import HOST_PCH_DIR, TORCH_HEADER as PCH_HEADER


def install_build_reuse(cpp_extension):
    """Lets a worker load an extension that another process already built into the same folder.

    torch's load_inline writes its source files before every build (torch 1.13 unconditionally),
    which gives them a new mtime, so ninja rebuilds what a builder (or an earlier worker) already
    built. Around torch's compile step this remembers each source's content hash and mtime after
    a build, and when the content is unchanged puts the old mtime back: ninja then finds nothing
    to do and the library is only loaded."""
    original = getattr(cpp_extension, "_jit_compile", None)
    if original is None or getattr(original, "_kbrl_build_reuse", False):
        return
    import hashlib

    def digest(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def jit_compile(name, sources, *args, **kwargs):
        for src in sources:
            side = src + ".kbrl-built"
            try:
                with open(side) as f:
                    sha, mtime_ns = f.read().split()
                if digest(src) == sha:
                    os.utime(src, ns=(int(mtime_ns), int(mtime_ns)))
            except (OSError, ValueError):
                pass
        result = original(name, sources, *args, **kwargs)
        for src in sources:
            try:
                with open(src + ".kbrl-built", "w") as f:
                    f.write("%s %d\n" % (digest(src), os.stat(src).st_mtime_ns))
            except OSError:
                pass
        return result

    jit_compile._kbrl_build_reuse = True
    cpp_extension._jit_compile = jit_compile


class FlockBaton:
    """torch's FileBaton (a build folder's `lock`), held with flock instead of by the file's
    existence. torch's baton is a file created with O_EXCL and removed when the build ends: a
    builder killed mid-build (its node lost, its time limit hit) leaves the file behind, and every
    later build of that source waits for it forever. A flock is released by the kernel when its
    holder dies, so the next build of the source takes the lock and builds (ninja redoes the
    steps the dead build did not finish). The file itself stays."""

    def __init__(self, lock_file_path, wait_seconds=0.1, *args, **kwargs):  # torch's signature
        self.lock_file_path = lock_file_path
        self.fd = None

    def _open(self):
        return os.open(self.lock_file_path, os.O_CREAT | os.O_RDWR, 0o666)

    def try_acquire(self):
        import fcntl
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def wait(self):
        """Until the process building this source is done (or dead)."""
        import fcntl
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def install_crash_safe_lock(cpp_extension):
    """torch's build lock replaced by FlockBaton (where this torch has one by that name)."""
    if hasattr(cpp_extension, "FileBaton") and os.name == "posix":
        cpp_extension.FileBaton = FlockBaton


LIBRARY_RECORD = "kbrl-library.json"


def _library_key(arguments):
    """What decides the bytes of a build: the extension's name, its sources' names and
    contents, its flags, and the toolchain it was built with (torch, CUDA, the architectures,
    the compiler, Python). Folder paths are left out, so a build made in another folder (a
    builder node's) has the key a local build of the same sources would have."""
    import hashlib
    import sys
    import torch
    h = hashlib.sha256()

    def feed(value):
        h.update(repr(value).encode("utf-8", "surrogatepass"))
        h.update(b"\0")

    feed(arguments.get("name"))
    for src in arguments.get("sources") or []:
        feed(os.path.basename(src))
        with open(src, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    for key in ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags",
                "extra_include_paths", "with_cuda", "with_sycl", "is_standalone"):
        feed((key, arguments.get(key)))
    feed((torch.__version__, torch.version.cuda, sys.version_info[:2],
          os.environ.get("TORCH_CUDA_ARCH_LIST"), os.environ.get("CXX", "c++")))
    return h.hexdigest()


def _read_record(build_directory):
    import json
    try:
        with open(os.path.join(build_directory, LIBRARY_RECORD)) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def install_library_reuse(cpp_extension):
    """Lets a worker load a library built in another folder, or on another machine.

    After each successful build of a Python module, kbrl-library.json beside the library
    records the library's file name and the key of what made it (_library_key). Before a build,
    when that record is there with the key this build would have and the library exists, the
    build step is skipped and torch loads the library as it would after building it: torch's
    own bookkeeping (versioned names, the lock, the import) runs unchanged. A builder node's
    builds arrive on an evaluator node as the library and its record (runtime/eval/
    build_artifact.hpp); any difference in sources, flags or toolchain gives another key, and
    the extension is built here as usual."""
    original = getattr(cpp_extension, "_write_ninja_file_and_build_library", None)
    if original is None or getattr(original, "_kbrl_library_reuse", False):
        return
    import inspect
    import json
    signature = inspect.signature(original)
    suffix = ".so" if os.name == "posix" else ".pyd"

    def build_library(*args, **kwargs):
        try:
            arguments = signature.bind(*args, **kwargs).arguments
            build_directory = arguments["build_directory"]
            key = None if arguments.get("is_standalone") else _library_key(arguments)
        except BaseException:  # noqa: BLE001 - without a key, build as torch would
            return original(*args, **kwargs)
        library = str(arguments.get("name")) + suffix
        if key is not None:
            record = _read_record(build_directory)
            if (record is not None and record.get("key") == key
                    and record.get("library") == library
                    and os.path.isfile(os.path.join(build_directory, library))):
                return None  # built before, here or elsewhere: torch imports it next
        result = original(*args, **kwargs)
        if key is not None and os.path.isfile(os.path.join(build_directory, library)):
            tmp = os.path.join(build_directory, LIBRARY_RECORD + ".%d.tmp" % os.getpid())
            try:
                with open(tmp, "w") as f:
                    json.dump({"key": key, "library": library}, f)
                os.replace(tmp, os.path.join(build_directory, LIBRARY_RECORD))
            except OSError:
                pass
        return result

    build_library._kbrl_library_reuse = True
    cpp_extension._write_ninja_file_and_build_library = build_library


def _torch_pch_for(cflags, post_cflags):
    """The path of a header that includes <torch/extension.h>, next to a GCC precompiled copy
    of it made with these exact flags, or None when none can be made.

    Most of a load_inline build of main.cpp is parsing torch/extension.h; with the precompiled
    header the parse is a load. The header lives beside the per-candidate build folders (the
    parent of TORCH_EXTENSIONS_DIR), shared by builders and evaluators, keyed by compiler and
    flags. The extension's own name is left out of the key: no torch header uses it. GCC checks
    a .gch against the compile's flags and silently parses the header instead when they differ,
    so a stale or foreign .gch costs speed, never correctness."""
    from . import pch_maker
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not ext_dir:
        return None
    flags = [f for f in list(cflags or []) + list(post_cflags or [])
             if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    compiler = os.environ.get("CXX", "c++")
    folder = pch_maker.torch_folder(ext_dir, compiler, flags)
    header = os.path.join(folder, PCH_HEADER)
    gch = header + ".gch"
    failed = os.path.join(folder, "failed")
    if os.path.exists(gch):
        return header
    if os.path.exists(failed):
        return None
    if pch_maker.fenced():
        # a fenced candidate reads the cache only: the worker has the header made for later
        # builds (pch_maker), and this one compiles without it
        pch_maker.wish("torch", {"compiler": compiler, "flags": flags})
        return None
    # one process builds it; the others wait, then reuse it
    return pch_maker.compile_header(folder, PCH_HEADER, pch_maker.TORCH_HEADER_TEXT,
                                    pch_maker.torch_header_command(compiler, flags))


WRAPPER_DIR = ".kbrl-bin"


def prepare_host_compiler_wrapper(build_dir):
    """Writes the wrappers of nvcc's default host compilers ($CC, PATH's gcc:
    host_pch.default_host_compilers) and of torch's C++ compiler (main_object_cache.py) for
    builds in build_dir, before a candidate's code runs: the candidate's process cannot write
    them afterwards (see host_pch.wrapper_path). A few bytes each, written once per folder."""
    from . import main_object_cache
    from .host_pch import default_host_compilers, wrapper_path
    from .pch_maker import main_compiler
    parent = os.path.dirname(os.path.abspath(build_dir))
    for real in default_host_compilers():
        wrapper_path(real, os.path.join(parent, HOST_PCH_DIR), os.path.join(parent, WRAPPER_DIR))
    real = main_compiler()
    if real and not main_object_cache.disabled():
        main_object_cache.wrapper_path(real, parent, os.path.join(parent, WRAPPER_DIR))


def _host_compiler_wrapped(cuda_cflags):
    """cuda_cflags with nvcc's host compiler (-ccbin, else the gcc nvcc would run) replaced by
    the wrapper that compiles the host half of .cu sources with a precompiled header
    (host_pch.py), or None when there is no wrapper to use (nowhere to keep its headers, or
    a compiler other than the default one once the candidate's writes are fenced)."""
    import shutil
    from .host_pch import wrapper_path
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not ext_dir:
        return None
    flags = list(cuda_cflags or [])
    at = [i for i, f in enumerate(flags) if f in ("-ccbin", "--compiler-bindir")]
    if len(at) > 1 or any(f.startswith(("-ccbin=", "--compiler-bindir=")) for f in flags):
        return None
    if at and at[0] + 1 >= len(flags):
        return None
    real = flags[at[0] + 1] if at else shutil.which("gcc")
    if not real or os.path.isdir(real):
        return None  # a folder of compilers: nvcc picks one by name, which the wrapper cannot
    parent = os.path.dirname(os.path.abspath(ext_dir))
    wrapper = wrapper_path(os.path.abspath(shutil.which(real) or real),
                           os.path.join(parent, HOST_PCH_DIR), os.path.join(parent, WRAPPER_DIR))
    if wrapper is None:
        return None
    if at:
        flags[at[0] + 1] = wrapper
    else:
        flags = ["-ccbin", wrapper] + flags
    return flags


def install_torch_pch(cpp_extension):
    """Makes torch's ninja files compile C++ sources with the precompiled torch/extension.h
    (see _torch_pch_for), and the host half of CUDA sources through nvcc's host compiler
    wrapped with a precompiled header of their own (host_pch.py)."""
    original = getattr(cpp_extension, "_write_ninja_file", None)
    if original is None or getattr(original, "_kbrl_pch", False) or os.name != "posix":
        return
    import functools
    import inspect
    signature = inspect.signature(original)

    @functools.wraps(original)  # so a wrapper around this one can bind torch's arguments
    def write_ninja_file(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
            header = _torch_pch_for(bound.arguments.get("cflags"),
                                    bound.arguments.get("post_cflags"))
            if header is not None:
                bound.arguments["cflags"] = list(bound.arguments.get("cflags") or []) + [
                    "-include", header]
            if bound.arguments.get("with_cuda") and "cuda_cflags" in bound.arguments:
                wrapped = _host_compiler_wrapped(bound.arguments.get("cuda_cflags"))
                if wrapped is not None:
                    bound.arguments["cuda_cflags"] = wrapped
        except BaseException:  # noqa: BLE001 - a missing speed-up is not an error
            return original(*args, **kwargs)
        return original(*bound.args, **bound.kwargs)

    write_ninja_file._kbrl_pch = True
    cpp_extension._write_ninja_file = write_ninja_file


def install_main_object_cache(cpp_extension):
    """Makes torch's ninja files compile C++ sources through main_object_cache's wrapper, which
    takes main.cpp's object from the cache of objects made once per text, or has it made."""
    original = getattr(cpp_extension, "_write_ninja_file", None)
    if original is None or getattr(original, "_kbrl_main_cache", False) or os.name != "posix":
        return
    import functools
    from . import main_object_cache
    from .pch_maker import main_compiler

    @functools.wraps(original)  # so a wrapper around this one can bind torch's arguments
    def write_ninja_file(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
            real = main_compiler()
            if ext_dir and real and not main_object_cache.disabled():
                parent = os.path.dirname(os.path.abspath(ext_dir))
                wrapper = main_object_cache.wrapper_path(real, parent,
                                                         os.path.join(parent, WRAPPER_DIR))
                path = kwargs.get("path", args[0] if args else None)
                if wrapper and path:
                    main_object_cache.use_wrapper(path, real, wrapper)
        except Exception:  # noqa: BLE001 - a missing speed-up is not an error
            pass
        return result

    write_ninja_file._kbrl_main_cache = True
    cpp_extension._write_ninja_file = write_ninja_file


def install_candidate_build_hooks(cpp_extension, no_pch=False, full_cuda_header=False,
                                  log=lambda m: None):
    """Every hook above, in the order a candidate's process installs them (zygote.child_main)."""
    install_crash_safe_lock(cpp_extension)
    install_build_reuse(cpp_extension)
    if not full_cuda_header:
        from .light_cuda_header import install_light_cuda_header
        install_light_cuda_header(cpp_extension, log=log)
    install_library_reuse(cpp_extension)  # outside the light header's fallback: reuse first
    from .nvcc_driver import install_parallel_nvcc
    install_parallel_nvcc(cpp_extension)
    if not no_pch:
        install_torch_pch(cpp_extension)
    install_main_object_cache(cpp_extension)
