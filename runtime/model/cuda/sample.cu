// The launcher of sample_kernel.cuh for each element type (fused_kernels.hpp).

#include "runtime/model/cuda/element_dispatch.cuh"
#include "runtime/model/cuda/sample_kernel.cuh"

#include <cstdint>

namespace kbrl::model::cuda {

namespace {

template <class T>
cudaError_t launch(const void* logits, int64_t row_stride, int64_t rows, int64_t vocab,
                   const sample_row* settings, float* partials, float* result,
                   cudaStream_t stream) {
  const int64_t slices = sample_slices(vocab);
  sample_slice_kernel<T><<<static_cast<unsigned>(rows * slices), sample_threads, 0, stream>>>(
    static_cast<const T*>(logits), row_stride, vocab, settings, partials, slices);
  if (const auto err = cudaGetLastError(); err != cudaSuccess)
    return err;
  const unsigned threads = 128;
  sample_merge_kernel<T><<<static_cast<unsigned>((rows + threads - 1) / threads), threads, 0,
                           stream>>>(static_cast<const T*>(logits), row_stride, settings,
                                     partials, slices, rows, result);
  return cudaGetLastError();
}

} // namespace

cudaError_t race_sample(element_type type, const void* logits, int64_t row_stride, int64_t rows,
                        int64_t vocab, const sample_row* settings, float* partials, float* result,
                        cudaStream_t stream) {
  if (vocab <= 0 || vocab >= (int64_t{1} << 24) || row_stride < vocab
      || rows * sample_slices(vocab) >= (int64_t{1} << 31))
    return cudaErrorInvalidValue;
  if (rows <= 0)
    return cudaSuccess;
  return for_type(type, [&](auto zero) {
    return launch<decltype(zero)>(logits, row_stride, rows, vocab, settings, partials, result,
                                  stream);
  });
}

} // namespace kbrl::model::cuda
