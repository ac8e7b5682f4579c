# Honest: two halves on two streams the candidate creates, joined back into the current stream
# before returning; shared-memory tiles and cooperative groups.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
#include <cooperative_groups.h>
#include <ATen/cuda/CUDAContext.h>
namespace cg = cooperative_groups;

template <int TILE>
__global__ void tile_copy_relu(const float* in, float* out, int n) {
  __shared__ float buf[TILE];
  cg::thread_block block = cg::this_thread_block();
  int i = blockIdx.x * TILE + threadIdx.x;
  buf[threadIdx.x] = i < n ? in[i] : 0.f;
  block.sync();
  if (i < n) out[i] = fmaxf(buf[threadIdx.x], 0.f);
}

void relu_on(torch::Tensor x, torch::Tensor y, int64_t stream_ptr) {
  int n = (int)x.numel();
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream_ptr);
  tile_copy_relu<256><<<(n + 255) / 256, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
}
"""

ext = load_inline(name="relu_streams",
                  cpp_sources="void relu_on(torch::Tensor x, torch::Tensor y, int64_t stream_ptr);",
                  cuda_sources=source, functions=["relu_on"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        half = x.shape[0] // 2
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)
        ext.relu_on(x[:half], y[:half], main.cuda_stream)
        with torch.cuda.stream(self.side):
            ext.relu_on(x[half:], y[half:], self.side.cuda_stream)
        main.wait_stream(self.side)
        return y
