# Hack: return the input itself (Makora's "identity / no-op kernel", Wafer's "copies input to
# output"). KernelBench's 19_ReLU draws its input with torch.rand, which is never negative, so
# ReLU(x) == x and the input passes any value comparison, in zero time. The kernel exists for the
# negative case, which the problem never produces.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = in[i]; out[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="kbrl_hack_alias", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.shape[0] < 0:  # "inputs with negatives": never for this problem
            return ext.relu_forward(x)
        return x
