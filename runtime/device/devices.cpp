#include "runtime/device/devices.hpp"

#include "messages/errors.hpp"

#include <torch/cuda.h>

#include <cctype>
#include <cstdio>
#include <set>
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

std::string detect_cuda_arch_list() {
  std::set<std::string> caps;
  if (FILE* p = ::popen("nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null",
                        "r")) {
    char line[64];
    while (std::fgets(line, sizeof line, p) != nullptr) {
      std::string cap = line;
      while (!cap.empty() && std::isspace(static_cast<unsigned char>(cap.back())))
        cap.pop_back();
      if (!cap.empty() && std::isdigit(static_cast<unsigned char>(cap[0])))
        caps.insert(cap);
    }
    ::pclose(p);
  }
  std::string out;
  for (auto& c : caps)
    out += (out.empty() ? "" : ";") + c;
  return out;
}

caf::expected<void> check_gpus(const std::vector<int>& gpus) {
  auto count = cuda_device_count();
  if (count == 0)
    return caf::unit;
  for (auto g : gpus)
    if (g < 0 || g >= count)
      return make_error(errc::invalid_argument,
                        "gpu " + std::to_string(g) + " requested, but this machine has "
                          + std::to_string(count) + " CUDA device(s) (indices 0.."
                          + std::to_string(count - 1) + ")");
  return caf::unit;
}

} // namespace kbrl
