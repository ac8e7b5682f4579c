// SwiGLU of the fused gate/up projection in one kernel (fused_kernels.hpp): out = silu(gate) *
// up, computed as libtorch's at::silu(gate) * up does it: silu in float32 as
// x / (1 + exp(-x)) and stored in T, then the product of the two T values stored in T.

#include "runtime/model/cuda/device_math.cuh"
#include "runtime/model/cuda/fused_kernels.hpp"

namespace kbrl::model::cuda {

namespace {

template <class T>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows,
                              int64_t width) {
  const int64_t total = rows * width;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t row = i / width, col = i - row * width;
    const T* in = gate_up + row * 2 * width;
    const float g = to_float(in[col]);
    const float silu = round_to<T>(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
    out[i] = from_float<T>(__fmul_rn(silu, to_float(in[width + col])));
  }
}

template <class T>
cudaError_t launch(const void* gate_up, void* out, int64_t rows, int64_t width,
                   cudaStream_t stream) {
  const int64_t total = rows * width;
  if (total <= 0)
    return cudaSuccess;
  constexpr int threads = 256;
  // Enough blocks to fill an H200 several times over; the loop strides over the rest.
  const int64_t wanted = (total + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  swiglu_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(gate_up),
                                                    static_cast<T*>(out), rows, width);
  return cudaGetLastError();
}

} // namespace

cudaError_t swiglu(element_type type, const void* gate_up, void* out, int64_t rows, int64_t width,
                   cudaStream_t stream) {
  switch (type) {
  case element_type::f32:
    return launch<float>(gate_up, out, rows, width, stream);
  case element_type::f16:
    return launch<__half>(gate_up, out, rows, width, stream);
  case element_type::bf16:
    return launch<__nv_bfloat16>(gate_up, out, rows, width, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace kbrl::model::cuda
