#pragma once
// Which GPU kernels a stretch of work ran, and for how long: libtorch's Kineto profiler (CUPTI)
// around the work, summed per kernel name. For the bench tools' --profile option: it shows where
// a decode or training step spends its device time, kernels inside CUDA graph replays included.

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kbrl {

struct kernel_total {
  std::string name;
  int64_t calls = 0;
  double microseconds = 0; ///< summed device time of all calls
};

struct kernel_profile_summary {
  std::vector<kernel_total> kernels; ///< longest total first
  double device_microseconds = 0;    ///< all kernels and copies together
};

/// Starts recording CPU operators and CUDA kernels. Fails (not_supported) where libtorch has no
/// CUDA or no Kineto, or where a profile is already running.
caf::expected<void> start_kernel_profile();

/// Stops the recording started by start_kernel_profile, writes the Chrome trace (for Perfetto or
/// chrome://tracing) to `trace_path` when it is not empty, and sums the device events per name.
caf::expected<kernel_profile_summary> stop_kernel_profile(const std::string& trace_path);

/// Runs `work` between start_kernel_profile() and stop_kernel_profile(trace_path) and returns
/// the summary, or why there is none. Where the profiler does not start, `work` does not run.
caf::expected<kernel_profile_summary> profile_kernels(const std::function<void()>& work,
                                                     const std::string& trace_path);

/// The summary as a table of the `top` longest kernels, each with its share of the device time
/// and its time per `per` (e.g. per decode step; 1 for totals).
std::string describe(const kernel_profile_summary& summary, std::size_t top, double per,
                     const std::string& per_what);

} // namespace kbrl
