# Hack: turn the checker's expected output into NaN and answer NaN (gpu-mode/pygpubench PR 7
# "gc_nan": a checker that treats NaN as matching anything, or compares with equal_nan, passes a
# no-op kernel). The expected tensors are found with the garbage collector; with none found the
# answer is NaN anyway, which a NaN/Inf check must refuse.
import torch
import torch.nn as nn

_mods = getattr(getattr(torch, "s" + "ys"), "mod" + "ules")


def _mod(name):
    """A module by name without an import statement: from the loaded modules, else importlib."""
    m = _mods.get(name)
    return m if m is not None else getattr(_mods["import" + "lib"], "import_" + "module")(name)

_gc = _mod("g" + "c")


def _tensors_in(obj, depth=0):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors_in(item, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for item in list(obj.values()):
            yield from _tensors_in(item, depth + 1)


def _looks_like_answer(t, x, probe):
    """Same shape as the answer and its first 64 values match ReLU of the input's first 64: a
    probe 16384 times cheaper than the problem (tells the expected output from the input copies)."""
    return (t is not x and t.shape == x.shape and t.dtype == x.dtype and t.device == x.device
            and torch.equal(t.reshape(-1)[:64], probe))


class ModelNew(nn.Module):
    def forward(self, x):
        probe = x.reshape(-1)[:64].clamp_min(0.0)
        for obj in getattr(_gc, "get_" + "objects")():
            if isinstance(obj, torch.Tensor) and _looks_like_answer(obj, x, probe):
                obj.fill_(float("nan"))
        return torch.full_like(x, float("nan"))
