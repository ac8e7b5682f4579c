#pragma once
// What compute this process can see, through libtorch: its version and the CUDA devices.
// Kept out of node code so only this file pays for torch headers.

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl {

/// libtorch's version, e.g. "1.13.0" or "2.11.0".
std::string torch_version();

/// Number of CUDA devices visible (0 on a CPU-only build or machine).
int cuda_device_count();

/// A short description for status and logs: "cpu" or "2 CUDA devices (gpus 0,1)".
std::string describe_devices(const std::vector<int>& gpus);

/// The compute capabilities of this machine's GPUs as TORCH_CUDA_ARCH_LIST wants them ("9.0",
/// or "8.0;9.0"), from nvidia-smi; empty when there is none.
std::string detect_cuda_arch_list();

/// Checks that every requested GPU index exists. With no CUDA device at all the slots run on the
/// CPU (tests, laptops) and this succeeds; with devices, an index past the last one is an error
/// naming the index and the count.
caf::expected<void> check_gpus(const std::vector<int>& gpus);

} // namespace kbrl
