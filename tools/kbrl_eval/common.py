"""Small pieces every process of the evaluation worker uses: limits, error kinds, numbers that
JSON can carry, timing statistics and error excerpts a person (or a policy) can read."""

import math
import os
import re
import time
import traceback

EXCERPT_LIMIT = 4000
L2_FLUSH_MIN_BYTES = 256 * 1024 * 1024
TIMING_INPUT_SETS = 3
COMPARE_CHUNK = 1 << 26  # elements compared at a time (256 MiB of float32 differences)
DISCARD_FIRST = 1  # KernelBench discards the first timed trial
HACK_FLAG_ORDER = ("inputs_modified", "output_aliases_input", "non_tensor_output", "cached_output",
                   "degenerate_output", "nonfinite_output", "nondeterministic_output",
                   "timing_inconsistent", "own_kernels_idle", "low_time_coverage",
                   "protocol_violation", "leftover_processes", "memory_limit", "monkeypatch",
                   "torch_flags_changed")
DEFAULT_MEMORY_LIMIT_MB = 16384  # resident memory of a candidate's process and its children


def memory_limit_bytes(req):
    """A request's memory_limit_mb (eval.memory_limit_gb x 1024) in bytes."""
    return int(float(req.get("memory_limit_mb", DEFAULT_MEMORY_LIMIT_MB)) * 2 ** 20)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

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


def now():
    return time.perf_counter()


def finite(x):
    """JSON has no NaN or infinity: they are written as +-1e308 (see the protocol)."""
    x = float(x)
    if math.isnan(x):
        return 1e308
    if math.isinf(x):
        return 1e308 if x > 0 else -1e308
    return x


def sanitize(obj):
    if isinstance(obj, float):
        return finite(obj)
    if isinstance(obj, dict):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    return obj


def truncate(text, limit=EXCERPT_LIMIT, keep="head"):
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


def rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def stats(times_ms):
    n = len(times_ms)
    if n == 0:
        return zero_stats()
    s = sorted(times_ms)
    mean = sum(s) / n
    var = sum((t - mean) ** 2 for t in s) / n  # population std, like numpy.std in KernelBench
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    return {"mean_ms": mean, "median_ms": median, "std_ms": math.sqrt(var), "min_ms": s[0],
            "max_ms": s[-1], "trials": n}


def zero_stats():
    return {"mean_ms": 0.0, "median_ms": 0.0, "std_ms": 0.0, "min_ms": 0.0, "max_ms": 0.0,
            "trials": 0}



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
    return truncate("\n".join(out), keep="head")


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
        if last.filename not in own_files and not os.path.abspath(last.filename).startswith(_PACKAGE_DIR):
            keep.append(last)
    try:
        msg = "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")
    except Exception:  # a hostile __str__
        msg = type(exc).__name__
    if _looks_like_build_log(msg):
        msg = clean_build_log(msg, replacements)
    else:
        msg = truncate(msg, 2500, keep="middle")
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
    return truncate(text, keep="head" if _looks_like_build_log(msg) else "middle")


# ---------------------------------------------------------------------------------------------