#include "runtime/device/devices.hpp"

#include <torch/cuda.h>
#include <torch/version.h>

namespace kbrl {

std::string torch_version() {
  return TORCH_VERSION;
}

int cuda_device_count() {
  return static_cast<int>(torch::cuda::device_count());
}

std::string describe_devices(const std::vector<int>& gpus) {
  auto count = cuda_device_count();
  if (count == 0)
    return gpus.empty() ? "cpu" : "cpu (no CUDA device visible; GPU slots run on the CPU)";
  std::string list;
  for (auto g : gpus)
    list += (list.empty() ? "" : ",") + std::to_string(g);
  return std::to_string(count) + " CUDA device(s) visible"
         + (list.empty() ? std::string{} : ", using gpus " + list);
}

} // namespace kbrl
