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
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define threadIdx (emu::thread_index)
#define blockIdx (emu::block_index)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void __syncthreads() { emu::block_barrier.wait(); }
inline float __shfl_xor_sync(unsigned, float v, int offset) {
  // Every thread of the block calls it together (block_sum does): publish, wait, read, wait.
  const unsigned t = threadIdx.x;
  emu::exchange[t] = v;
  emu::block_barrier.wait();
  const float r = emu::exchange[t ^ static_cast<unsigned>(offset)];
  emu::block_barrier.wait();
  return r;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
