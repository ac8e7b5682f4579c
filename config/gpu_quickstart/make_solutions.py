"""Writes solutions.jsonl: the GPU quickstart's example answers, 5 or 6 per problem.

Every answer is a real CUDA kernel built with torch.utils.cpp_extension.load_inline. Per problem:
a fast one (one fused kernel; a float4 one too for the element-wise problems), a slow but correct
one (one block for the whole tensor, or one thread per row), one with the wrong arithmetic
(incorrect), one that does not build (compile), and one without its closing tag (format). RL starts from this mix; the reward (correctness and speed) moves the
policy toward the fast ones. The labels are checked against the real evaluator on a GPU
(tools/gpu_checks.sh gpuquickstart).

Run from the repository root:  python3 config/gpu_quickstart/make_solutions.py
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

PRELUDE = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r\"\"\"
"""


def program(cuda, decl, fn, name, args, init="", forward=None):
    """A ModelNew program around one CUDA source."""
    forward = forward or "return ext.%s(%s)" % (fn, args)
    init_args = ", dim" if init else ""
    text = PRELUDE + cuda.strip("\n") + "\n\"\"\"\n\n"
    text += "ext = load_inline(name=\"%s\", cpp_sources=\"%s\",\n" % (name, decl)
    text += "                  cuda_sources=cuda_source, functions=[\"%s\"])\n\n\n" % fn
    text += "class ModelNew(nn.Module):\n"
    text += "    def __init__(self%s):\n        super().__init__()\n" % init_args
    if init:
        text += init
    inputs = ", ".join(a for a in args.split(", ") if not a.startswith("self."))
    text += "\n    def forward(self, %s):\n        %s\n" % (inputs, forward)
    return text


def answer(think, text, closed=True):
    return "<think>\n%s\n</think>\n<KERNEL>\n%s%s" % (think, text, "</KERNEL>" if closed else "")


# -- element-wise problems ---------------------------------------------------------------------

ELEMENTWISE = {
    # problem: (function, inputs, device expression, wrong expression, what it does)
    "1_ReLU": ("relu", ["x"], "fmaxf(x[i], 0.0f)", "fabsf(x[i])", "keeps positives, zeroes the rest"),
    "2_Add_ReLU": ("add_relu", ["a", "b"], "fmaxf(a[i] + b[i], 0.0f)", "fmaxf(a[i] - b[i], 0.0f)",
                   "adds and clamps at zero in one pass instead of two"),
    "3_Scale_Clamp": ("scale_clamp", ["x"], "fminf(fmaxf(x[i] * 2.5f, -1.0f), 1.0f)",
                      "fminf(fmaxf(x[i] * 2.5f, 0.0f), 1.0f)", "scales and clamps in one pass"),
    "4_Swish": ("swish", ["x"], "x[i] / (1.0f + expf(-x[i]))", "x[i] / (1.0f + expf(x[i]))",
                "computes x * sigmoid(x) in one pass, without the sigmoid's temporary"),
    "5_LeakyReLU_Scale": ("leaky_scale", ["x"], "(x[i] > 0.0f ? x[i] : 0.1f * x[i]) * 3.0f",
                          "(x[i] > 0.0f ? x[i] : 0.01f * x[i]) * 3.0f",
                          "applies the slope and the scale in one pass"),
}


def elementwise_source(fn, inputs, expr, launch="fast", ptr_type="float"):
    params = ", ".join("const float* %s" % v for v in inputs)
    tparams = ", ".join("torch::Tensor %s" % v for v in inputs)
    ptrs = ", ".join("%s.data_ptr<%s>()" % (v, ptr_type) for v in inputs)
    first = inputs[0]
    if launch == "fast":
        kernel = ("__global__ void %s_kernel(%s, float* y, int n) {\n"
                  "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (i < n) y[i] = %s;\n}\n" % (fn, params, expr))
        call = "    %s_kernel<<<(n + 255) / 256, 256>>>(%s, y.data_ptr<float>(), n);\n" % (fn, ptrs)
    else:  # one block walks the whole tensor: correct, and slow
        kernel = ("__global__ void %s_kernel(%s, float* y, int n) {\n"
                  "    for (int i = threadIdx.x; i < n; i += blockDim.x)\n"
                  "        y[i] = %s;\n}\n" % (fn, params, expr))
        call = "    %s_kernel<<<1, 256>>>(%s, y.data_ptr<float>(), n);\n" % (fn, ptrs)
    return (kernel + "\ntorch::Tensor %s_cuda(%s) {\n    auto y = torch::empty_like(%s);\n"
            "    int n = %s.numel();\n%s    return y;\n}\n" % (fn, tparams, first, first, call))


def vectorized_source(fn, inputs, expr):
    """Four elements per thread through float4 loads (the sizes here are multiples of 4)."""
    params = ", ".join("const float4* %s4" % v for v in inputs)
    tparams = ", ".join("torch::Tensor %s" % v for v in inputs)
    ptrs = ", ".join("(const float4*)%s.data_ptr<float>()" % v for v in inputs)
    loads = "".join("    float4 %s = %s4[i];\n" % (v, v) for v in inputs)
    lanes = ""
    for lane in "xyzw":
        e = expr
        for v in inputs:
            e = e.replace("%s[i]" % v, "%s.%s" % (v, lane))
        lanes += "    r.%s = %s;\n" % (lane, e)
    kernel = ("__global__ void %s_kernel(%s, float4* y, int n4) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i >= n4) return;\n%s    float4 r;\n%s    y[i] = r;\n}\n"
              % (fn, params, loads, lanes))
    return (kernel + "\ntorch::Tensor %s_cuda(%s) {\n    auto y = torch::empty_like(%s);\n"
            "    int n4 = %s.numel() / 4;\n"
            "    %s_kernel<<<(n4 + 255) / 256, 256>>>(%s, (float4*)y.data_ptr<float>(), n4);\n"
            "    return y;\n}\n" % (fn, tparams, inputs[0], inputs[0], fn, ptrs))


def elementwise_answers(problem, spec):
    fn, inputs, expr, wrong, what = spec
    decl = "torch::Tensor %s_cuda(%s);" % (fn, ", ".join("torch::Tensor %s" % v for v in inputs))
    args = ", ".join(inputs)
    name = "qs_" + fn

    def prog(src):
        return program(src, decl, fn + "_cuda", name, args)

    broken = elementwise_source(fn, inputs, expr).replace(
        "int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x * blockDim.x + threadIdx.x")
    return [
        ("correct", answer("One thread per element %s." % what,
                           prog(elementwise_source(fn, inputs, expr)))),
        ("correct", answer("Four elements per thread with float4 loads; the kernel %s." % what,
                           prog(vectorized_source(fn, inputs, expr)))),
        ("correct", answer("One block loops over every element; the kernel %s." % what,
                           prog(elementwise_source(fn, inputs, expr, launch="slow")))),
        ("incorrect", answer("One thread per element %s." % what,
                             prog(elementwise_source(fn, inputs, wrong)))),
        ("compile", answer("One thread per element %s." % what, prog(broken))),
        # the kernel takes floats: passing double* does not build
        ("compile", answer("One thread per element, reading the inputs as doubles.",
                           prog(elementwise_source(fn, inputs, expr, ptr_type="double")))),
        ("format", answer("One thread per element %s." % what,
                          prog(elementwise_source(fn, inputs, expr)), closed=False)),
    ]


# -- row reductions ------------------------------------------------------------------------------

BLOCK_REDUCE = """    red[threadIdx.x] = {value};
    __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step >>= 1) {{
        if (threadIdx.x < step) red[threadIdx.x] = {combine};
        __syncthreads();
    }}
    {result} = red[0];
    __syncthreads();
"""


def block_reduce(value, op, result):
    a, b = "red[threadIdx.x]", "red[threadIdx.x + step]"
    combine = "fmaxf(%s, %s)" % (a, b) if op == "max" else "%s + %s" % (a, b)
    return BLOCK_REDUCE.format(value=value, combine=combine, result=result)


def row_sum(fast=True, scale="", syncname="__syncthreads"):
    if fast:
        kernel = ("__global__ void row_sum_kernel(const float* x, float* y, int cols) {\n"
                  "    __shared__ float red[256];\n"
                  "    const float* row = x + (size_t)blockIdx.x * cols;\n"
                  "    float s = 0.0f;\n"
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];\n"
                  + block_reduce("s", "sum", "s") +
                  "    if (threadIdx.x == 0) y[blockIdx.x] = s%s;\n}\n" % scale)
        launch = "    row_sum_kernel<<<rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);\n"
    else:
        kernel = ("__global__ void row_sum_kernel(const float* x, float* y, int rows, int cols) {\n"
                  "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (r >= rows) return;\n"
                  "    float s = 0.0f;\n"
                  "    for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];\n"
                  "    y[r] = s%s;\n}\n" % scale)
        launch = ("    row_sum_kernel<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), "
                  "y.data_ptr<float>(), rows, cols);\n")
    kernel = kernel.replace("__syncthreads", syncname)
    return (kernel + "\ntorch::Tensor row_sum_cuda(torch::Tensor x) {\n"
            "    int rows = x.size(0), cols = x.size(1);\n"
            "    auto y = torch::empty({rows}, x.options());\n" + launch + "    return y;\n}\n")


def row_softmax(fast=True, divide=True, ptr_type="float"):
    out = "expf(row[j] - m) / s" if divide else "expf(row[j] - m)"
    if fast:
        kernel = ("__global__ void softmax_kernel(const float* x, float* y, int cols) {\n"
                  "    __shared__ float red[256];\n"
                  "    const float* row = x + (size_t)blockIdx.x * cols;\n"
                  "    float* out = y + (size_t)blockIdx.x * cols;\n"
                  "    float m = -INFINITY;\n"
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);\n"
                  + block_reduce("m", "max", "m") +
                  "    float s = 0.0f;\n"
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);\n"
                  + block_reduce("s", "sum", "s") +
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = %s;\n}\n" % out)
        launch = ("    softmax_kernel<<<rows, 256>>>(x.data_ptr<%s>(), y.data_ptr<float>(), cols);\n"
                  % ptr_type)
    else:
        kernel = ("__global__ void softmax_kernel(const float* x, float* y, int rows, int cols) {\n"
                  "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (r >= rows) return;\n"
                  "    const float* row = x + (size_t)r * cols;\n"
                  "    float* out = y + (size_t)r * cols;\n"
                  "    float m = -INFINITY;\n"
                  "    for (int j = 0; j < cols; ++j) m = fmaxf(m, row[j]);\n"
                  "    float s = 0.0f;\n"
                  "    for (int j = 0; j < cols; ++j) s += expf(row[j] - m);\n"
                  "    for (int j = 0; j < cols; ++j) out[j] = %s;\n}\n" % out)
        launch = ("    softmax_kernel<<<(rows + 255) / 256, 256>>>(x.data_ptr<%s>(), "
                  "y.data_ptr<float>(), rows, cols);\n" % ptr_type)
    return (kernel + "\ntorch::Tensor softmax_cuda(torch::Tensor x) {\n"
            "    int rows = x.size(0), cols = x.size(1);\n"
            "    auto y = torch::empty_like(x);\n" + launch + "    return y;\n}\n")


def rms_norm(fast=True, use_weight=True, broken=False):
    w = " * w[j]" if use_weight else ""
    if fast:
        kernel = ("__global__ void rms_norm_kernel(const float* x, const float* w, float* y, "
                  "int cols, float eps) {\n"
                  "    __shared__ float red[256];\n"
                  "    const float* row = x + (size_t)blockIdx.x * cols;\n"
                  "    float* out = y + (size_t)blockIdx.x * cols;\n"
                  "    float ss = 0.0f;\n"
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += row[j] * row[j];\n"
                  + block_reduce("ss", "sum", "ss") +
                  "    float inv = rsqrtf(ss / cols + eps);\n"
                  "    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = row[j] * inv%s;\n}\n"
                  % w)
        launch = ("    rms_norm_kernel<<<rows, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), "
                  "y.data_ptr<float>(), cols, (float)eps);\n")
    else:
        kernel = ("__global__ void rms_norm_kernel(const float* x, const float* w, float* y, "
                  "int rows, int cols, float eps) {\n"
                  "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (r >= rows) return;\n"
                  "    const float* row = x + (size_t)r * cols;\n"
                  "    float ss = 0.0f;\n"
                  "    for (int j = 0; j < cols; ++j) ss += row[j] * row[j];\n"
                  "    float inv = rsqrtf(ss / cols + eps);\n"
                  "    for (int j = 0; j < cols; ++j) y[(size_t)r * cols + j] = row[j] * inv%s;\n}\n"
                  % w)
        launch = ("    rms_norm_kernel<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), "
                  "w.data_ptr<float>(), y.data_ptr<float>(), rows, cols, (float)eps);\n")
    if broken:
        kernel = kernel.replace("float inv = rsqrtf", "float inv = rsqrt_f")
    return (kernel + "\ntorch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor w, double eps) {\n"
            "    int rows = x.size(0), cols = x.size(1);\n"
            "    auto y = torch::empty_like(x);\n" + launch + "    return y;\n}\n")


def matmul(tiled=True, wrong=False, broken=False):
    if tiled:
        kernel = ("#define TILE 16\n\n"
                  "__global__ void matmul_kernel(const float* a, const float* b, float* c, int n) {\n"
                  "    __shared__ float as[TILE][TILE];\n"
                  "    __shared__ float bs[TILE][TILE];\n"
                  "    int row = blockIdx.y * TILE + threadIdx.y;\n"
                  "    int col = blockIdx.x * TILE + threadIdx.x;\n"
                  "    float acc = 0.0f;\n"
                  "    for (int t = 0; t < n; t += TILE) {\n"
                  "        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];\n"
                  "        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];\n"
                  "        __syncthreads();\n"
                  "        for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];\n"
                  "        __syncthreads();\n"
                  "    }\n"
                  "    c[row * n + col] = acc;\n}\n")
        launch = ("    dim3 block(TILE, TILE);\n"
                  "    dim3 grid(n / TILE, n / TILE);\n"
                  "    matmul_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), "
                  "c.data_ptr<float>(), n);\n")
    else:
        index = "b[col * n + k]" if wrong else "b[k * n + col]"
        kernel = ("__global__ void matmul_kernel(const float* a, const float* b, float* c, int n) {\n"
                  "    int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
                  "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (row >= n || col >= n) return;\n"
                  "    float acc = 0.0f;\n"
                  "    for (int k = 0; k < n; ++k) acc += a[row * n + k] * %s;\n"
                  "    c[row * n + col] = acc;\n}\n" % index)
        launch = ("    dim3 block(16, 16);\n"
                  "    dim3 grid((n + 15) / 16, (n + 15) / 16);\n"
                  "    matmul_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), "
                  "c.data_ptr<float>(), n);\n")
    if broken:
        launch = launch.replace("dim3 grid(", "dim3 grid = (")
    return (kernel + "\ntorch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {\n"
            "    int n = a.size(0);\n"
            "    auto c = torch::empty({n, n}, a.options());\n" + launch + "    return c;\n}\n")


RMS_INIT = ("        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))\n"
            "        self.eps = 1e-6\n")


def reduction_answers():
    out = {}

    def sum_prog(src):
        return program(src, "torch::Tensor row_sum_cuda(torch::Tensor x);", "row_sum_cuda",
                       "qs_row_sum", "x")
    out["6_Row_Sum"] = [
        ("correct", answer("One block per row: each thread sums a strided slice, then a tree in "
                           "shared memory.", sum_prog(row_sum()))),
        ("correct", answer("One thread per row sums its row in order.", sum_prog(row_sum(fast=False)))),
        ("incorrect", answer("One block per row sums the row; divide by the width.",
                             sum_prog(row_sum(scale=" / cols")))),
        ("compile", answer("One block per row with a tree in shared memory.",
                           sum_prog(row_sum(syncname="__syncthread")))),
        ("format", answer("One block per row with a tree in shared memory.", sum_prog(row_sum()),
                          closed=False)),
    ]

    def softmax_prog(src):
        return program(src, "torch::Tensor softmax_cuda(torch::Tensor x);", "softmax_cuda",
                       "qs_softmax", "x")
    out["7_Row_Softmax"] = [
        ("correct", answer("One block per row: the row's max, the sum of exponentials, then the "
                           "quotients, each reduced in shared memory.", softmax_prog(row_softmax()))),
        ("correct", answer("One thread per row makes the three passes alone.",
                           softmax_prog(row_softmax(fast=False)))),
        ("incorrect", answer("One block per row: the max, then the exponentials.",
                             softmax_prog(row_softmax(divide=False)))),
        ("compile", answer("One block per row, reading the input as doubles.",
                           softmax_prog(row_softmax(ptr_type="double")))),
        ("format", answer("One block per row with shared-memory reductions.",
                          softmax_prog(row_softmax()), closed=False)),
    ]

    def rms_prog(src):
        return program(src, "torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor w, double eps);",
                       "rms_norm_cuda", "qs_rms_norm", "x, self.weight, self.eps", init=RMS_INIT)
    out["8_RMSNorm"] = [
        ("correct", answer("One block per row: the sum of squares reduced in shared memory, then "
                           "scale and weight in the same kernel.", rms_prog(rms_norm()))),
        ("correct", answer("One thread per row: sum of squares, then the scaled row.",
                           rms_prog(rms_norm(fast=False)))),
        ("incorrect", answer("One block per row: the sum of squares, then the scaled row.",
                             rms_prog(rms_norm(use_weight=False)))),
        ("compile", answer("One block per row with the reciprocal square root.",
                           rms_prog(rms_norm(broken=True)))),
        ("format", answer("One block per row with a shared-memory reduction.", rms_prog(rms_norm()),
                          closed=False)),
    ]

    def mm_prog(src):
        return program(src, "torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);",
                       "matmul_cuda", "qs_matmul", "a, b")
    out["9_Matmul"] = [
        ("correct", answer("16x16 tiles of both matrices in shared memory; each thread keeps one "
                           "output in a register.", mm_prog(matmul()))),
        ("correct", answer("One thread per output element reads its row and column.",
                           mm_prog(matmul(tiled=False)))),
        ("incorrect", answer("One thread per output element reads its row and column.",
                             mm_prog(matmul(tiled=False, wrong=True)))),
        # `dim3 grid = (x, y)` is the comma operator: a one-dimensional grid, half the output
        ("incorrect", answer("16x16 tiles in shared memory.", mm_prog(matmul(broken=True)))),
        ("format", answer("16x16 tiles in shared memory.", mm_prog(matmul()), closed=False)),
    ]
    return out


def main():
    rows = []
    for problem, spec in ELEMENTWISE.items():
        rows += [(problem, label, text) for label, text in elementwise_answers(problem, spec)]
    for problem, answers in reduction_answers().items():
        rows += [(problem, label, text) for label, text in answers]
    with open(os.path.join(HERE, "solutions.jsonl"), "w") as f:
        for problem, label, text in rows:
            f.write(json.dumps({"problem": "level1/" + problem, "label": label,
                                "completion": text}) + "\n")
    print("wrote %d answers to %s" % (len(rows), os.path.join(HERE, "solutions.jsonl")))


if __name__ == "__main__":
    main()
