#pragma once
// Just enough of the CUDA device model to run runtime/model/cuda/*_kernel.cuh on the CPU: a
// launch runs its blocks one after another, each block's threads as fibers (ucontext) taking
// turns on this one OS thread: a thread runs until it reaches __syncthreads (or a warp
// collective, which synchronises the block here), then the next one runs; when all have
// arrived, all go on. __shared__ variables are function statics (one block at a time), warp
// shuffles go through an exchange array, and the float intrinsics have host versions. It checks
// the kernels' indexing and control flow where no GPU is at hand (this machine); it says
// nothing about speed, memory ordering between blocks or the device's own rsqrtf/expf. A missing
// barrier shows only where a lower thread reads what a higher one writes (threads run in index
// order between barriers). Fibers, not OS threads: a block barrier is then a few context
// switches instead of waking 128-256 threads on two cores (the test took 484 s that way).
//
// Include it before the kernel headers; compile with g++ -ffp-contract=off so that host
// arithmetic rounds each step as __fmul_rn / __fadd_rn do.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector_functions.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <ucontext.h>

namespace emu {

struct index3 {
  unsigned x = 0, y = 0, z = 0;
};

inline index3 thread_index; // the thread (fiber) running now
inline index3 block_index;  // one block at a time
inline index3 block_dim;
inline index3 grid_dim;

/// The threads of the block being run, as fibers, and the scheduler that switches among them.
struct block_fibers {
  enum class state : char { runnable, at_barrier, finished };
  static constexpr size_t stack_bytes = 256 * 1024;
  std::vector<ucontext_t> contexts;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<state> states;
  ucontext_t scheduler;
  unsigned current = 0;
  const std::function<void()>* kernel = nullptr;
};
inline block_fibers fibers;

inline void fiber_main() {
  (*fibers.kernel)();
  fibers.states[fibers.current] = block_fibers::state::finished; // uc_link resumes the scheduler
}

/// __syncthreads: this thread waits until every thread of the block has arrived.
inline void block_sync() {
  const unsigned t = fibers.current;
  fibers.states[t] = block_fibers::state::at_barrier;
  swapcontext(&fibers.contexts[t], &fibers.scheduler);
}

/// Runs one block: every thread up to its next barrier, round after round, until all finish.
/// A thread that finishes while others wait at a barrier would hang a GPU: it stops the run.
inline void run_block(unsigned block) {
  using st = block_fibers::state;
  for (unsigned t = 0; t < block; ++t) {
    auto& c = fibers.contexts[t];
    getcontext(&c);
    c.uc_stack.ss_sp = fibers.stacks[t].get();
    c.uc_stack.ss_size = block_fibers::stack_bytes;
    c.uc_link = &fibers.scheduler;
    makecontext(&c, fiber_main, 0);
    fibers.states[t] = st::runnable;
  }
  for (;;) {
    unsigned waiting = 0, finished = 0;
    for (unsigned t = 0; t < block; ++t) {
      if (fibers.states[t] == st::finished) {
        ++finished;
        continue;
      }
      fibers.states[t] = st::runnable;
      fibers.current = t;
      thread_index = {t, 0, 0};
      swapcontext(&fibers.scheduler, &fibers.contexts[t]);
      if (fibers.states[t] == st::at_barrier)
        ++waiting;
      else
        ++finished;
    }
    if (waiting == 0)
      return;
    if (finished > 0) {
      std::fprintf(stderr, "emulated device: block %u: %u thread(s) finished while %u wait at a "
                           "barrier (a hang on a GPU)\n", block_index.x, finished, waiting);
      std::abort();
    }
  }
}

inline std::vector<float> exchange(1024);
inline std::vector<int> int_exchange(1024);

/// Runs `kernel` over grid x block, like kernel<<<grid, block>>>(...).
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
  grid_dim = {grid, 1, 1};
  block_dim = {block, 1, 1};
  fibers.contexts.resize(block);
  fibers.states.resize(block);
  while (fibers.stacks.size() < block)
    fibers.stacks.emplace_back(new char[block_fibers::stack_bytes]);
  fibers.kernel = &kernel;
  for (unsigned b = 0; b < grid; ++b) {
    block_index = {b, 0, 0};
    run_block(block);
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

inline void __syncthreads() { emu::block_sync(); }
namespace emu {
/// __shfl_xor_sync for V: every thread of the block calls it together (block_sum does):
/// publish, wait, read, wait.
template <class V>
V exchange_xor(std::vector<V>& slots, V v, int offset) {
  const unsigned t = threadIdx.x;
  slots[t] = v;
  block_sync();
  const V r = slots[t ^ static_cast<unsigned>(offset)];
  block_sync();
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
  emu::block_sync();
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
  emu::block_sync();
  for (int r = 0; r < 4; ++r)
    d[r] = result[r];
}

inline unsigned transpose_8x8(unsigned x) {
  const unsigned t = threadIdx.x, lane = t & 31, warp0 = t - lane;
  emu::fragments[t * 6] = x;
  emu::block_sync();
  // row g, columns 2 tq and 2 tq + 1 of the transpose: M[2 tq][g] and M[2 tq + 1][g], where
  // M[r][c] is lane 4 r + c / 2, half c % 2
  const unsigned g = lane / 4, tq = lane % 4;
  auto at = [&](unsigned r, unsigned c) {
    const unsigned reg = emu::fragments[(warp0 + 4 * r + c / 2) * 6];
    return (c % 2) ? reg >> 16 : reg & 0xffffu;
  };
  const unsigned y = at(2 * tq, g) | (at(2 * tq + 1, g) << 16);
  emu::block_sync();
  return y;
}

} // namespace kbrl::model::cuda
