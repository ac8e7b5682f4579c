#pragma once
// Whether kbrl-eval's evaluators can run the candidates of a backend on the devices it was
// given, checked before anything starts: a CUDA candidate on a CPU evaluator, or --gpu on a
// machine without CUDA, would otherwise fail every sample one by one.

#include <optional>
#include <string>
#include <vector>

namespace kbrl::evalcli {

/// True for the backends whose kernels need a GPU (every one but "torch").
bool backend_needs_gpu(const std::string& backend);

/// What is wrong with evaluating `backend` candidates on `gpus` (the --gpu list; empty: one CPU
/// evaluator) on a machine with `cuda_devices` CUDA devices, in words that say what to do; nullopt
/// when it can work.
std::optional<std::string> device_problem(const std::string& backend, const std::vector<int>& gpus,
                                          int cuda_devices);

/// The machine for results.json and the report: "host NAME, 1 x NVIDIA H100 80GB HBM3 (driver
/// ...), libtorch 2.11.0" (GPUs from nvidia-smi; "no GPU" without one).
std::string machine_description(const std::string& torch_version);

} // namespace kbrl::evalcli
