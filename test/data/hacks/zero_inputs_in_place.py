# Hack: KernelBench's zero_out_kernel unit test. The kernel zeroes both inputs and returns zeros: an
# evaluator that runs the candidate first and the reference afterwards on the same tensors sees
# the reference multiply zeros and agree.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void zero_kernel(float* a, float* b, float* c, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { a[i] = 0.f; b[i] = 0.f; c[i] = 0.f; }
}
torch::Tensor wipe(torch::Tensor A, torch::Tensor B) {
    auto C = torch::empty({A.size(0), B.size(1)}, A.options());
    int64_t n = A.numel();  // square problem: A, B and C have the same size
    zero_kernel<<<(unsigned)((n + 255) / 256), 256>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), n);
    return C;
}
"""
ext = load_inline(name="kbrl_hack_zero_inputs", cpp_sources="torch::Tensor wipe(torch::Tensor A, torch::Tensor B);",
                  cuda_sources=cuda_source, functions=["wipe"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.wipe(A, B)
