#pragma once
// Just enough of the CUDA device model to run runtime/model/cuda/*_kernel.cuh on the CPU: a
// launch runs its blocks one after another, each block's threads as real threads, with a block
// barrier for __syncthreads, __shared__ variables as function statics (one block at a time),
// warp shuffles through an exchange array, and host versions of the float intrinsics. It checks
// the kernels' indexing and control flow where no GPU is at hand (this machine); it says
// nothing about speed, memory ordering between blocks or the device's own rsqrtf/expf.
//
// Include it before the kernel headers; compile with g++ -ffp-contract=off so that host
// arithmetic rounds each step as __fmul_rn / __fadd_rn do.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector_functions.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace emu {

struct index3 {
  unsigned x = 0, y = 0, z = 0;
};

inline thread_local index3 thread_index;
inline index3 block_index; // one block at a time
inline index3 block_dim;
inline index3 grid_dim;

/// A reusable barrier for the threads of one block.
class barrier {
public:
  void reset(int n) {
    n_ = n;
    waiting_ = 0;
    generation_ = 0;
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const auto gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_ = 0, waiting_ = 0;
  unsigned long generation_ = 0;
};

inline barrier block_barrier;
inline std::vector<float> exchange(1024);
inline std::vector<int> int_exchange(1024);

/// Runs `kernel` over grid x block, like kernel<<<grid, block>>>(...).
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
  grid_dim = {grid, 1, 1};
  block_dim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    block_index = {b, 0, 0};
    block_barrier.reset(static_cast<int>(block));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([t, &kernel] {
        thread_index = {t, 0, 0};
        kernel();
      });
    for (auto& th : threads)
      th.join();
  }
}

} // namespace emu

#undef __global__
#undef __host__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __host__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define threadIdx (emu::thread_index)
#define blockIdx (emu::block_index)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void __syncthreads() { emu::block_barrier.wait(); }
namespace emu {
/// __shfl_xor_sync for V: every thread of the block calls it together (block_sum does):
/// publish, wait, read, wait.
template <class V>
V exchange_xor(std::vector<V>& slots, V v, int offset) {
  const unsigned t = threadIdx.x;
  slots[t] = v;
  block_barrier.wait();
  const V r = slots[t ^ static_cast<unsigned>(offset)];
  block_barrier.wait();
  return r;
}
} // namespace emu
inline float __shfl_xor_sync(unsigned, float v, int offset) {
  return emu::exchange_xor(emu::exchange, v, offset);
}
inline int __shfl_xor_sync(unsigned, int v, int offset) {
  return emu::exchange_xor(emu::int_exchange, v, offset);
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

// The tensor-core instructions of runtime/model/cuda/warp_mma.cuh as warp collectives: every
// thread of the block calls them together (the MMA kernel's warps run the same rounds); each
// publishes its fragment registers, waits, computes its own outputs from its warp's 32 lanes in
// float (products of 16-bit values are exact; the sum runs in k order from the accumulator),
// and waits again.
#define KBRL_EMULATED_DEVICE 1

namespace emu {

inline std::vector<unsigned> fragments(1024 * 6);
inline std::vector<float> accumulators(1024 * 4);

inline float widen(__half v) { return __half2float(v); }
inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

/// Element `half` (0: bits 0-15) of a fragment register as float, the register holding T.
template <class T>
float element_of(unsigned reg, int half) {
  const unsigned short bits = static_cast<unsigned short>(half ? reg >> 16 : reg & 0xffffu);
  T v;
  std::memcpy(&v, &bits, 2);
  return widen(v);
}

} // namespace emu

namespace kbrl::model::cuda {

template <class T>
inline void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const unsigned t = threadIdx.x, lane = t & 31, warp0 = t - lane;
  for (int i = 0; i < 4; ++i)
    emu::fragments[t * 6 + i] = a[i];
  emu::fragments[t * 6 + 4] = b[0];
  emu::fragments[t * 6 + 5] = b[1];
  emu::block_barrier.wait();
  // A[m][k]: lane 4 (m % 8) + (k % 8) / 2, register (m / 8) + 2 (k / 8), half k % 2
  auto a_at = [&](int m, int k) {
    const unsigned l = 4 * (m % 8) + (k % 8) / 2;
    return emu::element_of<T>(emu::fragments[(warp0 + l) * 6 + (m / 8) + 2 * (k / 8)], k % 2);
  };
  // B[k][n]: lane 4 n + (k % 8) / 2, register 4 + k / 8, half k % 2
  auto b_at = [&](int k, int n) {
    const unsigned l = 4 * n + (k % 8) / 2;
    return emu::element_of<T>(emu::fragments[(warp0 + l) * 6 + 4 + k / 8], k % 2);
  };
  const int g = static_cast<int>(lane / 4), tq = static_cast<int>(lane % 4);
  float result[4];
  for (int r = 0; r < 4; ++r) {
    const int m = g + 8 * (r / 2), n = 2 * tq + r % 2;
    float sum = d[r];
    for (int k = 0; k < 16; ++k)
      sum += a_at(m, k) * b_at(k, n);
    result[r] = sum;
  }
  emu::block_barrier.wait();
  for (int r = 0; r < 4; ++r)
    d[r] = result[r];
}

inline unsigned transpose_8x8(unsigned x) {
  const unsigned t = threadIdx.x, lane = t & 31, warp0 = t - lane;
  emu::fragments[t * 6] = x;
  emu::block_barrier.wait();
  // row g, columns 2 tq and 2 tq + 1 of the transpose: M[2 tq][g] and M[2 tq + 1][g], where
  // M[r][c] is lane 4 r + c / 2, half c % 2
  const unsigned g = lane / 4, tq = lane % 4;
  auto at = [&](unsigned r, unsigned c) {
    const unsigned reg = emu::fragments[(warp0 + 4 * r + c / 2) * 6];
    return (c % 2) ? reg >> 16 : reg & 0xffffu;
  };
  const unsigned y = at(2 * tq, g) | (at(2 * tq + 1, g) << 16);
  emu::block_barrier.wait();
  return y;
}

} // namespace kbrl::model::cuda
