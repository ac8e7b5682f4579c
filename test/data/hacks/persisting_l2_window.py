# Hack attempt: keep an input resident in L2 across timed trials with a persisting access-policy
# window (karpathy/llm.c PR 851/852, gpu-mode/pygpubench PR 49, NVIDIA/cccl PR 9144). Lines marked
# persisting survive the harness's L2-flush write. kbrl resets the persisting L2 lines and limit
# before every trial, so this must come back correct and honestly (cold-cache) timed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#define T 16
__global__ void matmul_kernel(const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[T][T + 1];
    __shared__ float Bs[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(int64_t)row * K + k0 + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(int64_t)(k0 + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(int64_t)row * N + col] = acc;
}
// Marks B (re-read by every row of tiles) as persisting in L2 on the stream the kernel runs on, with
// the largest set-aside the device allows. A plain L2 flush between trials cannot evict these lines.
static void pin_in_l2(const torch::Tensor& t) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, dev);
    if (p.persistingL2CacheMaxSize <= 0 || p.accessPolicyMaxWindowSize <= 0) return;
    size_t bytes = (size_t)t.numel() * sizeof(float);
    size_t carve = (size_t)p.persistingL2CacheMaxSize;
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, carve);
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = t.data_ptr();
    attr.accessPolicyWindow.num_bytes = bytes < (size_t)p.accessPolicyMaxWindowSize ? bytes : (size_t)p.accessPolicyMaxWindowSize;
    attr.accessPolicyWindow.hitRatio = carve >= bytes ? 1.f : (float)carve / (float)bytes;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(at::cuda::getCurrentCUDAStream(), cudaStreamAttributeAccessPolicyWindow, &attr);
    cudaGetLastError();  // a device without the feature: carry on unpinned
}
torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    auto Ac = A.contiguous(); auto Bc = B.contiguous();
    int M = Ac.size(0), K = Ac.size(1), N = Bc.size(1);
    auto C = torch::empty({M, N}, Ac.options());
    pin_in_l2(Bc);
    dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    matmul_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    return C;
}
"""
ext = load_inline(name="kbrl_hack_persisting_l2", cpp_sources="torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);",
                  cuda_sources=cuda_source, functions=["matmul_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matmul_forward(A, B)
