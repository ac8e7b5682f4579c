# Honest fp16 problem: __half / half2 arithmetic with warp shuffles for a row sum.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
#include <torch/extension.h>
#include <cuda_fp16.h>

__inline__ __device__ float warp_sum(float v) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
  return v;
}

__global__ void row_sum_half(const __half* __restrict__ x, __half* __restrict__ out, int cols) {
  const half2* row = reinterpret_cast<const half2*>(x + (size_t)blockIdx.x * cols);
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols / 2; c += 32) {
    float2 f = __half22float2(row[c]);
    acc += f.x + f.y;
  }
  acc = warp_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = __float2half(acc);
}

torch::Tensor row_sum(torch::Tensor x) {
  TORCH_CHECK(x.scalar_type() == at::kHalf, "fp16 input expected");
  auto out = torch::empty({x.size(0)}, x.options());
  row_sum_half<<<x.size(0), 32>>>(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                                  reinterpret_cast<__half*>(out.data_ptr<at::Half>()),
                                  (int)x.size(1));
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  return out;
}
"""

mod = load_inline(name="row_sum_half", cpp_sources="torch::Tensor row_sum(torch::Tensor x);",
                  cuda_sources=src, functions=["row_sum"])


class ModelNew(nn.Module):
    def forward(self, x):
        return mod.row_sum(x.contiguous())
