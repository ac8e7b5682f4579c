import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Level 2, problem 19: a level-1 run must never be handed this one.
src = r"""
#include <torch/extension.h>
__global__ void relu_inplace(float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(y[i], 0.f);
}
torch::Tensor relu_inplace_forward(torch::Tensor y) {
    relu_inplace<<<(y.numel() + 255) / 256, 256>>>(y.data_ptr<float>(), y.numel());
    return y;
}
"""
ext = load_inline(name="replay_fixture_c04_gemm_relu", cpp_sources="torch::Tensor relu_inplace_forward(torch::Tensor y);",
                  cuda_sources=src, functions=["relu_inplace_forward"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return ext.relu_inplace_forward(self.fc(x))
