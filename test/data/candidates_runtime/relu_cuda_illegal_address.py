# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=runtime expect_correct=false expect_sticky=false timeout_s=600
# Writes far outside its output: an illegal memory access poisons the CUDA context of the
# candidate's process (the worker's own context stays usable).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bad_kernel(const float* in, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i + (int64_t)1 << 40] = in[i];
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    bad_kernel<<<(int)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbrl_test_relu_illegal", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
