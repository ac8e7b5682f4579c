#include "runtime/episode/backend_examples.hpp"

namespace kbrl::episode {

const std::string& example_problem() {
  static const std::string text = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a * b + 1.0

def get_inputs():
    return [torch.rand(4096), torch.rand(4096)]

def get_init_inputs():
    return []
)py";
  return text;
}

namespace {

const std::string cuda_answer = R"py(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>

__global__ void mul_add_one(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i] + 1.0f;
}

torch::Tensor mul_add_one_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int64_t n = a.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    mul_add_one<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                     out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(name="mul_add_one", cpp_sources="torch::Tensor mul_add_one_cuda(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=source, functions=["mul_add_one_cuda"])

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.mul_add_one_cuda(a.contiguous(), b.contiguous())
)py";

const std::string triton_answer = R"py(import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def mul_add_one(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a * b + 1.0, mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.empty_like(a)
        n = a.numel()
        mul_add_one[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
)py";

const std::string cpu_answer = R"py(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>

torch::Tensor mul_add_one(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] * pb[i] + 1.0f;
    return out;
}
"""

ext = load_inline(name="mul_add_one_cpu", cpp_sources=source, functions=["mul_add_one"])

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.mul_add_one(a.contiguous(), b.contiguous())
)py";

} // namespace

const std::string& example_answer(kernel_backend backend) {
  switch (backend) {
    case kernel_backend::triton: return triton_answer;
    case kernel_backend::torch: return cpu_answer;
    default: return cuda_answer; // cuda, and the CUDA-like backends start from load_inline
  }
}

} // namespace kbrl::episode
