#!/usr/bin/env python3
"""Checks, without a GPU, that the CUDA candidates of make_candidates.py are what their manifest
says they are.

    check_candidates.py --manifest M --candidates DIR --kernelbench DIR [--numerics] [--nvcc]

--numerics  runs every unique correct/wrong candidate through KernelBench's correctness
            protocol (seeded Model/ModelNew, 5 trials, allclose atol = rtol = 1e-4) on the CPU,
            at shrunk problem sizes: the candidate's `load_inline` is replaced by a "CPU twin"
            of its extension: the candidate's own `__device__` element function compiled as
            C++ and applied by a host loop that keeps the kernel's index bound (an
            off-by-one candidate leaves its last element unwritten: NaN here). So the
            candidate's math, its Python side (layers built in the reference's order, arguments)
            and its index bound are checked; the launch configuration is not.
--nvcc      compiles every unique candidate's cuda_sources with nvcc (-c, sm_90, the local
            torch's headers): all correct/wrong ones in one translation unit (each in its own
            namespace), each compile_error one alone; they must fail, the others must not.

CPU float math (glibc) and CUDA's differ by an ulp or two, far below the 1e-4 tolerances.
"""

import argparse
import ast
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from make_candidates import resolve_problem  # noqa: E402

OP_RE = re.compile(r"__device__ __forceinline__ float (\w+_op)\(([^)]*)\) \{")


def module_strings(src):
    """Module-level NAME = "string" assignments of a candidate program."""
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def cuda_source_of(src):
    for k, v in module_strings(src).items():
        if k.endswith("_cuda_source"):
            return v
    raise ValueError("no *_cuda_source string")


# ---------------------------------------------------------------------------------------------
# shrinking a problem


def _const_value(node):
    """The value of an expression made only of numeric constants and arithmetic, else None."""
    for sub in ast.walk(node):
        if not isinstance(sub, (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp,
                                ast.operator, ast.unaryop, ast.Tuple, ast.Load)):
            return None
    try:
        return eval(compile(ast.Expression(node), "<const>", "eval"), {"__builtins__": {}})
    except Exception:
        return None


def _small(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 32:
        return value
    if name == "batch_size":
        return 4
    if "channels" in name:
        return 8
    if name in ("height", "width"):
        return 33
    return 2053


def shrink_source(src):
    """Module-level integer constants made small (batch 4, channels 8, spatial 33, others
    2053), so the problem runs on a CPU in moments."""
    tree = ast.parse(src)
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if isinstance(t, ast.Name):
            v = _const_value(node.value)
            if isinstance(v, int):
                node.value = ast.copy_location(ast.Constant(_small(t.id, v)), node.value)
        elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
            for k, (tt, vv) in enumerate(zip(t.elts, node.value.elts)):
                v = _const_value(vv)
                if isinstance(tt, ast.Name) and isinstance(v, int):
                    node.value.elts[k] = ast.copy_location(ast.Constant(_small(tt.id, v)), vv)
    ast.fix_missing_locations(tree)
    return compile(tree, "<reference>", "exec")


# ---------------------------------------------------------------------------------------------
# CPU twins


def twin_function(cid, cuda_src):
    """C++ for namespace t_<cid> { op; run(x, bias, params) }."""
    m = OP_RE.search(cuda_src)
    if not m:
        raise ValueError("%s: no __device__ element function" % cid)
    start = m.start()
    end = cuda_src.index("\n}\n", start) + 3
    op_text = cuda_src[start:end].replace("__device__ __forceinline__", "static inline")
    op_name = m.group(1)
    args = [a.strip().split()[-1] for a in m.group(2).split(",") if a.strip()]
    offbyone = "i < n - 1" in cuda_src
    call = []
    k = 0
    for a in args:
        if a == "v":
            call.append("x_[i]")
        elif a == "b":
            call.append("b_[(i / inner) % channels]")
        else:
            call.append("static_cast<float>(p.at(%d))" % k)
            k += 1
    fn = "twin_%s" % cid
    lines = ["namespace t_%s {" % cid, op_text, "}", "",
             "torch::Tensor %s(torch::Tensor x, torch::Tensor bias, std::vector<double> p) {" % fn,
             "    using namespace t_%s;" % cid,
             "    auto xc = x.contiguous();",
             "    auto y = torch::full_like(xc, std::numeric_limits<float>::quiet_NaN());",
             "    const float* x_ = xc.data_ptr<float>();",
             "    float* y_ = y.data_ptr<float>();",
             "    const int64_t n = xc.numel();",
             "    auto bc = bias.contiguous();",
             "    const float* b_ = bc.numel() ? bc.data_ptr<float>() : nullptr;",
             "    const int64_t channels = bc.numel() ? bc.numel() : 1;",
             "    const int64_t inner = bc.numel() ? n / (xc.size(0) * channels) : 1;",
             "    (void)b_; (void)inner;",
             "    TORCH_CHECK(p.size() == %d, \"%s: expected %d scalar arguments\");" % (k, cid, k),
             "    for (int64_t i = 0; %s; ++i) {" % ("i < n - 1" if offbyone else "i < n"),
             "        y_[i] = %s(%s);" % (op_name, ", ".join(call)),
             "    }",
             "    return y;",
             "}", ""]
    return fn, "\n".join(lines)


class Stub:
    """Stands in for the candidate's extension module: any function name calls the twin."""

    def __init__(self, fn):
        self._fn = fn

    def __getattr__(self, name):
        import torch

        def call(x, *rest):
            bias = torch.empty(0)
            params = []
            for r in rest:
                if isinstance(r, torch.Tensor):
                    bias = r.detach()
                else:
                    params.append(float(r))
            return self._fn(x, bias, params)
        return call


def strip_load_inline(src):
    """The candidate program without its `X = load_inline(...)` statement; returns (code, X)."""
    tree = ast.parse(src)
    keep, ext_var = [], None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", None) == "load_inline":
            ext_var = node.targets[0].id
            continue
        keep.append(node)
    tree.body = keep
    return compile(tree, "<candidate>", "exec"), ext_var


def kernelbench_correctness(torch, ref_code, cand_code, ext_var, stub, seed=42, trials=5,
                            tol=1e-4):
    """eval_kernel_against_ref's correctness part on the CPU; (passed, total, note)."""
    ctx = {}
    exec(ref_code, ctx)
    torch.manual_seed(seed)
    init = ctx["get_init_inputs"]()
    with torch.no_grad():
        torch.manual_seed(seed)
        model = ctx["Model"](*init)
    cctx = dict(ctx)
    cctx[ext_var] = stub
    exec(cand_code, cctx)
    with torch.no_grad():
        torch.manual_seed(seed)
        new = cctx["ModelNew"](*init)
    torch.manual_seed(seed)
    seeds = [torch.randint(0, 2 ** 32 - 1, (1,)).item() for _ in range(trials)]
    passed, notes = 0, []
    with torch.no_grad():
        for s in seeds:
            torch.manual_seed(s)
            inputs = ctx["get_inputs"]()
            out = model(*inputs)
            got = new(*inputs)
            if out.shape != got.shape:
                notes.append("shape %s vs %s" % (list(got.shape), list(out.shape)))
                continue
            if torch.allclose(out, got, atol=tol, rtol=tol):
                passed += 1
            else:
                d = (out - got).abs()
                d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
                notes.append("max abs diff %.3g" % d.max().item())
    return passed, trials, "; ".join(notes[:2])


def run_numerics(manifest, cand_dir, kb_dir):
    import torch
    from torch.utils.cpp_extension import load_inline
    todo = [m for m in manifest if m["duplicate_of"] is None and m["kind"] != "compile_error"]
    parts, fns, texts = [], [], {}
    for m in todo:
        with open(os.path.join(cand_dir, m["candidate"]), encoding="utf-8") as f:
            texts[m["id"]] = f.read()
        fn, code = twin_function(m["id"], cuda_source_of(texts[m["id"]]))
        fns.append(fn)
        parts.append(code)
    src = "#include <torch/extension.h>\n#include <cmath>\n#include <limits>\n" \
          "#include <vector>\n\n" + "\n".join(parts)
    build = tempfile.mkdtemp(prefix="kbrl_twins_")
    t0 = time.time()
    twins = load_inline(name="kbrl_eval_throughput_twins", cpp_sources=src, functions=fns,
                        extra_cflags=["-O1"], build_directory=build, verbose=False)
    print("built %d CPU twins in %.1f s" % (len(fns), time.time() - t0))
    bad = 0
    for m in todo:
        ref_path = resolve_problem(kb_dir, m["problem"])
        with open(ref_path, encoding="utf-8") as f:
            ref_code = shrink_source(f.read())
        cand_code, ext_var = strip_load_inline(texts[m["id"]])
        stub = Stub(getattr(twins, "twin_%s" % m["id"]))
        try:
            passed, total, note = kernelbench_correctness(torch, ref_code, cand_code, ext_var,
                                                          stub)
            correct = passed == total
            verdict = "correct" if correct else "wrong"
        except Exception as e:  # noqa: BLE001
            passed, total, verdict, note = 0, 5, "error", "%s: %s" % (type(e).__name__, e)
        ok = verdict == m["kind"]
        bad += 0 if ok else 1
        print("%s %-48s %-8s %d/%d %s %s" % (m["id"], m["problem"], verdict, passed, total,
                                             "ok" if ok else "MISMATCH (manifest: %s)" % m["kind"],
                                             note))
    print("numerics: %d of %d unique candidates as labelled" % (len(todo) - bad, len(todo)))
    return bad


# ---------------------------------------------------------------------------------------------
# nvcc


def nvcc_cmd(cu, obj):
    import torch.utils.cpp_extension as ce
    inc = []
    for p in ce.include_paths():
        inc += ["-I", p]
    py = subprocess.run([sys.executable, "-c", "import sysconfig;print(sysconfig.get_paths()"
                         "['include'])"], capture_output=True, text=True).stdout.strip()
    # a CPU-only torch lacks this generated header that ATen/cuda/CUDAContext.h needs
    stub = os.path.join(os.path.dirname(cu), "stub_include")
    os.makedirs(os.path.join(stub, "c10", "cuda", "impl"), exist_ok=True)
    with open(os.path.join(stub, "c10", "cuda", "impl", "cuda_cmake_macros.h"), "w") as f:
        f.write("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return ["nvcc", "-c", "-std=c++17", "-O1", "-w", "-arch=sm_90", "--expt-relaxed-constexpr",
            "-D__CUDA_NO_HALF_OPERATORS__", "-DTORCH_EXTENSION_NAME=check"] + inc + \
        ["-I", py, "-I", stub, "-o", obj, cu]


def run_nvcc(manifest, cand_dir, jobs):
    uniq = [m for m in manifest if m["duplicate_of"] is None]
    good = [m for m in uniq if m["kind"] != "compile_error"]
    ces = [m for m in uniq if m["kind"] == "compile_error"]
    work = tempfile.mkdtemp(prefix="kbrl_nvcc_")
    includes, bodies = set(), []
    for m in good:
        with open(os.path.join(cand_dir, m["candidate"]), encoding="utf-8") as f:
            cu = cuda_source_of(f.read())
        keep = []
        for line in cu.split("\n"):
            if line.startswith("#include"):
                includes.add(line)
            else:
                keep.append(line)
        bodies.append("namespace n_%s {\n%s\n}" % (m["id"], "\n".join(keep)))
    combined = os.path.join(work, "all_good.cu")
    with open(combined, "w") as f:
        f.write("\n".join(sorted(includes)) + "\n\n" + "\n\n".join(bodies) + "\n")
    tasks = [("all %d correct/wrong" % len(good), combined, True)]
    for m in ces:
        with open(os.path.join(cand_dir, m["candidate"]), encoding="utf-8") as f:
            cu = cuda_source_of(f.read())
        path = os.path.join(work, m["id"] + ".cu")
        with open(path, "w") as f:
            f.write(cu)
        tasks.append((m["id"] + " (" + m["detail"].split(";")[0] + ")", path, False))

    def one(task):
        label, path, should_pass = task
        t0 = time.time()
        r = subprocess.run(nvcc_cmd(path, path + ".o"), capture_output=True, text=True)
        errs = [l for l in (r.stdout + r.stderr).split("\n") if "error" in l]
        if not should_pass and r.returncode != 0:
            # a compile_error candidate must fail in its own code, not in a header
            own = [l for l in errs if l.startswith(path + "(")]
            if not own:
                return label, should_pass, True, time.time() - t0, errs[:2]
            errs = own
        return label, should_pass, r.returncode == 0, time.time() - t0, errs[:2]

    bad = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        for label, should, ok, secs, errs in ex.map(one, tasks):
            fine = ok == should
            bad += 0 if fine else 1
            print("nvcc %-60s %s in %.0f s: %s%s" % (
                label, "compiled" if ok else "failed", secs, "as expected" if fine else "NOT "
                "as expected", "" if ok else " | " + " | ".join(e.strip()[-150:] for e in errs)))
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--kernelbench", required=True)
    ap.add_argument("--numerics", action="store_true")
    ap.add_argument("--nvcc", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    with open(args.manifest) as f:
        manifest = json.load(f)
    if not (args.numerics or args.nvcc):
        ap.error("say --numerics and/or --nvcc")
    bad = 0
    if args.numerics:
        bad += run_numerics(manifest, args.candidates, args.kernelbench)
    if args.nvcc:
        bad += run_nvcc(manifest, args.candidates, args.jobs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
