# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=runtime expect_correct=false expect_sticky=false expect_excerpt=cudaErrorInvalid timeout_s=600
# Launches with 2048 threads per block (the limit is 1024) and never checks: the launch fails
# (CUDA 13 on an H100 names it cudaErrorInvalidValue), the output stays unwritten. The failure is the candidate's, named by its CUDA error, and not
# found later inside the evaluator's own code.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* in, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(int)((n + 2047) / 2048), 2048>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbrl_test_relu_launch_error", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
