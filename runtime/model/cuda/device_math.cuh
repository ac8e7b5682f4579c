#pragma once
// Device helpers shared by the fused kernels: conversions between the element types and float32
// (round to nearest even, as c10::BFloat16 and c10::Half convert), and a block-wide sum.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kbrl::model::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// x rounded to T and widened again: the value a libtorch op in dtype T would have stored.
template <class T>
__device__ __forceinline__ float round_to(float x) { return to_float(from_float<T>(x)); }

/// The sum of `v` over the block, returned to every thread. blockDim.x must be a multiple of 32
/// (threads without work pass 0) and at most 1024; `scratch` holds 32 floats. Every thread of the
/// block must call it, and only once per kernel (scratch is not re-synchronised for a second use).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// sizeof(Raw) bytes of T (uint4: 16, uint2: 8), fetched in one load and widened to float one
/// element at a time.
template <class T, class Raw>
struct packed_elements {
  using raw = Raw;
  static constexpr int size = sizeof(Raw) / sizeof(T);
  __device__ __forceinline__ static Raw fetch(const T* p) {
    return *reinterpret_cast<const Raw*>(p);
  }
  __device__ __forceinline__ static float element(const Raw& raw, int i) {
    return to_float(reinterpret_cast<const T*>(&raw)[i]);
  }
};

template <class T>
using vector16 = packed_elements<T, uint4>;
template <class T>
using vector8 = packed_elements<T, uint2>;

/// Blocks for an elementwise kernel of 256 threads over `n` elements: enough to fill an H200
/// several times over; the kernels' grid-stride loops take the rest.
inline unsigned elementwise_blocks(long long n) {
  const long long wanted = (n + 255) / 256;
  return static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
}

/// `n` rounded up to a multiple of 32, at least 32 and at most `cap` (a multiple of 32).
__host__ __device__ inline int warp_multiple(long long n, int cap) {
  long long t = (n + 31) / 32 * 32;
  if (t < 32)
    t = 32;
  return static_cast<int>(t > cap ? cap : t);
}

} // namespace kbrl::model::cuda
