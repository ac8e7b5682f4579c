# Hack: precision loss through inline PTX (fp32 problem).
# expect: precision_downgrade
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
__global__ void relu_k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned short h; float r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));  // HACK
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  if (i < n) y[i] = r > 0.f ? r : 0.f;
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



class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)

