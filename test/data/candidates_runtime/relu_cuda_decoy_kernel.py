# kbrl-test: problem=1_small_relu.py requires=cuda backend=cuda expect_error=none expect_correct=true expect_flags=own_kernels_idle perf_trials=10 timeout_s=600
# Builds a CUDA kernel it never calls (KernelGYM's decoy): PyTorch does all the work. Correct, but
# its own kernels did none of it: flagged, and the reward policy decides.
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
    relu_kernel<<<(int)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbrl_test_relu_decoy", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
