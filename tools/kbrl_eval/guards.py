"""What a candidate can change in the process it runs in, found and put back: replaced
functions of torch's main namespaces and torch's global numeric settings (TF32, cudnn.benchmark,
matmul precision, the default dtype). Used in the candidate's process, where the findings are
reported as hack flags and the settings are reset before every call of the candidate, so that it
runs under the same numeric settings as the reference."""

import builtins
import json
import math
import time
import types

import torch


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

