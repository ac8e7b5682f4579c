import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Level 1, problem 2: outside the selected numbers.
src = r"""
#include <torch/extension.h>
__global__ void scale2(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];
}
torch::Tensor scale2_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    scale2<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="replay_fixture_c05_scale", cpp_sources="torch::Tensor scale2_forward(torch::Tensor x);",
                  cuda_sources=src, functions=["scale2_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale2_forward(x)
