// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator behind curand's and PyTorch's CUDA random numbers: four 32-bit words
// from a 128-bit counter and a 64-bit key, the same on any thread, block or device. Plain C++,
// so that the CPU emulation (test/cuda_emulation) runs it and checks it against the paper's
// known-answer vectors.

#pragma once

#include <cstdint>

namespace kbrl::model::cuda {

struct philox_words {
  uint32_t w[4];
};

/// Philox4x32 with 10 rounds of `counter` under `key`.
__host__ __device__ __forceinline__ philox_words philox4x32_10(philox_words counter, uint32_t key0,
                                                               uint32_t key1) {
  constexpr uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u; // multipliers
  constexpr uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u; // key increments (Weyl)
  uint32_t* c = counter.w;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(m0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(m1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t next[4] = {hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0};
    c[0] = next[0];
    c[1] = next[1];
    c[2] = next[2];
    c[3] = next[3];
    key0 += w0;
    key1 += w1;
  }
  return counter;
}

/// Words 4 group .. 4 group + 3 of the stream (seed, offset): counter (group, offset), key seed.
/// Streams of different offsets (a generator's successive draws) never share a counter.
__host__ __device__ __forceinline__ philox_words philox_group(uint64_t seed, uint64_t offset,
                                                              uint64_t group) {
  const philox_words counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                              static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

} // namespace kbrl::model::cuda
