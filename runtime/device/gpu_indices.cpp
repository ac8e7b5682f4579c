#include "runtime/device/gpu_indices.hpp"

#include "messages/errors.hpp"

#include <cctype>
#include <cstdio>
#include <set>

namespace kbrl {

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

caf::expected<void> check_gpus(const std::vector<int>& gpus, int visible) {
  const int count = visible;
  if (count <= 0)
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
