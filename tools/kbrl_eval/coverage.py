"""Did the candidate's own kernels do the work? One call of the candidate under PyTorch's
profiler (CUPTI through Kineto), in the candidate's process, answers which GPU kernels ran and
what share of the GPU time the candidate's own kernels took ("time coverage", as KernelGYM
reports it).

A kernel is PyTorch's when an ATen operator launched it (the profiler links each kernel to the
CPU event that launched it; an `aten::` operator among that event's ancestors means PyTorch did
the work, also when the candidate's C++ called it), or when its name is one of torch.compile's
generated Triton kernels (`triton_poi_`, `triton_red_`, `triton_per_`, `triton_tem_`). Everything
else - launches from the candidate's extension with <<<...>>>, its Triton kernels - is its own.
When the profiler gives no launch links, kernels whose names the candidate's source declares
(`__global__` functions, `@triton.jit` functions) are its own, the rest PyTorch's.

The profile runs in the candidate's process, so a candidate that tampers with the profiler can
fake it: time coverage is a finding that decides a reward under the run's policy, backed by the
harness's wall-clock check of the timing, not a proof."""

import re

_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_")
_MAX_KERNELS = 8


def own_kernel_names(source):
    """Kernel names a candidate's source declares: CUDA/HIP __global__ functions and Triton
    @triton.jit functions (also through an alias such as `@tl_jit` is not followed)."""
    names = set(re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                           r"(?:static\s+|inline\s+)*[\w:<>]+\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                           r"(\w+)\s*\(", source))
    names |= set(re.findall(r"@(?:triton\.)?jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)", source))
    names |= set(re.findall(r"@triton\.autotune[\s\S]{0,2000}?def\s+(\w+)", source))
    return sorted(names)


def _base_name(kernel):
    """'void ns::k<float>(float const*, ...)' -> 'k'."""
    head = kernel.split("(", 1)[0]
    depth, out = 0, []
    for ch in head:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    head = "".join(out).strip().split()[-1] if "".join(out).strip() else kernel
    return head.split("::")[-1]


def _launched_by_aten(event):
    seen = 0
    while event is not None and seen < 64:
        if event.name.startswith("aten::"):
            return True
        event = getattr(event, "cpu_parent", None)
        seen += 1
    return False


def warm_up():
    """Profiles one tiny kernel so that the profiler's set-up is done before a candidate's
    profile is taken."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    x = torch.ones(16, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (x + 1).sum()
        torch.cuda.synchronize()
    prof.events()


def profile_call(fn, files, own_names):
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    del out
    events = prof.events()
    kernels = []  # (name, us, own)
    method = "launch links"
    for e in events:
        for k in getattr(e, "kernels", []) or []:
            name = getattr(k, "name", "")
            us = float(getattr(k, "duration", 0) or 0)
            own = not _launched_by_aten(e) and not _INDUCTOR.match(name)
            kernels.append((name, us, own))
    if not kernels:
        method = "names"
        own_set = set(own_names)
        for e in events:
            dt = str(getattr(e, "device_type", ""))
            if "CUDA" not in dt:
                continue
            name = e.name
            us = float(getattr(e, "device_time", None) or getattr(e, "cuda_time", 0) or
                       getattr(e, "time_range", None).elapsed_us())
            own = _base_name(name) in own_set and not _INDUCTOR.match(name)
            kernels.append((name, us, own))
    total = sum(us for _, us, _ in kernels)
    own_us = sum(us for _, us, own in kernels if own)
    by_name = {}
    for name, us, own in kernels:
        entry = by_name.setdefault(name, [0.0, own])
        entry[0] += us
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])
    top = ranked[:_MAX_KERNELS]
    own_ranked = [kv for kv in ranked if kv[1][1]]
    if own_ranked and not any(v[1] for _, v in top):
        top[-1] = own_ranked[0]  # a tiny own kernel beside PyTorch's big ones is still shown
    return {"time_coverage": (own_us / total) if total > 0 else 0.0,
            "kernels": [{"name": n[:200], "ms": v[0] / 1000.0, "own": v[1]} for n, v in top],
            "kernel_count": len(kernels), "own_kernel_count": sum(1 for k in kernels if k[2]),
            "coverage_method": method}
