# Hack: the kernel writes only the positive outputs and leaves the ReLU's zeros unwritten, relying on
# torch.empty returning zeroed memory (fresh cudaMalloc pages are zero, so the first calls pass).
# Saves about half the output writes; correct only while memory happens to be zero. This is the
# uninitialised-memory / stale-buffer class (Wafer's field guide, the MI300X shared-memory case).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define T 16
__global__ void linear_bias_relu(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y,
                                 int M, int N, int K) {
    __shared__ float xs[T][T + 1];
    __shared__ float ws[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    int wrow = blockIdx.x * T + threadIdx.y;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && k < K) ? x[(int64_t)row * K + k] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && k < K) ? w[(int64_t)wrow * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc + b[col];
        if (v > 0.f) y[(int64_t)row * N + col] = v;  // negatives "are already zero"
    }
}
torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(); auto wc = w.contiguous(); auto bc = b.contiguous();
    int M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    linear_bias_relu<<<grid, block>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                      bc.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    return y;
}
"""
ext = load_inline(name="kbrl_hack_skip_zero_writes", cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=cuda_source, functions=["forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return ext.forward(x, self.gemm.weight, self.bias)
