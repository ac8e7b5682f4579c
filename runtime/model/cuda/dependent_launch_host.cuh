// The launcher of the decode step's kernels that overlap the kernel before them
// (dependent_launch.cuh says what the kernels must do for it). Included by the .cu launchers
// only: it needs the CUDA runtime's C++ API.

#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace kbrl::model::cuda {

/// Whether kernels launched by launch_dependent() on the current device may start before the
/// previous kernel has finished: compute capability 9.0 or newer and KBRL_DECODE_PDL not "off".
/// Looked up once per device.
bool dependent_launch_enabled();

/// kernel<<<grid, block, 0, stream>>>(args...), with the programmatic stream serialization
/// attribute where dependent_launch_enabled(). Returns the launch's error.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = overlap;
  config.numAttrs = dependent_launch_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

} // namespace kbrl::model::cuda
