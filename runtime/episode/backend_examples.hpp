#pragma once
// One short, complete example answer per backend, shown in first-turn prompts so the model sees
// the expected shape of a ModelNew program (KernelBench's prompts do the same).

#include "messages/data.hpp"

#include <string>

namespace kbrl::episode {

/// The example problem (a PyTorch Model) that the examples below solve.
const std::string& example_problem();

/// An example ModelNew for `backend`: the example problem written with that backend.
const std::string& example_answer(kernel_backend backend);

} // namespace kbrl::episode
