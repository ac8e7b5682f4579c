"""Running a program's source as a module, and seeding every generator a program may draw
from: what the harness does with the reference and the candidate's process with the candidate."""

import builtins
import random
import sys
import types

import torch


def exec_module(source, path, name):
    """Writes source to path and runs it as module `name`, registered in sys.modules
    (dataclasses, pickling and Triton look modules up there). Exceptions propagate."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__builtins__ = builtins
    sys.modules[name] = mod
    exec(compile(source, path, "exec", dont_inherit=True), mod.__dict__)
    return mod


def seed_everything(seed, cuda):
    """torch (and its CUDA generator), random and numpy, as KernelBench seeds them."""
    torch.manual_seed(seed)
    if cuda:
        torch.cuda.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed % (2 ** 32))
    except Exception:  # noqa: BLE001 - numpy is optional
        pass
