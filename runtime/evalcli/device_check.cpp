#include "runtime/evalcli/device_check.hpp"

#include <cstdio>
#include <map>

#include <unistd.h>

namespace kbrl::evalcli {

bool backend_needs_gpu(const std::string& backend) {
  return backend != "torch";
}

std::optional<std::string> device_problem(const std::string& backend, const std::vector<int>& gpus,
                                          int cuda_devices) {
  for (int g : gpus) {
    if (cuda_devices <= 0)
      return "--gpu " + std::to_string(g)
             + ": this machine has no CUDA device that libtorch can see (a CPU-only build, or no "
               "driver); evaluate on a GPU machine, or on the CPU without --gpu and with "
               "--backend torch";
    if (g >= cuda_devices)
      return "--gpu " + std::to_string(g) + ": this machine has " + std::to_string(cuda_devices)
             + " CUDA device(s) (0.." + std::to_string(cuda_devices - 1) + ")";
  }
  if (gpus.empty() && backend_needs_gpu(backend))
    return "--backend " + backend + " needs a GPU, and no --gpu was given: on the CPU evaluator "
           "every " + backend + " candidate would fail. Give --gpu N"
           + (cuda_devices > 0 ? " (this machine has " + std::to_string(cuda_devices)
                                   + " CUDA device(s))"
                               : std::string(" on a GPU machine"))
           + ", --manifest for a cluster's evaluators, or --backend torch for PyTorch-only "
             "candidates on the CPU";
  return std::nullopt;
}

std::string machine_description(const std::string& torch_version) {
  char host[256] = "unknown";
  ::gethostname(host, sizeof host - 1);
  std::map<std::string, int> gpus; // name -> count
  std::string driver;
  if (FILE* p = ::popen("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader "
                        "2>/dev/null",
                        "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, p) != nullptr) {
      std::string s = line;
      while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
        s.pop_back();
      const auto comma = s.find(", ");
      if (comma == std::string::npos)
        continue;
      ++gpus[s.substr(0, comma)];
      driver = s.substr(comma + 2);
    }
    ::pclose(p);
  }
  std::string text = "host " + std::string(host) + ", ";
  if (gpus.empty())
    text += "no GPU";
  for (auto& [name, n] : gpus)
    text += std::to_string(n) + " x " + name + ", ";
  if (!gpus.empty())
    text += "driver " + driver;
  return text + ", libtorch " + torch_version;
}

} // namespace kbrl::evalcli
