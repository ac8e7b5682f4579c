#include "runtime/device/kernel_profile.hpp"

#include "messages/errors.hpp"

#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <map>

// CMakeLists.txt defines KBRL_WITH_CUDA=1 for a libtorch with CUDA. The Kineto entry points used
// here have this shape from libtorch 2.0 on; the CPU-only 1.13 build reports "not supported".
#ifndef KBRL_WITH_CUDA
#define KBRL_WITH_CUDA 0
#endif
#if KBRL_WITH_CUDA && TORCH_VERSION_MAJOR >= 2 && __has_include(<torch/csrc/autograd/profiler_kineto.h>)
#define KBRL_KERNEL_PROFILE 1
#include <torch/csrc/autograd/profiler_kineto.h>
#else
#define KBRL_KERNEL_PROFILE 0
#endif

namespace kbrl {

#if KBRL_KERNEL_PROFILE

namespace {
namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

bool running = false;

// Newer libtorch reports durations in nanoseconds (durationNs), older in microseconds.
template <typename Event>
auto duration_us(const Event& e, int) -> decltype(e.durationNs(), double()) {
  return static_cast<double>(e.durationNs()) / 1000.0;
}
template <typename Event>
double duration_us(const Event& e, long) {
  return static_cast<double>(e.durationUs());
}

const std::set<impl::ActivityType>& activities() {
  static const std::set<impl::ActivityType> both{impl::ActivityType::CPU, impl::ActivityType::CUDA};
  return both;
}
} // namespace

caf::expected<void> start_kernel_profile() {
  if (running)
    return make_error(errc::not_supported, "a kernel profile is already running");
  try {
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    prof::prepareProfiler(config, activities());
    prof::enableProfiler(config, activities());
  } catch (const std::exception& e) {
    return make_error(errc::not_supported, std::string("the Kineto profiler did not start: ")
                                             + e.what());
  }
  running = true;
  return {};
}

caf::expected<kernel_profile_summary> stop_kernel_profile(const std::string& trace_path) {
  if (!running)
    return make_error(errc::not_supported, "no kernel profile is running");
  running = false;
  std::unique_ptr<prof::ProfilerResult> result;
  try {
    result = prof::disableProfiler();
    if (!trace_path.empty())
      result->save(trace_path);
  } catch (const std::exception& e) {
    return make_error(errc::io_failure, std::string("the Kineto profiler failed: ") + e.what());
  }
  std::map<std::string, kernel_total> by_name;
  kernel_profile_summary out;
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA)
      continue;
    auto& total = by_name[event.name()];
    total.name = event.name();
    total.calls += 1;
    const double us = duration_us(event, 0);
    total.microseconds += us;
    out.device_microseconds += us;
  }
  for (auto& [name, total] : by_name)
    out.kernels.push_back(std::move(total));
  std::sort(out.kernels.begin(), out.kernels.end(),
            [](const auto& a, const auto& b) { return a.microseconds > b.microseconds; });
  return out;
}

#else

caf::expected<void> start_kernel_profile() {
  return make_error(errc::not_supported, "kernel profiles need a libtorch >= 2.0 with CUDA and "
                                         "Kineto; this build has none");
}

caf::expected<kernel_profile_summary> stop_kernel_profile(const std::string&) {
  return make_error(errc::not_supported, "no kernel profile is running");
}

#endif

caf::expected<kernel_profile_summary> profile_kernels(const std::function<void()>& work,
                                                     const std::string& trace_path) {
  if (auto started = start_kernel_profile(); !started)
    return started.error();
  work();
  return stop_kernel_profile(trace_path);
}

std::string describe(const kernel_profile_summary& summary, std::size_t top, double per,
                     const std::string& per_what) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "device time %.3f ms in all, %.1f us per %s\n",
                summary.device_microseconds / 1000.0, summary.device_microseconds / per,
                per_what.c_str());
  out += line;
  std::snprintf(line, sizeof line, "  %8s %10s %7s %6s  %s\n", "calls", "us per " , "us/call",
                "share", "kernel");
  out += line;
  for (std::size_t i = 0; i < summary.kernels.size() && i < top; ++i) {
    const auto& k = summary.kernels[i];
    std::string name = k.name.size() > 110 ? k.name.substr(0, 107) + "..." : k.name;
    std::snprintf(line, sizeof line, "  %8lld %10.1f %7.2f %5.1f%%  %s\n",
                  static_cast<long long>(k.calls), k.microseconds / per,
                  k.microseconds / static_cast<double>(std::max<int64_t>(1, k.calls)),
                  100.0 * k.microseconds / std::max(1.0, summary.device_microseconds), name.c_str());
    out += line;
  }
  return out;
}

} // namespace kbrl
