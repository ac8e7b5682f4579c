#pragma once
// Which GPUs a node may use and what they are, without libtorch (devices.hpp asks torch how many
// there are): the node's plan checks its --gpu list with these.

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl {

/// The compute capabilities of this machine's GPUs as TORCH_CUDA_ARCH_LIST wants them ("9.0",
/// or "8.0;9.0"), from nvidia-smi; empty when there is none.
std::string detect_cuda_arch_list();

/// Checks that every requested GPU index exists among `visible` CUDA devices. With none at all
/// (visible == 0) the slots run on the CPU (tests, laptops) and this succeeds; with devices, an
/// index past the last one is an error naming the index and the count.
caf::expected<void> check_gpus(const std::vector<int>& gpus, int visible);

} // namespace kbrl
