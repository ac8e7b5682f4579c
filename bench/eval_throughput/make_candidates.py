#!/usr/bin/env python3
"""Writes the fixed candidate set of the evaluator-throughput benchmark.

    make_candidates.py --kernelbench DIR --out DIR [--count 64] [--seed 0]
    make_candidates.py --cpu-smoke --out DIR [--kernelbench DIR] [--count 8] [--seed 0]

Each candidate is a KernelBench-style program: `ModelNew` plus a module-level
`torch.utils.cpp_extension.load_inline` call that builds a real `__global__` CUDA kernel (with
--cpu-smoke: C++ CPU code, cpp_sources only), and whose forward calls it. Level-1 candidates
replace an element-wise activation by one kernel; level-2 candidates keep the GEMM/conv in
PyTorch (the same layers, built in the same order as the reference's Model, so the seeded
initialisation gives the same weights) and fuse the element-wise tail into one kernel.

The mix (deterministic for a seed): about 50 % correct, 15 % wrong (a wrong constant, a wrong
slope or activation, an off-by-one index bound that leaves the last element unwritten), 10 %
compile errors (a CUDA syntax/type error that nvcc rejects) and 25 % byte-exact duplicates of
earlier candidates of the same problem (in a GRPO group many samples are identical).
Candidates are ordered in groups by problem, like a GRPO batch. Every unique candidate has its
own load_inline `name=`; a duplicate has the same bytes (and so the same name) as its original.

DIR/manifest.json is a list of
  {"id": "c001", "problem": "level1/19_ReLU.py", "candidate": "c001.py",
   "kind": "correct" | "wrong" | "compile_error", "duplicate_of": "c003" | null,
   "backend": "cuda" | "cpu", "precision": "fp32", "detail": "..."}
("kind" of a duplicate is its original's; "detail" says which variant it is).
"""

import argparse
import ast
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import problem_specs  # noqa: E402

THREADS = (128, 256, 512, 1024)
CE_KINDS = ("missing_semicolon", "undeclared_identifier", "bad_member", "const_output",
            "extra_launch_arg", "missing_brace")
CPU_CE_KINDS = ("missing_semicolon", "undeclared_identifier")


# ---------------------------------------------------------------------------------------------
# problem files


def resolve_problem(kb_dir, rel):
    """DIR/levelN/x.py, or DIR/KernelBench/levelN/x.py (a KernelBench checkout)."""
    for cand in (os.path.join(kb_dir, rel), os.path.join(kb_dir, "KernelBench", rel)):
        if os.path.isfile(cand):
            return cand
    return None


def module_constants(path):
    """Module-level NAME = literal assignments of a problem file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = value
    return out


def check_problems(kb_dir, specs):
    """Every problem file exists and its constants are the ones the baked variants use."""
    bad = []
    for s in specs:
        path = resolve_problem(kb_dir, s["path"])
        if path is None:
            bad.append("%s: not found under %s" % (s["path"], kb_dir))
            continue
        consts = module_constants(path)
        for cname, _, literal, const in s["params"]:
            if const is None:
                continue
            if const not in consts:
                bad.append("%s: no module constant %s" % (s["path"], const))
            elif float(consts[const]) != float(literal):
                bad.append("%s: %s = %r, the spec bakes %r" % (s["path"], const, consts[const],
                                                               literal))
    if bad:
        raise SystemExit("make_candidates: problem files do not match the specs:\n  " +
                         "\n  ".join(bad))


# ---------------------------------------------------------------------------------------------
# rendering


def c_float(x):
    r = repr(float(x))
    if "e" not in r and "." not in r:
        r += ".0"
    return r + "f"


class Names:
    def __init__(self, spec):
        self.slug = spec["slug"]
        self.op = "%s_op" % self.slug
        self.kernel = "%s_kernel" % self.slug
        self.fn = "%s_forward" % self.slug
        self.ext = "%s_ext" % self.slug


def _params_in_op(spec, v):
    if v["param_mode"] == "baked":
        return []
    return [p[0] for p in spec["params"]]


def _op_function(spec, v, qualifier):
    args = ["float v"]
    if spec["bias"]:
        args.append("float b")
    args += ["float %s" % n for n in _params_in_op(spec, v)]
    lines = ["%s float %s(%s) {" % (qualifier, Names(spec).op, ", ".join(args))]
    if v["param_mode"] == "baked":
        for cname, _, literal, _ in spec["params"]:
            lines.append("    const float %s = %s;" % (cname, c_float(literal)))
    lines.append("    " + v["body"])
    lines.append("}")
    return lines


def _op_call(spec, v, xexpr, index):
    args = [xexpr]
    if spec["bias"]:
        args.append("b[((%s) / inner) %% channels]" % index)
    args += _params_in_op(spec, v)
    return "%s(%s)" % (Names(spec).op, ", ".join(args))


def _kernel_params(spec, v, inplace=False):
    ps = ["float* __restrict__ y"] if inplace else \
        ["const float* __restrict__ x", "float* __restrict__ y"]
    if spec["bias"]:
        ps += ["const float* __restrict__ b", "int64_t inner", "int64_t channels"]
    ps.append("int64_t n")
    ps += ["float %s" % n for n in _params_in_op(spec, v)]
    return ", ".join(ps)


def _launch_args(spec, v, inplace=False):
    a = ["yp"] if inplace else ["xp", "yp"]
    if spec["bias"]:
        a += ["bc.data_ptr<float>()", "inner", "channels"]
    a.append("n")
    a += ["static_cast<float>(%s)" % n for n in _params_in_op(spec, v)]
    return ", ".join(a)


def _host_signature(spec, v):
    args = ["torch::Tensor x"]
    if spec["bias"]:
        args.append("torch::Tensor bias")
    args += ["double %s" % n for n in _params_in_op(spec, v)]
    return "torch::Tensor %s(%s)" % (Names(spec).fn, ", ".join(args))


def render_cuda_source(spec, v):
    """The cuda_sources string of a GPU candidate (variant v)."""
    nm = Names(spec)
    t = v["template"]
    L = ["#include <torch/extension.h>", "#include <cuda_runtime.h>"]
    if v["stream"]:
        L.append("#include <ATen/cuda/CUDAContext.h>")
    if t in ("gridstride", "vec4"):
        L.append("#include <algorithm>")
    if t == "vec4":
        L.append("#include <cstdint>")
    L.append("")
    L += _op_function(spec, v, "__device__ __forceinline__")
    L.append("")
    guard = v.get("guard", "i < n")
    if t in ("plain", "vec4"):
        L.append("__global__ void %s(%s) {" % (nm.kernel, _kernel_params(spec, v)))
        L.append("    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;")
        L.append("    if (%s) {" % guard)
        L.append("        y[i] = %s;" % _op_call(spec, v, "x[i]", "i"))
        L.append("    }")
        L.append("}")
    elif t == "gridstride":
        L.append("__global__ void %s(%s) {" % (nm.kernel, _kernel_params(spec, v)))
        L.append("    const int64_t stride = (int64_t)blockDim.x * gridDim.x;")
        L.append("    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                 "i += stride) {")
        L.append("        y[i] = %s;" % _op_call(spec, v, "x[i]", "i"))
        L.append("    }")
        L.append("}")
    elif t == "inplace":
        L.append("__global__ void %s(%s) {" % (nm.kernel, _kernel_params(spec, v, inplace=True)))
        L.append("    const int64_t stride = (int64_t)blockDim.x * gridDim.x;")
        L.append("    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                 "i += stride) {")
        L.append("        y[i] = %s;" % _op_call(spec, v, "y[i]", "i"))
        L.append("    }")
        L.append("}")
    if t == "vec4":
        L.append("")
        L.append("__global__ void %s_vec4(%s) {" % (nm.kernel, _kernel_params(spec, v)))
        L.append("    const int64_t n4 = n / 4;")
        L.append("    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;")
        L.append("    if (i < n4) {")
        L.append("        const float4 a = reinterpret_cast<const float4*>(x)[i];")
        L.append("        const int64_t e = i * 4;")
        L.append("        float4 r;")
        for k, comp in enumerate("xyzw"):
            L.append("        r.%s = %s;" % (comp, _op_call(spec, v, "a." + comp,
                                                          "e + %d" % k if k else "e")))
        L.append("        reinterpret_cast<float4*>(y)[i] = r;")
        L.append("    }")
        L.append("    if (i == 0) {")
        L.append("        for (int64_t j = n4 * 4; j < n; ++j) {")
        L.append("            y[j] = %s;" % _op_call(spec, v, "x[j]", "j"))
        L.append("        }")
        L.append("    }")
        L.append("}")
    L.append("")
    # host
    launch_cfg = "0, at::cuda::getCurrentCUDAStream()" if v["stream"] else None

    def launch(kernel, blocks, inplace=False):
        cfg = "(unsigned int)%s, threads" % blocks
        if launch_cfg:
            cfg += ", " + launch_cfg
        return "%s<<<%s>>>(%s);" % (kernel, cfg, _launch_args(spec, v, inplace))

    L.append(_host_signature(spec, v) + " {")
    L.append("    TORCH_CHECK(x.is_cuda(), \"%s: x must be a CUDA tensor\");" % nm.fn)
    L.append("    TORCH_CHECK(x.scalar_type() == torch::kFloat32, \"%s: x must be float32\");"
             % nm.fn)
    if t == "inplace":
        L.append("    TORCH_CHECK(x.is_contiguous(), \"%s: x must be contiguous\");" % nm.fn)
        L.append("    float* yp = x.data_ptr<float>();")
    else:
        L.append("    auto xc = x.contiguous();")
        L.append("    auto y = torch::empty_like(xc);")
        L.append("    const float* xp = xc.data_ptr<float>();")
        L.append("    float* yp = y.data_ptr<float>();")
    L.append("    const int64_t n = x.numel();")
    if spec["bias"]:
        L.append("    auto bc = bias.contiguous();")
        L.append("    const int64_t channels = bc.numel();")
        L.append("    const int64_t inner = n / (x.size(0) * channels);")
    L.append("    if (n == 0) {")
    L.append("        return %s;" % ("x" if t == "inplace" else "y"))
    L.append("    }")
    L.append("    const int threads = %d;" % v["threads"])
    if t == "plain":
        L.append("    const int64_t blocks = (n + threads - 1) / threads;")
        L.append("    " + launch(nm.kernel, "blocks"))
    elif t in ("gridstride", "inplace"):
        L.append("    const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, %d);"
                 % v["max_blocks"])
        L.append("    " + launch(nm.kernel, "blocks", inplace=(t == "inplace")))
    elif t == "vec4":
        L.append("    const bool aligned = reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&")
        L.append("                         reinterpret_cast<uintptr_t>(yp) % 16 == 0;")
        L.append("    if (aligned) {")
        L.append("        const int64_t blocks = std::max<int64_t>(1, (n / 4 + threads - 1) / "
                 "threads);")
        L.append("        " + launch(nm.kernel + "_vec4", "blocks"))
        L.append("    } else {")
        L.append("        const int64_t blocks = (n + threads - 1) / threads;")
        L.append("        " + launch(nm.kernel, "blocks"))
        L.append("    }")
    L.append("    const cudaError_t err = cudaGetLastError();")
    L.append("    TORCH_CHECK(err == cudaSuccess, \"%s: kernel launch failed: \", "
             "cudaGetErrorString(err));" % nm.fn)
    L.append("    return %s;" % ("x" if t == "inplace" else "y"))
    L.append("}")
    src = "\n".join(L) + "\n"
    if v.get("mutation"):
        src = mutate(src, v["mutation"], nm)
    return src


def render_cpu_source(spec, v):
    """The cpp_sources string of a CPU smoke candidate."""
    nm = Names(spec)
    t = v["template"]
    L = ["#include <torch/extension.h>", "#include <algorithm>", "#include <cmath>"]
    if t == "parallel":
        L.append("#include <ATen/Parallel.h>")
    L.append("")
    L += _op_function(spec, v, "static inline")
    L.append("")
    L.append(_host_signature(spec, v) + " {")
    L.append("    TORCH_CHECK(!x.is_cuda(), \"%s: x must be a CPU tensor\");" % nm.fn)
    L.append("    TORCH_CHECK(x.scalar_type() == torch::kFloat32, \"%s: x must be float32\");"
             % nm.fn)
    L.append("    auto xc = x.contiguous();")
    L.append("    auto y = torch::empty_like(xc);")
    L.append("    const float* x_ = xc.data_ptr<float>();")
    L.append("    float* y_ = y.data_ptr<float>();")
    L.append("    const int64_t n = xc.numel();")
    if spec["bias"]:
        L.append("    auto bc = bias.contiguous();")
        L.append("    const float* b = bc.data_ptr<float>();")
        L.append("    const int64_t channels = bc.numel();")
        L.append("    const int64_t inner = n / (xc.size(0) * channels);")
    pnames = _params_in_op(spec, v)
    for p in pnames:
        L.append("    const float %s_f = static_cast<float>(%s);" % (p, p))

    def call(idx):
        args = ["x_[%s]" % idx]
        if spec["bias"]:
            args.append("b[((%s) / inner) %% channels]" % idx)
        args += ["%s_f" % p for p in pnames]
        return "%s(%s)" % (nm.op, ", ".join(args))

    guard = v.get("guard", "i < n")
    if t == "loop":
        L.append("    for (int64_t i = 0; %s; ++i) {" % guard)
        L.append("        y_[i] = %s;" % call("i"))
        L.append("    }")
    elif t == "parallel":
        L.append("    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {")
        L.append("        for (int64_t i = begin; i < end && %s; ++i) {" % guard)
        L.append("            y_[i] = %s;" % call("i"))
        L.append("        }")
        L.append("    });")
    L.append("    return y;")
    L.append("}")
    src = "\n".join(L) + "\n"
    if v.get("mutation"):
        src = mutate(src, v["mutation"], nm)
    return src


def _replace_once(src, old, new, what):
    if src.count(old) < 1:
        raise AssertionError("mutation %s: %r not found" % (what, old))
    return src.replace(old, new, 1)


def mutate(src, kind, nm):
    """A compile error, always inside the sources the compiler sees (nvcc for CUDA)."""
    if kind == "missing_semicolon":
        lines = src.split("\n")
        for k, line in enumerate(lines):
            s = line.strip()
            if (s.startswith("y[i] = ") or s.startswith("y_[i] = ")) and s.endswith(";"):
                lines[k] = line.rstrip()[:-1]
                return "\n".join(lines)
        raise AssertionError("mutation missing_semicolon: no assignment found")
    if kind == "undeclared_identifier":
        if "    if (i < n) {" in src:
            return _replace_once(src, "    if (i < n) {", "    if (idx < n) {", kind)
        return _replace_once(src, "i < n; ++i", "idx < n; ++i", kind)
    if kind == "bad_member":
        return _replace_once(src, "+ threadIdx.x;", "+ threadIdx.xx;", kind)
    if kind == "const_output":
        return _replace_once(src, "const float* __restrict__ x, float* __restrict__ y",
                             "const float* __restrict__ x, const float* __restrict__ y", kind)
    if kind == "extra_launch_arg":
        k = src.index("%s<<<" % nm.kernel)
        end = src.index(");", k)
        return src[:end] + ", 0.5f" + src[end:]
    if kind == "missing_brace":
        k = src.index(nm.op + "(")
        end = src.index("\n}\n", k)
        return src[:end] + "\n" + src[end + 3:]
    raise ValueError(kind)


def render_program(spec, v, ext_name, device):
    """The whole candidate program."""
    nm = Names(spec)
    cuda = device == "cuda"
    src = render_cuda_source(spec, v) if cuda else render_cpu_source(spec, v)
    decl = _host_signature(spec, v) + ";"
    P = ["import torch", "import torch.nn as nn", "from torch.utils.cpp_extension import load_inline",
         "", ""]
    if cuda:
        P.append('%s_cuda_source = r"""' % spec["slug"])
        P.append(src.rstrip("\n"))
        P.append('"""')
        P.append("")
        P.append('%s_cpp_source = "%s"' % (spec["slug"], decl))
        P.append("")
        cuda_flags = ['"-O3"']
        if v["fast_math"]:
            cuda_flags.append('"--use_fast_math"')
        P.append("%s = load_inline(" % nm.ext)
        P.append('    name="%s",' % ext_name)
        P.append("    cpp_sources=%s_cpp_source," % spec["slug"])
        P.append("    cuda_sources=%s_cuda_source," % spec["slug"])
        P.append('    functions=["%s"],' % nm.fn)
        P.append("    verbose=False,")
        P.append('    extra_cflags=["-O3"],')
        P.append("    extra_cuda_cflags=[%s]," % ", ".join(cuda_flags))
        P.append(")")
    else:
        P.append('%s_cpp_source = r"""' % spec["slug"])
        P.append(src.rstrip("\n"))
        P.append('"""')
        P.append("")
        P.append("%s = load_inline(" % nm.ext)
        P.append('    name="%s",' % ext_name)
        P.append("    cpp_sources=%s_cpp_source," % spec["slug"])
        P.append('    functions=["%s"],' % nm.fn)
        P.append("    verbose=False,")
        P.append('    extra_cflags=["-O2"],')
        P.append(")")
    P.append("")
    P.append("")
    P.append("class ModelNew(nn.Module):")
    sig = "self" + (", " + spec["init_sig"] if spec["init_sig"] else "")
    P.append("    def __init__(%s):" % sig)
    P.append("        super(ModelNew, self).__init__()")
    for line in spec["init_lines"]:
        P.append("        " + line)
    P.append("")
    P.append("    def forward(self, %s):" % spec["fwd_sig"])
    call_args = [spec["inp"]]
    if spec["heavy"]:
        P.append("        %s = %s" % (spec["inp"], spec["heavy"]))
    if spec["bias"]:
        call_args.append(spec["bias"])
    if v["param_mode"] != "baked":
        call_args += [p[1] for p in spec["params"]]
    P.append("        return %s.%s(%s)" % (nm.ext, nm.fn, ", ".join(call_args)))
    return "\n".join(P) + "\n"


# ---------------------------------------------------------------------------------------------
# choosing the mix


def _variant_key(v):
    return tuple(sorted((k, str(val)) for k, val in v.items()))


def random_variant(spec, rng, device, body):
    can_bake = bool(spec["params"]) and all(p[2] is not None for p in spec["params"])
    v = {"body": body, "param_mode": rng.choice(["args", "baked"]) if can_bake else "args"}
    if device == "cuda":
        templates = ["plain", "gridstride", "vec4"]
        if spec["heavy"]:
            templates.append("inplace")  # writes into the GEMM/conv output (never the input)
        v["template"] = rng.choice(templates)
        v["threads"] = rng.choice(THREADS)
        v["max_blocks"] = rng.choice([4096, 8192, 65535]) if v["template"] in (
            "gridstride", "inplace") else 0
        v["stream"] = rng.random() < 0.4
        v["fast_math"] = (not spec["transcendental"]) and rng.random() < 0.3
    else:
        v["template"] = rng.choice(["loop", "parallel"])
    return v


def unique_variant(spec, rng, device, used, make):
    for _ in range(1000):
        v = make()
        key = (spec["slug"], _variant_key(v))
        if key not in used:
            used.add(key)
            return v
    raise RuntimeError("no fresh variant for %s" % spec["slug"])


def plan(specs, count, seed, device):
    rng = random.Random(seed)
    n_dup = int(round(count * 0.25))
    n_ce = int(round(count * 0.10))
    n_wrong = int(round(count * 0.15))
    n_correct = count - n_dup - n_ce - n_wrong
    if n_correct < 1:
        raise SystemExit("--count %d is too small for the mix" % count)
    used = set()
    uniques = []  # dicts: spec, kind, variant, detail

    order = list(specs)
    rng.shuffle(order)
    for k in range(n_correct):
        spec = order[k % len(order)]
        # bodies in turn, so that a problem's second correct sample differs in its math too
        nth = sum(1 for u in uniques if u["spec"] is spec)
        body = spec["bodies"][nth % len(spec["bodies"])]
        v = unique_variant(spec, rng, device, used,
                           lambda: random_variant(spec, rng, device, body))
        uniques.append({"spec": spec, "kind": "correct", "variant": v,
                        "detail": describe(spec, v, device)})

    wrong_opts = []
    for spec in specs:
        for desc, body in spec["wrong"]:
            wrong_opts.append((spec, "math", desc, body))
        if spec["offbyone"]:
            wrong_opts.append((spec, "offbyone", "off-by-one bound (i < n - 1): the last "
                               "element is never written", spec["bodies"][0]))
    rng.shuffle(wrong_opts)
    # problems that also have a correct sample first (a group with right and wrong answers)
    wrong_opts.sort(key=lambda o: 0 if any(u["spec"] is o[0] for u in uniques) else 1)
    taken_specs = set()
    picks = []
    for o in wrong_opts:  # at most one wrong sample per problem while there are enough
        if len(picks) < n_wrong and o[0]["slug"] not in taken_specs:
            picks.append(o)
            taken_specs.add(o[0]["slug"])
    k = 0
    while len(picks) < n_wrong:
        picks.append(wrong_opts[k % len(wrong_opts)])
        k += 1
    for spec, how, desc, body in picks:
        def make(spec=spec, how=how, body=body):
            v = random_variant(spec, rng, device, body)
            if how == "offbyone":
                v["template"] = "plain" if device == "cuda" else "loop"
                v["max_blocks"] = 0
                v["guard"] = "i < n - 1"
            return v
        v = unique_variant(spec, rng, device, used, make)
        uniques.append({"spec": spec, "kind": "wrong", "variant": v,
                        "detail": "wrong: %s; %s" % (desc, describe(spec, v, device))})

    ce_kinds = list(CE_KINDS if device == "cuda" else CPU_CE_KINDS)
    rng.shuffle(ce_kinds)
    for k in range(n_ce):
        spec = rng.choice(specs)
        mut = ce_kinds[k % len(ce_kinds)]

        def make(spec=spec, mut=mut):
            v = random_variant(spec, rng, device, rng.choice(spec["bodies"]))
            v["template"] = "plain" if device == "cuda" else "loop"
            v["max_blocks"] = 0
            v["mutation"] = mut
            return v
        v = unique_variant(spec, rng, device, used, make)
        uniques.append({"spec": spec, "kind": "compile_error", "variant": v,
                        "detail": "compile error: %s; %s" % (mut, describe(spec, v, device))})

    # duplicates: mostly of correct samples (a converged policy repeats its answer)
    weights = [{"correct": 6, "wrong": 2, "compile_error": 2}[u["kind"]] for u in uniques]
    dup_of = [rng.choices(range(len(uniques)), weights=weights)[0] for _ in range(n_dup)]

    # groups by problem, in a shuffled problem order; duplicates after their original
    slugs = []
    for u in uniques:
        if u["spec"]["slug"] not in slugs:
            slugs.append(u["spec"]["slug"])
    rng.shuffle(slugs)
    entries = []
    for slug in slugs:
        group = [i for i, u in enumerate(uniques) if u["spec"]["slug"] == slug]
        rng.shuffle(group)
        seq = [("u", i) for i in group]
        for j, orig in enumerate(dup_of):
            if uniques[orig]["spec"]["slug"] != slug:
                continue
            pos = [p for p, e in enumerate(seq) if e == ("u", orig)][0]
            seq.insert(rng.randint(pos + 1, len(seq)), ("d", orig))
        entries += seq
    return uniques, entries


def describe(spec, v, device):
    parts = [v["template"]]
    if device == "cuda":
        parts.append("%d threads" % v["threads"])
        if v.get("max_blocks"):
            parts.append("<= %d blocks" % v["max_blocks"])
        if v["stream"]:
            parts.append("current stream")
        if v["fast_math"]:
            parts.append("--use_fast_math")
    if spec["params"]:
        parts.append("params " + ("baked in" if v["param_mode"] == "baked" else "as arguments"))
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", help="KernelBench problems (levelN/<id>_<Name>.py); with "
                    "--cpu-smoke defaults to bench/eval_throughput/smoke_problems")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=None, help="candidates (64; 8 with --cpu-smoke)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny CPU problems, C++ (cpp_sources only) extensions")
    args = ap.parse_args(argv)

    if args.cpu_smoke:
        specs = problem_specs.SMOKE
        device = "cpu"
        kb = args.kernelbench or os.path.join(HERE, "smoke_problems")
        count = args.count or 8
    else:
        if not args.kernelbench:
            ap.error("--kernelbench is required (unless --cpu-smoke)")
        specs = problem_specs.GPU_PROBLEMS
        device = "cuda"
        kb = args.kernelbench
        count = args.count or 64
    check_problems(kb, specs)

    uniques, entries = plan(specs, count, args.seed, device)
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    first_id = {}   # unique index -> its id
    text_of = {}    # unique index -> program text
    for n, (what, ui) in enumerate(entries, 1):
        cid = "c%03d" % n
        u = uniques[ui]
        if what == "u":
            ext_name = "kb_%s_%s" % (cid, u["spec"]["slug"])
            text = render_program(u["spec"], u["variant"], ext_name, device)
            first_id[ui] = cid
            text_of[ui] = text
            dup = None
        else:
            text = text_of[ui]
            dup = first_id[ui]
        fname = cid + ".py"
        with open(os.path.join(args.out, fname), "w", encoding="utf-8") as f:
            f.write(text)
        manifest.append({"id": cid, "problem": u["spec"]["path"], "candidate": fname,
                         "kind": u["kind"], "duplicate_of": dup, "backend": device,
                         "precision": "fp32", "detail": u["detail"]})
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    kinds = {}
    for m in manifest:
        key = m["kind"] + (" (duplicate)" if m["duplicate_of"] else "")
        kinds[key] = kinds.get(key, 0) + 1
    probs = sorted({m["problem"] for m in manifest})
    print("wrote %d candidates (%s) for %d problems to %s" % (
        len(manifest), ", ".join("%s %d" % kv for kv in sorted(kinds.items())), len(probs),
        args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
