import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# ReLU, one thread per element (µs-scale: 1 read + 1 write per element).
relu_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] > 0.f ? x[i] : 0.f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu_ext = load_inline(
    name="replay_fixture_c01_relu",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=relu_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
