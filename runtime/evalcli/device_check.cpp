#include "runtime/evalcli/device_check.hpp"

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

} // namespace kbrl::evalcli
