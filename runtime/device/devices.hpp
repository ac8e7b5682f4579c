#pragma once
// What compute this process can see, through libtorch: its version and the CUDA devices.
// Kept out of node code so only this file pays for torch headers; gpu_indices.hpp checks a
// node's --gpu list against the count without torch.

#include "runtime/device/gpu_indices.hpp"

#include <string>
#include <vector>

namespace kbrl {

/// libtorch's version, e.g. "1.13.0" or "2.11.0".
std::string torch_version();

/// Number of CUDA devices visible (0 on a CPU-only build or machine).
int cuda_device_count();

/// A short description for status and logs: "cpu" or "2 CUDA devices (gpus 0,1)".
std::string describe_devices(const std::vector<int>& gpus);

} // namespace kbrl
