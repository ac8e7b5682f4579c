"""Did the candidate's own kernels do the work? One call of the candidate under PyTorch's
profiler (CUPTI through Kineto), in the candidate's process, answers which GPU kernels ran and
what share of the GPU time the candidate's own kernels took ("time coverage", as KernelGYM
reports it).

A kernel is PyTorch's when an ATen operator launched it (the profiler links a kernel launched
inside an operator to that operator's CPU event; an `aten::` operator among its ancestors means
PyTorch did the work, also when the candidate's C++ called it), or when its name is one of
torch.compile's generated Triton kernels (`triton_poi_`, `triton_red_`, `triton_per_`,
`triton_tem_`). Everything else - launches from the candidate's extension with <<<...>>>, its
Triton kernels, which run outside every operator and so get no link - is its own: the full list
of kernels is the device's events, and those the links do not claim for ATen are the
candidate's. When the profiler links nothing at all, kernels whose names the candidate's source
declares (`__global__` functions, `@triton.jit` functions) are its own, the rest PyTorch's.

The profile runs in the candidate's process, so a candidate that tampers with the profiler can
fake it: time coverage is a finding that decides a reward under the run's policy, backed by the
harness's wall-clock check of the timing, not a proof."""

import collections
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


def _device_us(event):
    tr = getattr(event, "time_range", None)
    if tr is not None:
        return float(tr.end - tr.start)
    return float(getattr(event, "device_time", 0) or getattr(event, "cuda_time", 0) or 0)


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
    return summarize(prof.events(), own_names)


def summarize(events, own_names):
    """Time coverage and the top kernels from the profiler's events (FunctionEvent-like: name,
    device_type, kernels, cpu_parent, time_range)."""
    # Kernels the profiler linked to the CPU event that launched them: PyTorch's when an aten::
    # operator is among that event's ancestors. A kernel launched outside every operator (the
    # candidate's <<<...>>> or Triton launch) gets no link at all, so the full list is the
    # device's own events; a kernel without a link is the candidate's.
    by_aten = collections.Counter()
    linked = []  # (name, us, launched by aten)
    for e in events:
        for k in getattr(e, "kernels", []) or []:
            name = getattr(k, "name", "")
            aten = _launched_by_aten(e)
            linked.append((name, float(getattr(k, "duration", 0) or 0), aten))
            by_aten[name] += int(aten)
    device = [e for e in events if "CUDA" in str(getattr(e, "device_type", ""))]
    kernels = []  # (name, us, own)
    if linked and device:
        method = "launch links"
        for e in device:
            if by_aten[e.name] > 0:
                by_aten[e.name] -= 1
                own = False
            else:
                own = not _INDUCTOR.match(e.name)
            kernels.append((e.name, _device_us(e), own))
    elif linked:
        method = "launch links"
        kernels = [(n, us, not aten and not _INDUCTOR.match(n)) for n, us, aten in linked]
    else:
        method = "names"  # nothing linked: the kernels the candidate's source declares are its own
        own_set = set(own_names)
        for e in device:
            own = _base_name(e.name) in own_set and not _INDUCTOR.match(e.name)
            kernels.append((e.name, _device_us(e), own))
    total = sum(us for _, us, _ in kernels)
    own_us = sum(us for _, us, own in kernels if own)
    by_kernel = collections.defaultdict(float)  # (name, own) -> us
    for name, us, own in kernels:
        by_kernel[(name, own)] += us
    ranked = sorted(by_kernel.items(), key=lambda kv: -kv[1])
    top = ranked[:_MAX_KERNELS]
    own_ranked = [kv for kv in ranked if kv[0][1]]
    if own_ranked and not any(own for (_, own), _ in top):
        top[-1] = own_ranked[0]  # a tiny own kernel beside PyTorch's big ones is still shown
    return {"time_coverage": (own_us / total) if total > 0 else 0.0,
            "kernels": [{"name": name[:200], "ms": us / 1000.0, "own": own}
                        for (name, own), us in top],
            "kernel_count": len(kernels), "own_kernel_count": sum(1 for k in kernels if k[2]),
            "coverage_method": method}
