import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_src = r"""
#include <torch/extension.h>
__global__ void tanh_k(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tanhf(x[i]);
}
torch::Tensor tanh_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    tanh_k<<<(x.numel() + 127) / 128, 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
tanh_ext = load_inline(name="replay_fixture_c03_tanh", cpp_sources="torch::Tensor tanh_forward(torch::Tensor x);",
                       cuda_sources=tanh_src, functions=["tanh_forward"])


class ModelNew(nn.Module):
    """tanh — written by hand for the replay fixture."""

    def forward(self, x):
        return tanh_ext.tanh_forward(x)