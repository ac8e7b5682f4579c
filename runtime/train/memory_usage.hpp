#pragma once
// How much memory the learner holds, for its status: the process's resident memory, and the
// used/total memory of a CUDA device as the CUDA runtime reports it (device-wide: the caching
// allocator's reserve and other processes on the device included).

#include <cstdint>
#include <optional>
#include <utility>

namespace kbrl::train {

/// This process's resident set in bytes, from /proc/self/statm; 0 if unreadable.
int64_t resident_bytes();

/// (used, total) bytes of CUDA device `gpu`, through cudaMemGetInfo of the CUDA runtime that
/// libtorch loaded; nullopt when no CUDA runtime is loaded (CPU builds) or the call fails.
std::optional<std::pair<int64_t, int64_t>> cuda_memory(int gpu);

} // namespace kbrl::train
