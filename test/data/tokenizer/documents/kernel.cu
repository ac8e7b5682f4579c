// Tiled matrix multiply with shared memory and a vectorised epilogue.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdio>

#define CUDA_CHECK(expr)                                                        \
  do {                                                                          \
    cudaError_t err_ = (expr);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                   \
                   cudaGetErrorString(err_));                                   \
      return err_;                                                              \
    }                                                                           \
  } while (0)

constexpr int TILE = 32;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
	for (int offset = 16; offset > 0; offset >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, offset);
	return v;
}

__global__ void matmul_tiled(const half* __restrict__ A, const half* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];   // +1 avoids bank conflicts
    __shared__ float Bs[TILE][TILE + 1];

    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;

    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int a_col = t * TILE + threadIdx.x;
        int b_row = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && a_col < K) ? __half2float(A[row * K + a_col]) : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (b_row < K && col < N) ? __half2float(B[b_row * N + col]) : 0.f;
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TILE; ++k)
            acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

__global__ void softmax_rows(const float* x, float* y, int cols) {
  extern __shared__ float buf[];
  const float* in = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, in[i]);
  buf[threadIdx.x] = m;  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  m = buf[0];
  float sum = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += __expf(in[i] - m);
  sum = warp_sum(sum);
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    y[blockIdx.x * cols + i] = __expf(in[i] - m) / sum;
}

cudaError_t launch(const half* A, const half* B, float* C, int M, int N, int K, cudaStream_t s) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block, 0, s>>>(A, B, C, M, N, K);
    CUDA_CHECK(cudaGetLastError());
    return cudaSuccess;
}
