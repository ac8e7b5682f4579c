# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=none expect_correct=true perf_trials=20 timeout_s=600
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(name="kbrl_test_relu_cuda", cpp_sources=cpp_source,
                       cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
