// Warp-wide tensor-core instructions for the decode-attention MMA kernel, as inline PTX (sm_80
// and newer), and the bit packing of two 16-bit elements into one register that their
// fragments use. test/cuda_emulation/emulated_device.hpp defines KBRL_EMULATED_DEVICE and its
// own host versions of mma_16816 and transpose_8x8 (warp collectives over the lanes' registers).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 g + t:
//   A (16 x 16, row-major): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
//                           a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, "col"):      b0 = B[2t, 2t+1][g],  b1 = B[2t+8, 2t+9][g]
//   C, D (16 x 8, float):   c0, c1 = C[g][2t, 2t+1],  c2, c3 = C[g+8][2t, 2t+1]
// (two elements in one register: the lower index in the low 16 bits).

#pragma once

#include "runtime/model/cuda/device_math.cuh"

#include <cstdint>
#include <type_traits>

namespace kbrl::model::cuda {

/// The 16-bit pattern of an element of T (__half or __nv_bfloat16).
template <class T>
__device__ __forceinline__ uint32_t bits_of(T v) {
  return *reinterpret_cast<const unsigned short*>(&v);
}

/// One register of two 16-bit elements: `low` in bits 0-15, `high` in bits 16-31.
__device__ __forceinline__ uint32_t pack_halves(uint32_t low, uint32_t high) {
  return (low & 0xffffu) | (high << 16);
}

/// Two floats rounded to T and packed (the lower index first), as fragments hold them.
template <class T>
__device__ __forceinline__ uint32_t pack_rounded(float low, float high) {
  return pack_halves(bits_of(from_float<T>(low)), bits_of(from_float<T>(high)));
}

/// Element i (0-7) of eight 16-bit elements loaded as one uint4, in its register's low bits.
__device__ __forceinline__ uint32_t element_bits(const uint4& v, int i) {
  const uint32_t word = (i >> 1) == 0 ? v.x : (i >> 1) == 1 ? v.y : (i >> 1) == 2 ? v.z : v.w;
  return (i & 1) ? word >> 16 : word & 0xffffu;
}

/// Register w (0-3) of a uint4: elements 2w and 2w + 1.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

#ifndef KBRL_EMULATED_DEVICE

/// d += a b for a 16 x 16 A and 16 x 8 B of T (__half or __nv_bfloat16), float accumulators.
/// Every lane of the warp calls it together.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap(); // launchers check the binary's architecture first (decode_attention.cu)
#endif
}

/// The transpose of an 8 x 8 matrix of 16-bit elements held as m8n8 fragments (lane 4 g + t
/// holds row g, columns 2t and 2t + 1): afterwards the lane holds row g of the transpose.
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
#else
  __trap();
  return x;
#endif
}

#endif // KBRL_EMULATED_DEVICE

} // namespace kbrl::model::cuda
