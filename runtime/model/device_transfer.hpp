#pragma once
// Small host-to-device copies that do not make the host wait for the device.
//
// libtorch's blocking copy from the host to a CUDA device synchronises the stream afterwards, so
// a decode step that uploads its inputs that way waits for every kernel queued before it. These
// go through pinned memory and copy asynchronously on the current stream instead (the caching
// host allocator keeps the pinned block until the copy has run).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace kbrl::model {

/// `host` (a CPU tensor) on `device`, in stream order on a CUDA device; on the CPU a copy of it.
at::Tensor upload(const at::Tensor& host, at::Device device);

/// `indices` as an int64 tensor on `device` (upload).
at::Tensor upload_indices(const std::vector<int64_t>& indices, at::Device device);

} // namespace kbrl::model
