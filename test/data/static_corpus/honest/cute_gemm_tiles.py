# Honest CuTe: a tiled copy-scale kernel with cute tensors and layouts, built with load_inline.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cute_src = r"""
#include <torch/extension.h>
#include <cute/tensor.hpp>
using namespace cute;

template <class TensorS, class TensorD>
__global__ void scale_tiles(TensorS S, TensorD D, float alpha) {
  auto tile_s = local_tile(S, make_shape(Int<128>{}), make_coord(blockIdx.x));
  auto tile_d = local_tile(D, make_shape(Int<128>{}), make_coord(blockIdx.x));
  int i = threadIdx.x;
  if (blockIdx.x * 128 + i < size(S)) tile_d(i) = alpha * tile_s(i);
}

torch::Tensor scale(torch::Tensor x, double alpha) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  auto S = make_tensor(make_gmem_ptr(x.data_ptr<float>()), make_layout(make_shape(n)));
  auto D = make_tensor(make_gmem_ptr(y.data_ptr<float>()), make_layout(make_shape(n)));
  scale_tiles<<<(n + 127) / 128, 128>>>(S, D, (float)alpha);
  return y;
}
"""

ext = load_inline(name="cute_scale", cpp_sources="torch::Tensor scale(torch::Tensor x, double alpha);",
                  cuda_sources=cute_src, functions=["scale"],
                  extra_include_paths=["/opt/cutlass/include"], extra_cuda_cflags=["-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self, alpha=0.5):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return ext.scale(x.contiguous(), self.alpha)
