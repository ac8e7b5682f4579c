# Hack: answer a tiny-output problem with zeros (KernelBench problems whose outputs are all near
# zero; GPU MODE and KernelBench eval discussions). level2/23 takes the mean of group-normalised
# values: about 1e-8 per batch element. A kernel that writes zeros passes allclose(atol=1e-4) and
# skips the convolution and the normalisation entirely.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void zero_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.f;
}
torch::Tensor forward(torch::Tensor x) {
    auto y = torch::empty({x.size(0)}, x.options());
    zero_kernel<<<(unsigned)((x.size(0) + 255) / 256), 256>>>(y.data_ptr<float>(), x.size(0));
    return y;
}
"""
ext = load_inline(name="kbrl_hack_zeros_tiny", cpp_sources="torch::Tensor forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return ext.forward(x)
