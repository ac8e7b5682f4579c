#include "runtime/model/policy_dir.hpp"

#include "runtime/hub/resolve_model.hpp"

namespace kbrl::model {

caf::expected<std::filesystem::path> resolve_policy_dir(const std::string& model_ref) {
  return hub::resolve_model(model_ref, hub::hub_options_from_environment());
}

} // namespace kbrl::model
