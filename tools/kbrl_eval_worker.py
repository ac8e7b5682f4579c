#!/usr/bin/env python3
"""kbrl evaluation worker: evaluates candidate programs against KernelBench-style references.

The contract is runtime/eval/worker_protocol.md. In short: requests arrive as JSON lines on
--in-fd, answers leave as JSON lines on --out-fd, strictly one answer per request, in order.
fds 1 and 2 belong to the candidate (the parent captures them); the worker writes nothing there
except a traceback when it cannot go on at all.

The evaluation follows KernelBench (src/kernelbench/eval.py, timing.py):
  * seed(base); init = get_init_inputs(); seed(base); Model(*init); seed(base); ModelNew(*init)
    so both models start from identical weights; both are moved to the device and cast;
  * correctness trial seeds: torch.manual_seed(base), then torch.randint(0, 2**32 - 1, (1,))
    once per trial; each trial seeds, draws get_inputs(), runs both models, checks the shape
    and then torch.allclose(reference, candidate, atol, rtol) (1e-4 fp32, 1e-2 fp16/bf16);
  * timing: warm-up calls (synchronized), then per trial an L2 flush, CUDA events around the
    call, a device-wide synchronize; the first timed trial is discarded; mean/std (population)/
    min/max, plus the median.
Beyond KernelBench it guards against the usual runtime hacks (see hack_flags in the protocol):
the reference output is copied and its memory poisoned before the candidate runs, the candidate
gets clones of its inputs that are checked afterwards, outputs must be plain tensors, timing
rotates among several input sets and re-checks timed outputs, and torch functions and global
numeric flags that the candidate changes are detected and put back.

Runs with Python >= 3.9 and torch >= 1.13 (CPU) as well as recent CUDA builds of torch.
"""

import argparse
import builtins
import contextlib
import gc
import json
import linecache
import math
import os
import random
import re
import shlex
import shutil
import signal
import sys
import time
import traceback
import types

EXCERPT_LIMIT = 4000
L2_FLUSH_MIN_BYTES = 256 * 1024 * 1024
TIMING_INPUT_SETS = 3
COMPARE_CHUNK = 1 << 26  # elements compared at a time (256 MiB of float32 differences)
DISCARD_FIRST = 1  # KernelBench discards the first timed trial
HACK_FLAG_ORDER = ("inputs_modified", "output_aliases_input", "non_tensor_output", "cached_output",
                   "monkeypatch", "torch_flags_changed")

torch = None  # imported in main(), so a broken torch still gets answers
_WORKER_FILE = os.path.abspath(__file__)


class BudgetExceeded(BaseException):
    """Raised by SIGALRM when an evaluation passes its soft wall-clock budget."""


class CandidateError(Exception):
    """A failure of the candidate: kind is 'compile' or 'runtime'; excerpt is already cleaned."""

    def __init__(self, kind, excerpt):
        super().__init__(excerpt)
        self.kind = kind
        self.excerpt = excerpt


class ReferenceError_(Exception):
    """A failure of the reference program (reported as an infrastructure error)."""


# ---------------------------------------------------------------------------------------------
# small helpers


def _now():
    return time.perf_counter()


def _finite(x):
    """JSON has no NaN or infinity: they are written as +-1e308 (see the protocol)."""
    x = float(x)
    if math.isnan(x):
        return 1e308
    if math.isinf(x):
        return 1e308 if x > 0 else -1e308
    return x


def _sanitize(obj):
    if isinstance(obj, float):
        return _finite(obj)
    if isinstance(obj, dict):
        return {str(k): _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    return obj


def _truncate(text, limit=EXCERPT_LIMIT, keep="head"):
    if len(text) <= limit:
        return text
    marker = "\n[... %d characters left out ...]\n" % (len(text) - limit)
    room = max(0, limit - len(marker))
    if keep == "head":
        return text[:room] + marker
    if keep == "tail":
        return marker + text[-room:]
    head = room // 3
    return text[:head] + marker + text[-(room - head):]


def _rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _stats(times_ms):
    n = len(times_ms)
    if n == 0:
        return _zero_stats()
    s = sorted(times_ms)
    mean = sum(s) / n
    var = sum((t - mean) ** 2 for t in s) / n  # population std, like numpy.std in KernelBench
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    return {"mean_ms": mean, "median_ms": median, "std_ms": math.sqrt(var), "min_ms": s[0],
            "max_ms": s[-1], "trials": n}


def _zero_stats():
    return {"mean_ms": 0.0, "median_ms": 0.0, "std_ms": 0.0, "min_ms": 0.0, "max_ms": 0.0,
            "trials": 0}


# ---------------------------------------------------------------------------------------------
# error excerpts

_BUILD_CMD = re.compile(r"^\s*(\[\d+/\d+\]\s|FAILED:\s|ninja: |.*\b(nvcc|c\+\+|g\+\+|gcc|clang\+\+)\s+-)")
_ERROR_LINE = re.compile(r"error|Error|ERROR")
_CONTEXT_BEFORE = re.compile(r": In (member )?function|: In instantiation of|: In constructor")


def clean_build_log(text, replacements=()):
    """Keeps what a person needs from an nvcc/g++/ninja failure: the error lines with their
    file:line and the source lines and carets right after them; drops the command lines."""
    for old, new in replacements:
        if old:
            text = text.replace(old, new)
    lines = text.splitlines()
    if not lines:
        return ""
    out = []
    first = lines[0]
    m = re.match(r"(.*?Error building extension '[^']*')", first)
    if m:
        out.append(m.group(1))
        lines = lines[1:]
    kept = set()
    for i, line in enumerate(lines):
        if _BUILD_CMD.match(line) or len(line) > 600:
            continue
        if _ERROR_LINE.search(line):
            if i > 0 and _CONTEXT_BEFORE.search(lines[i - 1]):
                kept.add(i - 1)
            kept.add(i)
            for j in range(i + 1, min(len(lines), i + 4)):
                if _ERROR_LINE.search(lines[j]) or _BUILD_CMD.match(lines[j]) or len(lines[j]) > 600:
                    break
                kept.add(j)
    if kept:
        last = -2
        for i in sorted(kept):
            if i != last + 1 and out:
                out.append("...")
            out.append(lines[i])
            last = i
    else:
        rest = [l for l in lines if not _BUILD_CMD.match(l) and len(l) <= 600]
        out.extend(rest[-40:])
    return _truncate("\n".join(out), keep="head")


def _looks_like_build_log(msg):
    return ("Error building extension" in msg or "ninja: build stopped" in msg
            or "error: command" in msg or "nvcc" in msg and "error" in msg)


_PACKAGE_PATH = re.compile(r'"[^"\n]*/(?:site|dist)-packages/')


def format_exception(exc, own_files, replacements=(), headline=None, with_frames=True):
    """A traceback limited to the frames of the given files (the candidate's, or the
    reference's), plus the frame that raised; the message cleaned if it carries a build log."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ and with_frames else []
    keep = [f for f in frames if f.filename in own_files]
    if frames:
        last = frames[-1]
        if last.filename not in own_files and os.path.abspath(last.filename) != _WORKER_FILE:
            keep.append(last)
    try:
        msg = "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")
    except Exception:  # a hostile __str__
        msg = type(exc).__name__
    if _looks_like_build_log(msg):
        msg = clean_build_log(msg, replacements)
    else:
        msg = _truncate(msg, 2500, keep="middle")
    parts = []
    if headline:
        parts.append(headline)
    if keep:
        parts.append("Traceback (most recent call last):")
        parts.append("".join(traceback.format_list(keep)).rstrip("\n"))
    parts.append(msg)
    text = "\n".join(parts)
    for old, new in replacements:
        if old:
            text = text.replace(old, new)
    text = _PACKAGE_PATH.sub('"', text)  # "torch/utils/cpp_extension.py", not the full path
    return _truncate(text, keep="head" if _looks_like_build_log(msg) else "middle")


# ---------------------------------------------------------------------------------------------
# guards against a candidate changing the process for everyone


class NamespaceGuard:
    """Remembers the callables of torch's main namespaces; finds and undoes replacements."""

    def __init__(self):
        self.targets = []
        for obj in self._objects():
            try:
                snap = {k: v for k, v in vars(obj).items() if callable(v) or isinstance(v, (
                    staticmethod, classmethod, property))}
            except TypeError:
                continue
            self.targets.append((obj, snap))

    @staticmethod
    def _objects():
        import torch.nn.functional as F
        objs = [torch, F, torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.cuda, time,
                builtins, json, math]
        for name in ("linalg", "fft", "special"):
            sub = getattr(torch, name, None)
            if isinstance(sub, types.ModuleType):
                objs.append(sub)
        return objs

    def check_and_restore(self):
        """Returns the changed names ('torch.allclose') and puts the originals back."""
        changed = []
        for obj, snap in self.targets:
            try:
                current = vars(obj)
            except TypeError:
                continue
            for k, v in snap.items():
                if current.get(k, v) is not v:
                    changed.append("%s.%s" % (getattr(obj, "__name__", "?"), k))
                    try:
                        setattr(obj, k, v)
                    except Exception:
                        pass
        return changed


def _flag_accessors():
    """(name, getter, setter) for torch's global numeric settings that change results/speed."""
    acc = []

    def attr(obj_fn, name, label):
        def get():
            return getattr(obj_fn(), name)

        def put(v):
            setattr(obj_fn(), name, v)
        acc.append((label, get, put))

    b = torch.backends
    attr(lambda: b.cuda.matmul, "allow_tf32", "cuda.matmul.allow_tf32")
    attr(lambda: b.cuda.matmul, "allow_fp16_reduced_precision_reduction",
         "cuda.matmul.allow_fp16_reduced_precision_reduction")
    attr(lambda: b.cuda.matmul, "allow_bf16_reduced_precision_reduction",
         "cuda.matmul.allow_bf16_reduced_precision_reduction")
    attr(lambda: b.cudnn, "allow_tf32", "cudnn.allow_tf32")
    attr(lambda: b.cudnn, "benchmark", "cudnn.benchmark")
    attr(lambda: b.cudnn, "deterministic", "cudnn.deterministic")
    attr(lambda: b.cudnn, "enabled", "cudnn.enabled")
    if hasattr(torch, "get_float32_matmul_precision"):
        acc.append(("float32_matmul_precision", torch.get_float32_matmul_precision,
                    torch.set_float32_matmul_precision))
    acc.append(("default_dtype", torch.get_default_dtype, torch.set_default_dtype))
    acc.append(("deterministic_algorithms", torch.are_deterministic_algorithms_enabled,
                torch.use_deterministic_algorithms))
    return acc


class FlagState:
    def __init__(self):
        self.acc = None

    def snapshot(self):
        import warnings
        if self.acc is None:
            self.acc = _flag_accessors()
        state = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, get, _ in self.acc:
                try:
                    state[name] = get()
                except Exception:
                    pass
        return state

    def apply(self, state):
        import warnings
        current = self.snapshot()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, _, put in self.acc:
                if name in state and current.get(name) != state[name]:
                    try:
                        put(state[name])
                    except Exception:
                        pass


# ---------------------------------------------------------------------------------------------
# tensor helpers


def _storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        pass
    try:
        return t.storage().data_ptr()
    except Exception:
        return t.data_ptr()


def _same_values(a, b):
    """Bitwise-ish equality of two tensors (NaN equals NaN)."""
    if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if torch.equal(a, b):
        return True
    if a.is_floating_point() or a.is_complex():
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(((a == b) | both_nan).all())
    return False


def _chunk_pairs(a, b):
    """Matching flat pieces of two same-shaped tensors, COMPARE_CHUNK elements each: what a
    comparison makes of them (differences, their absolute values, closeness) stays that small
    instead of costing several output-sized temporaries, which for level-1 problems' outputs of
    several GB do not fit beside the timing input sets."""
    a, b = a.reshape(-1), b.reshape(-1)
    for start in range(0, a.numel(), COMPARE_CHUNK):
        yield a[start:start + COMPARE_CHUNK], b[start:start + COMPARE_CHUNK]


def _clone_args(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _tensor_bytes(values):
    """Bytes of the tensors in a list of arguments or outputs."""
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _poison(t):
    """Overwrites a tensor the candidate must not be able to reuse."""
    try:
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        else:
            t.bitwise_not_()
    except Exception:
        pass


def _flatten_output(out):
    """A model output as a list of leaves: a tensor -> [tensor]; a tuple/list -> its items."""
    if isinstance(out, (tuple, list)):
        return list(out), True
    return [out], False


# ---------------------------------------------------------------------------------------------
# the worker


def _install_build_reuse(cpp_extension):
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


PCH_HEADER = "kbrl_torch_extension.h"
PCH_TIMEOUT_S = 600


def _torch_pch_for(cflags, post_cflags):
    """The path of a header that includes <torch/extension.h>, next to a GCC precompiled copy
    of it made with these exact flags, or None when none can be made.

    Most of a load_inline build of main.cpp is parsing torch/extension.h; with the precompiled
    header the parse is a load. The header lives beside the per-candidate build folders (the
    parent of TORCH_EXTENSIONS_DIR), shared by builders and evaluators, keyed by compiler and
    flags. The extension's own name is left out of the key: no torch header uses it. GCC checks
    a .gch against the compile's flags and silently parses the header instead when they differ,
    so a stale or foreign .gch costs speed, never correctness."""
    import fcntl
    import hashlib
    import subprocess
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not ext_dir:
        return None
    flags = [f for f in list(cflags or []) + list(post_cflags or [])
             if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    compiler = os.environ.get("CXX", "c++")
    key = hashlib.sha256("\0".join([compiler] + flags).encode()).hexdigest()[:16]
    folder = os.path.join(os.path.dirname(os.path.abspath(ext_dir)), ".kbrl-pch", key)
    header = os.path.join(folder, PCH_HEADER)
    gch = header + ".gch"
    failed = os.path.join(folder, "failed")
    if os.path.exists(gch):
        return header
    if os.path.exists(failed):
        return None
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process builds it; the others wait, then reuse
        if os.path.exists(gch):
            return header
        with open(header, "w") as f:
            f.write("#pragma once\n#include <torch/extension.h>\n")
        tmp = gch + ".%d.tmp" % os.getpid()
        # torch writes the flags shell-quoted for ninja, which runs them through /bin/sh: so
        # does this, or a macro like PYBIND11_COMPILER_TYPE would differ from the real compile
        cmd = " ".join([shlex.quote(compiler), "-x", "c++-header"] + flags
                       + [shlex.quote(header), "-o", shlex.quote(tmp)])
        try:
            proc = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=PCH_TIMEOUT_S)
            ok = proc.returncode == 0
            log = proc.stdout.decode(errors="replace")
        except (OSError, subprocess.SubprocessError) as e:
            ok, log = False, str(e)
        if not ok:
            with open(failed, "w") as f:
                f.write(cmd + "\n" + log[-4000:])
            return None
        os.replace(tmp, gch)
    return header


def _install_torch_pch(cpp_extension):
    """Makes torch's ninja files compile C++ sources with the precompiled torch/extension.h
    (see _torch_pch_for). CUDA sources are untouched: nvcc has no precompiled headers."""
    original = getattr(cpp_extension, "_write_ninja_file", None)
    if original is None or getattr(original, "_kbrl_pch", False) or os.name != "posix":
        return
    import inspect
    signature = inspect.signature(original)

    def write_ninja_file(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
            header = _torch_pch_for(bound.arguments.get("cflags"),
                                    bound.arguments.get("post_cflags"))
        except BaseException:  # noqa: BLE001 - a missing speed-up is not an error
            header = None
        if header is not None:
            bound.arguments["cflags"] = list(bound.arguments.get("cflags") or []) + [
                "-include", header]
            return original(*bound.args, **bound.kwargs)
        return original(*args, **kwargs)

    write_ninja_file._kbrl_pch = True
    cpp_extension._write_ninja_file = write_ninja_file


class Worker:
    def __init__(self, args):
        self.args = args
        self.scratch = os.path.abspath(args.scratch)
        os.makedirs(self.scratch, exist_ok=True)
        self.evaluations = 0
        self.counter = 0
        self.torch_error = None
        self.device = "cpu"
        self.device_name = "cpu"
        self.cuda = False
        self.l2_bytes = 0
        self.guard = None
        self.flags = None
        self.baseline_flags = None
        self.torch_version = ""
        self._start_torch()

    # -- start-up ------------------------------------------------------------------------------

    def _start_torch(self):
        global torch
        try:
            import torch as _torch
            torch = _torch
            self.torch_version = torch.__version__.split("+")[0]
            want = self.args.device
            if want is None:
                want = "cuda" if torch.cuda.is_available() else "cpu"
            if want == "cuda":
                if not torch.cuda.is_available():
                    raise RuntimeError("--device cuda but torch.cuda.is_available() is false")
                torch.cuda.init()
                torch.cuda.set_device(0)
                self.cuda = True
                self.device = "cuda:0"
                self.device_name = torch.cuda.get_device_name(0)
                props = torch.cuda.get_device_properties(0)
                self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
            import torch.utils.cpp_extension as cpp_extension
            _install_build_reuse(cpp_extension)
            if not self.args.no_pch:
                _install_torch_pch(cpp_extension)
            self.guard = NamespaceGuard()
            self.flags = FlagState()
            self.baseline_flags = self.flags.snapshot()
        except BaseException as e:  # noqa: BLE001 - answered on every request
            self.torch_error = "%s: %s" % (type(e).__name__, e)

    # -- ops -----------------------------------------------------------------------------------

    def op_hello(self, req):
        ans = {"id": req["id"], "ok": self.torch_error is None, "device": self.device_name,
               "torch": self.torch_version, "cuda": self.cuda, "pid": os.getpid(),
               "torch_compile": self.torch_error is None and hasattr(torch, "compile")}
        if self.torch_error:
            ans["error"] = self.torch_error
        return ans

    def op_canary(self, req):
        if self.torch_error:
            return {"id": req["id"], "ok": False, "error": self.torch_error}
        ok, err = self.context_ok()
        ans = {"id": req["id"], "ok": ok}
        if not ok:
            ans["error"] = err
        return ans

    def context_ok(self):
        """Runs a tiny known computation on the device; (ok, error text)."""
        try:
            x = torch.arange(1024, device=self.device, dtype=torch.float32) * 2
            s = float(x.sum().item())
            if self.cuda:
                torch.cuda.synchronize()
            if s != 1024.0 * 1023.0:
                return False, "canary computed %r instead of %r" % (s, 1024.0 * 1023.0)
            return True, ""
        except Exception as e:
            return False, _truncate("%s: %s" % (type(e).__name__, e), 1000)

    def op_stats(self, req):
        ans = {"id": req["id"], "rss_mb": _rss_mb(), "gpu_allocated_mb": 0.0,
               "gpu_reserved_mb": 0.0, "evaluations": self.evaluations}
        if self.cuda:
            try:
                ans["gpu_allocated_mb"] = torch.cuda.memory_allocated() / 2.0 ** 20
                ans["gpu_reserved_mb"] = torch.cuda.memory_reserved() / 2.0 ** 20
            except Exception as e:
                ans["ok"] = False
                ans["error"] = "%s: %s" % (type(e).__name__, e)
        return ans

    def op_build(self, req):
        """Builds a candidate's extensions ahead of its evaluation, on a worker without a GPU:
        runs the candidate program's module-level code (where load_inline is called) with
        TORCH_EXTENSIONS_DIR at the hash-keyed build_dir, so the GPU worker finds the built
        library there and only loads it. Nothing is run on a device."""
        rid = req["id"]
        if self.torch_error:
            return {"id": rid, "ok": False, "error": "infrastructure",
                    "error_excerpt": self.torch_error}
        t0 = _now()
        self.counter += 1
        build_dir = req.get("build_dir") or os.path.join(self.scratch, "build")
        work = os.path.join(self.scratch, "build-%d" % self.counter)
        os.makedirs(work, exist_ok=True)
        os.makedirs(build_dir, exist_ok=True)
        path = os.path.join(work, "candidate.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(req["candidate"])
        name = "kbrl_build_%d_%d" % (os.getpid(), self.counter)
        mod = types.ModuleType(name)
        mod.__file__ = path
        mod.__builtins__ = builtins
        old = os.environ.get("TORCH_EXTENSIONS_DIR")
        os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
        sys.modules[name] = mod
        replacements = [(work + os.sep, ""), (build_dir, "<build_dir>")]
        try:
            exec(compile(req["candidate"], path, "exec", dont_inherit=True), mod.__dict__)
            ans = {"id": rid, "ok": True, "error": "none", "error_excerpt": ""}
        except SyntaxError as e:
            ans = {"id": rid, "ok": False, "error": "compile",
                   "error_excerpt": _truncate("%s: %s (line %s)" % (type(e).__name__, e.msg,
                                                                     e.lineno))}
        except BaseException as e:  # noqa: BLE001 - any failure here is the candidate's build
            ans = {"id": rid, "ok": False, "error": "compile",
                   "error_excerpt": format_exception(e, [path], replacements)}
        finally:
            sys.modules.pop(name, None)
            if old is None:
                os.environ.pop("TORCH_EXTENSIONS_DIR", None)
            else:
                os.environ["TORCH_EXTENSIONS_DIR"] = old
        ans["compile_seconds"] = _now() - t0
        return ans

    def op_evaluate(self, req):
        self.evaluations += 1
        self.counter += 1
        ev = Evaluation(self, req, self.counter)
        return ev.run()


class Evaluation:
    """One evaluate request. run() always returns a complete answer."""

    def __init__(self, worker, req, number):
        self.w = worker
        self.req = req
        self.number = number
        self.ans = {
            "id": req["id"], "compiled": False, "correct": False, "trials_passed": 0,
            "trials_total": 0, "error": "none", "error_excerpt": "", "trials": [],
            "kernel_runtime": _zero_stats(), "reference_runtime": _zero_stats(),
            "compiled_reference_runtime": _zero_stats(), "hack_flags": [],
            "compile_seconds": 0.0, "correctness_seconds": 0.0, "timing_seconds": 0.0,
            "reference_seconds": 0.0, "sticky_cuda_error": False, "device": worker.device_name,
        }
        self.flags = set()
        self.phase = "setup"
        self.dir = os.path.join(worker.scratch, "eval_%d_%d" % (os.getpid(), number))
        self.modules = []
        self.files = []
        self.ref_model = None
        self.cand_model = None
        self.cand_flags = None
        self.replacements = []
        self.env_before = None
        self.cwd_before = None
        self._inputs_on_device = False

    # -- parameters ----------------------------------------------------------------------------

    def _params(self):
        r = self.req
        for key in ("reference", "candidate"):
            if not isinstance(r.get(key), str):
                raise ValueError("evaluate needs '%s' (program source as a string)" % key)
        p = {}
        p["backend"] = str(r.get("backend", "cuda"))
        p["precision"] = str(r.get("precision", "fp32"))
        dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        if p["precision"] not in dtypes:
            raise ValueError("precision '%s': expected fp32, fp16 or bf16" % p["precision"])
        p["dtype"] = dtypes[p["precision"]]
        p["trials"] = max(1, int(r.get("correctness_trials", 5)))
        p["perf_trials"] = max(0, int(r.get("perf_trials", 100)))
        p["timing_input_sets"] = min(8, max(1, int(r.get("timing_input_sets",
                                                         TIMING_INPUT_SETS))))
        p["warmup"] = max(0, int(r.get("warmup_runs", 3)))
        p["seed"] = int(r.get("seed", 42))
        tol = 1e-4 if p["precision"] == "fp32" else 1e-2
        atol = float(r.get("atol", -1))
        rtol = float(r.get("rtol", -1))
        p["atol"] = tol if atol < 0 else atol
        p["rtol"] = tol if rtol < 0 else rtol
        p["time_reference"] = bool(r.get("time_reference", True))
        p["time_compiled_reference"] = bool(r.get("time_compiled_reference", False))
        p["compile_check"] = bool(r.get("compile_check", p["time_compiled_reference"]))
        p["inputs_on"] = str(r.get("inputs_on", "device"))
        if p["inputs_on"] not in ("device", "host"):
            raise ValueError("inputs_on '%s': expected device or host" % p["inputs_on"])
        bd = r.get("build_dir") or os.path.join(self.w.scratch, "torch_extensions")
        p["build_dir"] = os.path.abspath(str(bd))
        p["timeout_s"] = float(r.get("timeout_s", 300))
        # answer before the parent's kill at timeout_s (the worker then survives the timeout)
        p["budget_s"] = max(0.001, p["timeout_s"] - min(5.0, 0.1 * p["timeout_s"]))
        return p

    # -- the whole evaluation --------------------------------------------------------------------

    def run(self):
        ans = self.ans
        if self.w.torch_error:
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = "torch is not usable in the worker: " + self.w.torch_error
            return ans
        self.env_before = dict(os.environ)
        try:
            self.cwd_before = os.getcwd()
        except OSError:
            self.cwd_before = self.w.scratch
        armed = False
        try:
            try:
                self.p = self._params()
                ans["trials_total"] = self.p["trials"]
                # torch.device works as a default-device context from torch 2.0 on
                self._inputs_on_device = (self.p["inputs_on"] == "device" and self.w.cuda
                                          and hasattr(torch.device, "__enter__"))
                if self.p["compile_check"] and not hasattr(torch, "compile"):
                    # asked for speedups against torch.compile: nothing to measure them with
                    raise ReferenceError_(
                        "torch.compile needs torch >= 2.0, this worker has %s: the "
                        "torch.compile reference cannot be timed (use the eager reference, or "
                        "a worker Python with torch 2: eval.python)" % torch.__version__)
                if self.p["timeout_s"] > 0:
                    signal.setitimer(signal.ITIMER_REAL, self.p["budget_s"])
                    armed = True
                self._evaluate()
            finally:
                if armed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except BudgetExceeded as e:
            ans["correct"] = False
            ans["error"] = "timeout"
            ans["error_excerpt"] = format_exception(
                e, self.files, self.replacements,
                headline="the evaluation passed its budget of %gs (timeout_s %g) during %s" % (
                    self.p["budget_s"], self.p["timeout_s"], self.phase))
            self._check_sticky()
        except CandidateError as e:
            ans["correct"] = False
            ans["error"] = e.kind
            ans["error_excerpt"] = e.excerpt
            self._check_sticky()
        except ReferenceError_ as e:
            ans["correct"] = False
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = _truncate(str(e))
            self._check_sticky()
        except BaseException as e:  # noqa: BLE001 - the worker's own failure
            ans["correct"] = False
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = _truncate("worker failure during %s:\n%s" % (
                self.phase, "".join(traceback.format_exception(type(e), e, e.__traceback__))),
                keep="tail")
            self._check_sticky()
        finally:
            try:
                self._cleanup()
            except BaseException as e:  # noqa: BLE001
                if ans["error"] == "none":
                    ans["error"] = "infrastructure"
                    ans["error_excerpt"] = _truncate("cleanup failed: %s: %s" % (type(e).__name__, e))
        ans["hack_flags"] = [f for f in HACK_FLAG_ORDER if f in self.flags] + sorted(
            f for f in self.flags if f not in HACK_FLAG_ORDER)
        return ans

    def _check_sticky(self):
        if not self.w.cuda:
            return
        ok, _ = self.w.context_ok()
        if not ok:
            self.ans["sticky_cuda_error"] = True

    def _sync(self):
        if self.w.cuda:
            torch.cuda.synchronize()

    def _seed(self, s):
        torch.manual_seed(s)
        if self.w.cuda:
            torch.cuda.manual_seed(s)
        random.seed(s)
        try:
            import numpy
            numpy.random.seed(s % (2 ** 32))
        except Exception:
            pass

    def _process(self, x):
        """KernelBench's _process_input_tensor: floating tensors cast to the precision, all
        tensors to the device (integer tensors, e.g. class labels, keep their dtype)."""
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point():
            x = x.to(dtype=self.p["dtype"])
        return x.to(device=self.w.device)

    # -- loading ---------------------------------------------------------------------------------

    def _load_module(self, source, kind):
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, kind + ".py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        self.files.append(path)
        name = "kbrl_%s_%d_%d" % (kind, os.getpid(), self.number)
        mod = types.ModuleType(name)
        mod.__file__ = path
        mod.__builtins__ = builtins
        sys.modules[name] = mod  # dataclasses, pickling and triton look modules up here
        self.modules.append(name)
        code = compile(source, path, "exec", dont_inherit=True)
        exec(code, mod.__dict__)
        return mod

    def _load_reference(self):
        self.phase = "reference load"
        t0 = _now()
        try:
            mod = self._load_module(self.req["reference"], "reference")
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(mod, name):
                    raise ReferenceError_("the reference program defines no %s" % name)
            self.ref_mod = mod
            self._seed(self.p["seed"])
            init = [self._process(x) for x in mod.get_init_inputs()]
            self.init_inputs = init
            with torch.no_grad():
                self._seed(self.p["seed"])
                self.ref_model = mod.Model(*init)
                self.ref_model = self.ref_model.to(device=self.w.device, dtype=self.p["dtype"])
            self._sync()
        except ReferenceError_:
            raise
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference program failed:"))
        self.ans["reference_seconds"] += _now() - t0

    def _load_candidate(self):
        self.phase = "compile"
        t0 = _now()
        build_dir = self.p["build_dir"]
        self.replacements = [(self.dir + os.sep, ""), (build_dir, "<build_dir>")]
        old = os.environ.get("TORCH_EXTENSIONS_DIR")
        try:
            os.makedirs(build_dir, exist_ok=True)
            os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
            try:
                mod = self._load_module(self.req["candidate"], "candidate")
            except BudgetExceeded:
                raise
            except SyntaxError as e:
                raise CandidateError("compile", _truncate(self._fmt_syntax(e)))
            except BaseException as e:  # noqa: BLE001
                raise CandidateError("compile", format_exception(e, self.files, self.replacements))
            cls = getattr(mod, "ModelNew", None)
            if cls is None:
                raise CandidateError("compile", "the candidate program defines no ModelNew")
            if not callable(cls):
                raise CandidateError("compile", "ModelNew is not a class")
            try:
                with torch.no_grad():
                    self._seed(self.p["seed"])
                    model = cls(*self.init_inputs)
            except BudgetExceeded:
                raise
            except BaseException as e:  # noqa: BLE001
                text = format_exception(e, self.files, self.replacements,
                                        headline="ModelNew(*get_init_inputs()) failed:")
                kind = "compile" if self._is_build_failure(e) else "runtime"
                self.ans["compiled"] = kind != "compile"
                raise CandidateError(kind, text)
        finally:
            if old is None:
                os.environ.pop("TORCH_EXTENSIONS_DIR", None)
            else:
                os.environ["TORCH_EXTENSIONS_DIR"] = old
            self.ans["compile_seconds"] = _now() - t0
        self.ans["compiled"] = True
        self.cand_model = model
        self._after_candidate_code()
        self.phase = "candidate setup"
        try:
            with torch.no_grad():
                if not hasattr(model, "forward") and not callable(model):
                    raise TypeError("ModelNew instance is not callable")
                if isinstance(model, torch.nn.Module):
                    self.cand_model = model.to(device=self.w.device, dtype=self.p["dtype"])
            self._sync()
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(e, self.files, self.replacements))
        self._after_candidate_code()

    def _fmt_syntax(self, e):
        text = "".join(traceback.format_exception_only(type(e), e))
        for old, new in self.replacements:
            text = text.replace(old, new)
        return text.rstrip()

    @staticmethod
    def _is_build_failure(e):
        seen = 0
        while e is not None and seen < 5:
            msg = str(e)
            if "Error building extension" in msg or "ninja" in msg and "error" in msg.lower():
                return True
            if type(e).__name__ in ("CompilationError", "CalledProcessError"):
                return True
            e = e.__cause__ or e.__context__
            seen += 1
        return False

    def _after_candidate_code(self):
        """After any candidate code ran: undo torch function replacements, remember and undo
        changed global flags (the candidate gets its flags back whenever it runs)."""
        changed = self.w.guard.check_and_restore()
        if changed:
            self.flags.add("monkeypatch")
        state = self.w.flags.snapshot()
        if state != self.w.baseline_flags:
            self.flags.add("torch_flags_changed")
        self.cand_flags = state

    # -- running ---------------------------------------------------------------------------------

    def _run_reference(self, args, seed):
        """Runs the reference on args (clones the caller made); returns its output."""
        t0 = _now()
        try:
            self.w.flags.apply(self.w.baseline_flags)
            self._seed(seed)
            with torch.no_grad():
                out = self.ref_model(*args)
            self._sync()
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference model failed:"))
        finally:
            self.ans["reference_seconds"] += _now() - t0
        return out

    def _run_candidate(self, args, seed):
        try:
            self.w.flags.apply(self.cand_flags)
            if seed is not None:
                self._seed(seed)
            with torch.no_grad():
                out = self.cand_model(*args)
            try:
                self._sync()
            except BudgetExceeded:
                raise
            except BaseException as e:  # noqa: BLE001
                raise CandidateError("runtime", format_exception(
                    e, self.files, self.replacements, with_frames=False,
                    headline="the device reported an error at the synchronize after ModelNew "
                             "returned (an asynchronous error of the candidate's kernels):"))
        except (BudgetExceeded, CandidateError):
            raise
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(e, self.files, self.replacements))
        finally:
            self._after_candidate_code()
            self.w.flags.apply(self.w.baseline_flags)
        return out

    def _expected_copy(self, out):
        """Clones the reference output and poisons the original (unless it is the model's own
        memory), so a candidate cannot find the answer in freed memory."""
        leaves, is_seq = _flatten_output(out)
        model_ptrs = set()
        try:
            for t in list(self.ref_model.parameters()) + list(self.ref_model.buffers()):
                model_ptrs.add(_storage_ptr(t))
        except Exception:
            pass
        copies = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                c = leaf.detach().clone()
                if _storage_ptr(leaf) not in model_ptrs:
                    _poison(leaf)
                copies.append(c)
            else:
                copies.append(leaf)
        return copies, is_seq

    def _compare(self, expected, is_seq, out, cand_args, note_prefix=""):
        """One comparison: (passed, max_abs_diff, mean_abs_diff, note). Adds hack flags."""
        leaves, out_seq = _flatten_output(out)
        if is_seq != out_seq or len(leaves) != len(expected):
            bad = [type(l).__name__ for l in leaves if type(l) is not torch.Tensor]
            if bad or not out_seq and not isinstance(out, torch.Tensor):
                self.flags.add("non_tensor_output")
            return False, 0.0, 0.0, note_prefix + "output structure: expected %s, got %s" % (
                "%d outputs" % len(expected) if is_seq else "a tensor",
                "%s of %d" % (type(out).__name__, len(leaves)) if out_seq else type(out).__name__)
        in_ptrs = {_storage_ptr(a) for a in cand_args if isinstance(a, torch.Tensor)
                   and a.numel() > 0}
        max_d, mean_d, notes = 0.0, 0.0, []
        ok = True
        for i, (exp, got) in enumerate(zip(expected, leaves)):
            where = ("output %d: " % i) if is_seq else ""
            if not isinstance(exp, torch.Tensor):
                if got != exp:
                    ok = False
                    notes.append(where + "value %r, expected %r" % (got, exp))
                continue
            if type(got) is not torch.Tensor:
                self.flags.add("non_tensor_output")
                ok = False
                notes.append(where + "not a plain torch.Tensor but %s" % type(got).__name__)
                continue
            if got.numel() > 0 and _storage_ptr(got) in in_ptrs:
                self.flags.add("output_aliases_input")
            if got.shape != exp.shape:
                ok = False
                notes.append(where + "shape mismatch: expected %s, got %s" % (
                    list(exp.shape), list(got.shape)))
                continue
            if got.dtype != exp.dtype:
                ok = False
                notes.append(where + "dtype mismatch: expected %s, got %s" % (
                    str(exp.dtype).replace("torch.", ""), str(got.dtype).replace("torch.", "")))
                continue
            if got.device != exp.device:
                ok = False
                notes.append(where + "device mismatch: expected %s, got %s" % (exp.device, got.device))
                continue
            mx, mn = self._diffs(exp, got)
            max_d = max(max_d, mx) if not math.isnan(mx) else float("nan")
            mean_d = max(mean_d, mn) if not math.isnan(mn) else float("nan")
            if not self._close(exp, got):
                ok = False
                if not bool(torch.isfinite(got).all()) if got.is_floating_point() else False:
                    notes.append(where + "values differ (output has NaN/Inf)")
                else:
                    notes.append(where + "values differ: max abs diff %.6g" % mx)
        return ok, max_d, mean_d, (note_prefix + "; ".join(notes)) if notes else ""

    @staticmethod
    def _diffs(exp, got):
        """(max, mean) of |exp - got| in float32 (float64 for float64), a chunk at a time."""
        if exp.numel() == 0:
            return 0.0, 0.0
        wide = None if exp.is_complex() else (
            torch.float64 if exp.dtype == torch.float64 else torch.float32)
        top, total = None, None
        for e, g in _chunk_pairs(exp, got):
            d = (e - g).abs() if wide is None else (e.to(wide) - g.to(wide)).abs()
            m, t = d.max(), d.sum(dtype=torch.float64)
            top = m if top is None else torch.maximum(top, m)  # NaN stays NaN
            total = t if total is None else total + t
        return float(top.item()), float(total.item()) / exp.numel()

    def _close(self, exp, got):
        """KernelBench's torch.allclose(reference, candidate, atol=tol, rtol=tol) (equality
        for bool), a chunk at a time: the same answer, as closeness is elementwise."""
        if exp.dtype == torch.bool:
            return all(torch.equal(e, g) for e, g in _chunk_pairs(exp, got))
        return all(torch.allclose(e, g, atol=self.p["atol"], rtol=self.p["rtol"])
                   for e, g in _chunk_pairs(exp, got))

    def _check_inputs(self, pristine, used):
        for a, b in zip(pristine, used):
            if isinstance(a, torch.Tensor):
                if not isinstance(b, torch.Tensor) or not _same_values(a, b):
                    self.flags.add("inputs_modified")
                    return False
        return True

    # -- phases ----------------------------------------------------------------------------------

    def _evaluate(self):
        self._load_reference()
        self._load_candidate()
        if self._correctness():
            if self.p["perf_trials"] > 0:
                self._timing()

    def _trial_seeds(self, n):
        # KernelBench: torch.manual_seed(seed); one torch.randint(0, 2**32 - 1, (1,)) per trial
        torch.manual_seed(self.p["seed"])
        return [int(torch.randint(0, 2 ** 32 - 1, (1,)).item()) for _ in range(n)]

    def _draw_inputs(self, seed):
        self._seed(seed)
        try:
            with self._input_device():
                raw = self.ref_mod.get_inputs()
            return [self._process(x) for x in raw]
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            if self._inputs_on_device:
                # a get_inputs() that needs host tensors (numpy, CPU-only ops): draw this
                # problem's inputs on the host from now on
                self._inputs_on_device = False
                return self._draw_inputs(seed)
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference's get_inputs() failed:"))

    def _input_device(self):
        """Makes the GPU the default device for tensor factories while get_inputs() runs, so a
        torch.rand of several GB is drawn in place in milliseconds instead of seconds on the CPU
        plus a copy. The seed is the same; the generator (and so the values) is the GPU's."""
        if self._inputs_on_device:
            return torch.device(self.w.device)
        return contextlib.nullcontext()

    def _correctness(self):
        self.phase = "correctness"
        t_start = _now()
        ref_before = self.ans["reference_seconds"]
        n = self.p["trials"]
        seeds = self._trial_seeds(n)
        passed = 0
        try:
            for i in range(n):
                self.phase = "correctness trial %d" % (i + 1)
                pristine = self._draw_inputs(seeds[i])
                ref_out = self._run_reference(_clone_args(pristine), seeds[i])
                expected, is_seq = self._expected_copy(ref_out)
                del ref_out
                cand_args = _clone_args(pristine)
                trial = {"passed": False, "max_abs_diff": 0.0, "mean_abs_diff": 0.0, "note": ""}
                self.ans["trials"].append(trial)
                try:
                    out = self._run_candidate(cand_args, seeds[i])
                except CandidateError:
                    trial["note"] = "raised an error"
                    raise
                ok, mx, mn, note = self._compare(expected, is_seq, out, cand_args)
                if not self._check_inputs(pristine, cand_args):
                    note = (note + "; " if note else "") + "the candidate wrote to its inputs"
                trial.update(passed=ok, max_abs_diff=mx, mean_abs_diff=mn, note=note)
                passed += int(ok)
                self.ans["trials_passed"] = passed
                del out, expected, cand_args, pristine
        finally:
            spent = _now() - t_start
            self.ans["correctness_seconds"] = spent - (self.ans["reference_seconds"] - ref_before)
        self.ans["correct"] = passed == n
        if not self.ans["correct"]:
            self.ans["error"] = "mismatch"
            first = next(t for t in self.ans["trials"] if not t["passed"])
            self.ans["error_excerpt"] = _truncate("%d of %d correctness trials failed; first: %s" % (
                n - passed, n, first["note"]))
        return self.ans["correct"]

    def _timing(self):
        self.phase = "timing"
        t_start = _now()
        ref_before = self.ans["reference_seconds"]
        p = self.p
        # set 0 is KernelBench's timing input (seed = base seed); the others continue the trial
        # seed sequence past the correctness trials. As many sets as fit in free device memory
        # (at most timing_input_sets): level-1 problems draw inputs of several GB each.
        most = p["timing_input_sets"]
        extra = self._trial_seeds(p["trials"] + most)[p["trials"]:]
        set_seeds = [p["seed"]] + extra[:most - 1]
        refill_seed = extra[-1]  # the fresh values of the one-set cache check below
        pristine, expected = [], []

        def draw_set(seed):
            args = self._draw_inputs(seed)
            out = self._run_reference(_clone_args(args), seed)
            pristine.append(args)
            expected.append(self._expected_copy(out))

        draw_set(set_seeds[0])
        k = self._timing_sets_that_fit(pristine[0], expected[0][0], most)
        if k < most:
            self.ans["timing_note"] = ("timed with %d input set(s) instead of %d: more do not "
                                       "fit in the device's free memory" % (k, most))
        del set_seeds[k:]
        for seed in set_seeds[1:]:
            draw_set(seed)
        self.ans["timing_input_sets"] = k
        cand_sets = [_clone_args(a) for a in pristine]
        checked = set(range(DISCARD_FIRST, DISCARD_FIRST + k))
        total = p["perf_trials"] + DISCARD_FIRST
        checked |= set(range(max(DISCARD_FIRST, total - k), total))
        cached = []

        def check(trial, set_index, out):
            exp, is_seq = expected[set_index]
            ok, _, _, note = self._compare(exp, is_seq, out, cand_sets[set_index])
            if not ok:
                cached.append("timed trial %d (input set %d): %s" % (trial, set_index, note))

        self.w.flags.apply(self.cand_flags)
        try:
            times = self._time_calls(self.cand_model, cand_sets, p["warmup"], p["perf_trials"],
                                     checked, check, candidate=True)
        finally:
            self._after_candidate_code()
            self.w.flags.apply(self.w.baseline_flags)
        self.ans["kernel_runtime"] = _stats(times)

        self.phase = "timing checks"
        for a, b in zip(pristine, cand_sets):
            self._check_inputs(a, b)
        # identity-keyed caches: same tensors, new values -> must give the new answer
        if k > 1 and all(self._same_layout(pristine[0], q) for q in pristine[1:]):
            for i in range(k):
                j = (i + 1) % k
                for dst, src in zip(cand_sets[i], pristine[j]):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
                out = self._run_candidate(cand_sets[i], set_seeds[j])
                exp, is_seq = expected[j]
                ok, _, _, note = self._compare(exp, is_seq, out, cand_sets[i])
                del out
                if not ok:
                    cached.append("input set %d refilled with set %d's values: %s" % (i, j, note))
        expected[:] = []
        if k == 1:
            # set 0's pristine copy goes first, so the check holds no more than timing did
            pristine = None
            note = self._refill_check(cand_sets[0], refill_seed)
            if note:
                cached.append("input set 0 refilled with fresh values: " + note)
        if cached:
            self.flags.add("cached_output")
            self.ans["correct"] = False
            self.ans["error"] = "mismatch"
            self.ans["error_excerpt"] = _truncate(
                "correct in the correctness trials, but outputs during timing did not match the "
                "reference for the same inputs (cached output?):\n" + "\n".join(cached[:10]))
        spent = _now() - t_start
        self.ans["timing_seconds"] = spent - (self.ans["reference_seconds"] - ref_before)
        # The reference is timed on input sets already in memory, not on copies: the pristine
        # sets (nothing needs their values any more), or with a single set the candidate's set
        # with the fresh values of the check above.
        ref_sets = cand_sets if pristine is None else pristine
        if ref_sets is not cand_sets:
            cand_sets[:] = []  # free the timing inputs before the reference is timed
        if p["time_reference"] or p["time_compiled_reference"]:
            self.w.flags.apply(self.w.baseline_flags)
        if p["time_reference"]:
            self.phase = "reference timing"
            t0 = _now()
            try:
                ref_times = self._time_calls(self.ref_model, ref_sets, p["warmup"],
                                             p["perf_trials"], set(), None, candidate=False)
            except CandidateError as e:  # _time_calls labels errors; here they are the reference's
                raise ReferenceError_("the reference model failed while timed:\n" + e.excerpt)
            self.ans["reference_runtime"] = _stats(ref_times)
            self.ans["reference_seconds"] += _now() - t0
        if p["time_compiled_reference"] and hasattr(torch, "compile"):
            # (without torch.compile, a comparison asked for beside eager speedups stays
            # untimed; a run measured against it was refused up front: compile_check)
            t0 = _now()
            try:
                self.ans["compiled_reference_runtime"] = _stats(
                    self._time_compiled_reference(ref_sets))
            finally:
                self.ans["reference_seconds"] += _now() - t0

    def _timing_sets_that_fit(self, inputs, expected, most):
        """How many timing input sets (1..most) fit in the device's free memory, given set 0's
        inputs and expected outputs (already allocated). Timing holds per set its inputs, their
        expected outputs and the candidate's copy of the inputs, and besides them one output,
        the L2 flush buffer and the comparisons' chunks. A fifth of the memory is left for the
        candidate's own work and for other processes on the GPU whose use grows (a learner that
        trains between evaluations)."""
        if not self.w.cuda:
            return most
        try:
            device = torch.device(self.w.device)
            free, _ = torch.cuda.mem_get_info(device)
            free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        except Exception:  # noqa: BLE001
            return most
        in_bytes, out_bytes = _tensor_bytes(inputs), _tensor_bytes(expected)
        usable = 0.8 * (free + in_bytes + out_bytes)
        flush = max(L2_FLUSH_MIN_BYTES, 2 * self.w.l2_bytes)
        comparison = 4 * 4 * COMPARE_CHUNK  # a few float32 chunks
        per_set = 2 * in_bytes + out_bytes
        if per_set <= 0:
            return most
        return max(1, min(most, int((usable - out_bytes - flush - comparison) // per_set)))

    def _refill_check(self, cand_args, seed):
        """The identity-keyed cache check for a single timing set: the candidate's own input
        tensors get freshly drawn values and must give the reference's answer for them. Returns
        a note when they do not, else "". Holds one more input set and two outputs at most,
        which is what timing held with set 0's pristine copy and expected outputs."""
        fresh = self._draw_inputs(seed)
        if not self._same_layout(fresh, cand_args):
            return ""
        for dst, src in zip(cand_args, fresh):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        out = self._run_reference(fresh, seed)  # fresh is not needed after this: no clone
        exp, is_seq = self._expected_copy(out)
        del out, fresh
        out = self._run_candidate(cand_args, seed)
        ok, _, _, note = self._compare(exp, is_seq, out, cand_args)
        return "" if ok else note

    def _time_compiled_reference(self, ref_sets):
        """The reference compiled with torch.compile (default mode), timed as the eager one.
        Compilation happens in an untimed first call on every input set (each set may need its
        own graph), then the usual warm-up and timed runs."""
        p = self.p
        self.phase = "torch.compile of the reference"
        try:
            compiled = torch.compile(self.ref_model)
            with torch.no_grad():
                for args in ref_sets:
                    compiled(*args)
                    self._sync()
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(
                e, self.files, self.replacements,
                headline="torch.compile of the reference failed:"))
        self.phase = "torch.compile reference timing"
        try:
            return self._time_calls(compiled, ref_sets, p["warmup"], p["perf_trials"], set(),
                                    None, candidate=False)
        except CandidateError as e:
            raise ReferenceError_("the torch.compile reference failed while timed:\n" + e.excerpt)
        finally:
            del compiled
            try:
                torch._dynamo.reset()  # the graphs of this problem are not needed again
            except Exception:  # noqa: BLE001
                pass

    @staticmethod
    def _same_layout(a, b):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
                return False
            if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
                return False
        return True

    def _time_calls(self, model, arg_sets, warmup, trials, checked, check, candidate):
        """KernelBench's cuda_event timing with a device-wide synchronize before the end event
        (side streams count) and input rotation; host perf_counter on CPU. Returns ms per trial
        without the discarded first ones."""
        k = len(arg_sets)
        cuda = self.w.cuda
        flush = None
        times = []
        try:
            with torch.no_grad():
                for i in range(warmup):
                    model(*arg_sets[i % k])
                    self._sync()
                if cuda:
                    torch.cuda.empty_cache()
                    nbytes = max(L2_FLUSH_MIN_BYTES, 2 * self.w.l2_bytes)
                    flush = torch.empty(nbytes // 8, dtype=torch.int64, device=self.w.device)
                for t in range(trials + DISCARD_FIRST):
                    args = arg_sets[t % k]
                    if cuda:
                        torch.cuda.synchronize()
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        flush.fill_(t)  # thrash L2: measure cold-cache performance
                        start.record()
                        out = model(*args)
                        torch.cuda.synchronize()  # every stream of the device
                        end.record()
                        end.synchronize()
                        ms = start.elapsed_time(end)
                    else:
                        t0 = time.perf_counter()
                        out = model(*args)
                        ms = (time.perf_counter() - t0) * 1000.0
                    if t >= DISCARD_FIRST:
                        times.append(ms)
                    if check is not None and t in checked:
                        if candidate:
                            self._after_candidate_code()
                            self.w.flags.apply(self.w.baseline_flags)
                        check(t - DISCARD_FIRST, t % k, out)
                        if candidate:
                            self.w.flags.apply(self.cand_flags)
                    del out
        except BudgetExceeded:
            raise
        except CandidateError:
            raise
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("runtime", format_exception(
                e, self.files, self.replacements, headline="failed while timed:"))
        finally:
            del flush
        return times

    # -- cleanup ---------------------------------------------------------------------------------

    def _cleanup(self):
        self.phase = "cleanup"
        self.ref_model = None
        self.cand_model = None
        self.ref_mod = None
        self.init_inputs = None
        for name in self.modules:
            mod = sys.modules.pop(name, None)
            if mod is not None:
                try:
                    mod.__dict__.clear()
                except Exception:
                    pass
        self.modules = []
        # the candidate may have changed the process: put back what we can
        if self.w.guard is not None:
            if self.w.guard.check_and_restore():
                self.flags.add("monkeypatch")
            self.w.flags.apply(self.w.baseline_flags)
            torch.set_grad_enabled(True)
        if sys.stdout is not sys.__stdout__:
            sys.stdout = sys.__stdout__
        if sys.stderr is not sys.__stderr__:
            sys.stderr = sys.__stderr__
        if self.env_before is not None and dict(os.environ) != self.env_before:
            os.environ.clear()
            os.environ.update(self.env_before)
        try:
            if self.cwd_before and os.getcwd() != self.cwd_before:
                os.chdir(self.cwd_before)
        except OSError:
            os.chdir(self.w.scratch)
        shutil.rmtree(self.dir, ignore_errors=True)
        for f in self.files:
            linecache.checkcache(f)
        gc.collect()
        if self.w.cuda:
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception:
                self.ans["sticky_cuda_error"] = True
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------
# the loop


def _on_alarm(signum, frame):
    raise BudgetExceeded("soft wall-clock budget exceeded")


def serve(worker, infile, outfile):
    ops = {"hello": worker.op_hello, "evaluate": worker.op_evaluate, "canary": worker.op_canary,
           "stats": worker.op_stats, "build": worker.op_build}
    while True:
        line = infile.readline()
        if not line:
            return 0  # the parent closed our input: leave quietly
        if not line.strip():
            continue
        exit_after = False
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request must be a JSON object")
        except ValueError as e:
            ans = {"id": -1, "ok": False, "error": "malformed request: %s" % e}
        else:
            rid = req.get("id", -1)
            if isinstance(rid, bool) or not isinstance(rid, int):
                ans = {"id": -1, "ok": False, "error": "request without an integer id"}
            else:
                op = req.get("op")
                try:
                    if op == "exit":
                        ans = {"id": rid, "ok": True}
                        exit_after = True
                    elif op in ops:
                        ans = ops[op](req)
                    else:
                        ans = {"id": rid, "ok": False, "error": "unknown op"}
                except BaseException as e:  # noqa: BLE001 - one answer per request, always
                    ans = {"id": rid, "ok": False, "error": "infrastructure",
                           "error_excerpt": _truncate("".join(traceback.format_exception(
                               type(e), e, e.__traceback__)), keep="tail")}
                    if op == "evaluate":
                        ans.update({"compiled": False, "correct": False, "trials_passed": 0,
                                    "trials_total": 0, "trials": [], "hack_flags": [],
                                    "kernel_runtime": _zero_stats(),
                                    "reference_runtime": _zero_stats(),
                                    "compiled_reference_runtime": _zero_stats(),
                                    "sticky_cuda_error": False, "device": worker.device_name})
        try:
            text = json.dumps(ans, allow_nan=False, ensure_ascii=False)
        except (ValueError, TypeError):
            text = json.dumps(_sanitize(ans), allow_nan=False, ensure_ascii=False, default=str)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        outfile.write(text + "\n")
        outfile.flush()
        if exit_after:
            return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="kbrl evaluation worker "
                                             "(runtime/eval/worker_protocol.md)")
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--no-pch", action="store_true",
                    default=os.environ.get("KBRL_EVAL_NO_PCH", "") not in ("", "0"),
                    help="build C++ sources without the precompiled torch/extension.h "
                         "(also: KBRL_EVAL_NO_PCH=1)")
    args = ap.parse_args(argv)

    # Move the protocol pipes out of the candidate's way: close-on-exec (compilers and other
    # children do not inherit them) and off the well-known numbers 3 and 4.
    in_fd = os.dup(args.in_fd)
    out_fd = os.dup(args.out_fd)
    os.close(args.in_fd)
    os.close(args.out_fd)
    infile = os.fdopen(in_fd, "r", encoding="utf-8", errors="replace", newline="\n")
    outfile = os.fdopen(out_fd, "w", encoding="utf-8", errors="replace", newline="\n")

    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # parent gone: die, do not spin
    except (AttributeError, ValueError):
        pass
    worker = Worker(args)
    try:
        os.chdir(worker.scratch)
    except OSError:
        pass
    rc = serve(worker, infile, outfile)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    # skip interpreter teardown: candidates' atexit hooks and extension destructors are not ours
    os._exit(rc)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - fatal: the only thing the worker prints itself
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)
