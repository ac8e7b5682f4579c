# Honest HIP: hipcc chosen through the environment (as KernelBench's HIP example does),
# hipLaunchKernelGGL, an error check after the launch.
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = """
#include <hip/hip_runtime.h>
#include <torch/extension.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

torch::Tensor gelu_hip(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  hipLaunchKernelGGL(gelu_kernel, dim3((n + 255) / 256), dim3(256), 0, 0,
                     x.data_ptr<float>(), y.data_ptr<float>(), n);
  hipError_t err = hipGetLastError();
  if (err != hipSuccess) {
    fprintf(stderr, "launch failed: %s\\n", hipGetErrorString(err));
    exit(1);
  }
  return y;
}
"""

gelu = load_inline(name="gelu_hip", cpp_sources=hip_src, functions=["gelu_hip"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gelu = gelu

    def forward(self, x):
        return self.gelu.gelu_hip(x.contiguous())
