#pragma once
// Where a role finds its policy model, without torch (load_policy.hpp loads it).

#include <caf/expected.hpp>

#include <filesystem>
#include <string>

namespace kbrl::model {

/// The local directory of `model_ref` (a directory, or a hub id downloaded into the Hugging
/// Face cache as the environment configures it).
caf::expected<std::filesystem::path> resolve_policy_dir(const std::string& model_ref);

} // namespace kbrl::model
