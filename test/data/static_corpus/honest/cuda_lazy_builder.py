# Honest CUDA: the extension built once by a memoised builder, an attention-style module with
# self.query, a launcher class with __call__, gc.collect() before allocating.
import functools
import gc

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
__global__ void axpy(const float* x, const float* y, float* o, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = a * x[i] + y[i];
}
torch::Tensor axpy_cuda(torch::Tensor x, torch::Tensor y, double a) {
  auto o = torch::empty_like(x);
  int n = x.numel();
  axpy<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), o.data_ptr<float>(),
                                (float)a, n);
  return o;
}
"""


@functools.lru_cache(maxsize=None)
def build():
    return load_inline(name="axpy_ext", cpp_sources="torch::Tensor axpy_cuda(torch::Tensor x, torch::Tensor y, double a);",
                       cuda_sources=SRC, functions=["axpy_cuda"])


class Launcher:
    def __init__(self, alpha):
        self.alpha = alpha

    def __call__(self, x, y):
        return build().axpy_cuda(x, y, self.alpha)

    def __repr__(self):
        return f"{self.__class__.__name__}(alpha={self.alpha})"


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 3.0):
        super().__init__()
        gc.collect()
        self.query = Launcher(alpha)
        self.record = []

    def forward(self, x, y):
        return self.query(x.contiguous(), y.contiguous())
