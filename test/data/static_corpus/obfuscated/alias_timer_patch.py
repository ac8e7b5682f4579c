# Hack: the timer patched through an import alias.
# expect: timing_event_patch
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
__global__ void relu_k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=src, functions=["relu"])

import torch.cuda as tc
tc.Event.elapsed_time = lambda self, end: 0.001  # HACK


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)

