// dependent_launch_enabled() of dependent_launch_host.cuh.

#include "runtime/model/cuda/dependent_launch_host.cuh"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kbrl::model::cuda {

namespace {

constexpr int max_devices = 64;

/// KBRL_DECODE_PDL=off turns the overlap off everywhere; read once.
bool switched_off() {
  static const bool off = [] {
    const char* choice = std::getenv("KBRL_DECODE_PDL");
    return choice != nullptr && std::strcmp(choice, "off") == 0;
  }();
  return off;
}

} // namespace

bool dependent_launch_enabled() {
  // Per device: 0 not looked up yet, 1 no, 2 yes.
  static std::atomic<int> known[max_devices] = {};
  if (switched_off())
    return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= max_devices) {
    cudaGetLastError(); // not the launch's error
    return false;
  }
  int answer = known[device].load(std::memory_order_relaxed);
  if (answer == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      major = 0;
    }
    answer = major >= 9 ? 2 : 1;
    known[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 2;
}

} // namespace kbrl::model::cuda
