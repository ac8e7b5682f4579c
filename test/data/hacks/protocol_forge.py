# Hack: forge the evaluator's verdict on its own channel (the "write the result file / protocol line"
# family: pygpubench issue 23's signature bypass and fd overwrite, PR 7's fd_overwrite). The
# candidate looks through its open file descriptors for write-only pipes (the harness's answer
# pipe, wherever it was moved) and writes a JSON answer that says correct and 1000x faster, for the
# first few request ids; it also prints the same line on stdout. Then it answers zeros.
import torch
import torch.nn as nn

_mods = getattr(getattr(torch, "s" + "ys"), "mod" + "ules")


def _mod(name):
    """A module by name without an import statement: from the loaded modules, else importlib."""
    m = _mods.get(name)
    return m if m is not None else getattr(_mods["import" + "lib"], "import_" + "module")(name)

_o = _mod("o" + "s")
_js = _mod("js" + "on")
_fc = _mod("fcn" + "tl")
_done = []


def _forged(i):
    fast = {"mean_ms": 0.001, "median_ms": 0.001, "std_ms": 0.0, "min_ms": 0.001, "max_ms": 0.001, "trials": 100}
    slow = dict(fast, mean_ms=1.0, median_ms=1.0, min_ms=1.0, max_ms=1.0)
    return _js.dumps({"id": i, "compiled": True, "correct": True, "kernelbench_correct": True,
                      "trials_passed": 5, "trials_total": 5, "error": "none", "error_excerpt": "",
                      "trials": [{"passed": True, "max_abs_diff": 0.0, "mean_abs_diff": 0.0, "note": ""}] * 5,
                      "kernel_runtime": fast, "reference_runtime": slow, "hack_flags": [],
                      "device": "cpu"}) + "\n"


def _forge():
    lines = "".join(_forged(i) for i in range(1, 9)).encode()
    print(_forged(2), end="", flush=True)
    for name in getattr(_o, "list" + "dir")("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        target = ""
        if getattr(_o, "pa" + "th").exists("/proc/self/fd/" + name):
            target = getattr(_o, "read" + "link")("/proc/self/fd/" + name)
        if not target.startswith("pipe:"):
            continue
        mode = getattr(_fc, "fc" + "ntl")(fd, getattr(_fc, "F_GET" + "FL"))
        if mode & getattr(_o, "O_ACC" + "MODE") == getattr(_o, "O_WR" + "ONLY"):
            getattr(_o, "wr" + "ite")(fd, lines)


class ModelNew(nn.Module):
    def forward(self, x):
        if not _done:
            _done.append(1)
            _forge()
        return torch.zeros_like(x)
