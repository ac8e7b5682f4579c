# The __global__ kernel exists only in comments and a docstring: the cuda backend is not used.
# __global__ void relu_kernel(const float* x, float* out, int n) { ... }
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
// __global__ void relu_kernel(float* x) {}   <- a C++ comment, not a kernel
/* __global__ void other_kernel() {} */
#include <torch/extension.h>
torch::Tensor relu_cpu(torch::Tensor x) { return x.clamp_min(0); }
"""


def helper():
    """__global__ void in_a_docstring(float* x) {}"""
    return None


ext = load_inline(name="relu_cpu_ext", cpp_sources=cpp_source, functions=["relu_cpu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cpu(x)
