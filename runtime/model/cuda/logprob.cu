// The launcher of logprob_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/element_dispatch.cuh"
#include "runtime/model/cuda/logprob_kernel.cuh"

#include <cstdint>

namespace kbrl::model::cuda {

namespace {

template <class T>
cudaError_t launch(void* logits, const int64_t* targets, float* out, int64_t rows, int64_t vocab,
                   float temperature, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0)
    return cudaSuccess;
  const bool vectorized = vocab % vector16<T>::size == 0
                          && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0;
  const unsigned blocks = static_cast<unsigned>(rows < 65536 ? rows : 65536);
  token_logprob_gradient_kernel<T><<<blocks, 512, 0, stream>>>(
    static_cast<T*>(logits), targets, out, rows, vocab, temperature, vectorized);
  return cudaGetLastError();
}

} // namespace

cudaError_t token_logprob_gradient(element_type type, void* logits, const int64_t* targets,
                                   float* out, int64_t rows, int64_t vocab, float temperature,
                                   cudaStream_t stream) {
  if (!(temperature > 0.0f))
    return cudaErrorInvalidValue;
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(logits, targets, out, rows, vocab, temperature, stream);
  });
}

} // namespace kbrl::model::cuda
