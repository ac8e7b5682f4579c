# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=compile expect_correct=false expect_compiled=false timeout_s=600
# CUDA code that nvcc rejects: the excerpt must keep nvcc's error lines.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(in[i], 0.f) + missing_value;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

ext = load_inline(name="kbrl_test_relu_cuda_bad", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
