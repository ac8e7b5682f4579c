#include "runtime/model/load_policy.hpp"

namespace kbrl::model {

transformer_options placement_options(const policy_placement& p) {
  transformer_options opts;
  opts.dtype = p.dtype == "fp32" ? at::kFloat : at::kBFloat16;
  if (p.gpu >= 0)
    opts.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(p.gpu));
  return opts;
}

caf::expected<transformer> load_policy(const std::string& model_ref,
                                       const policy_placement& placement) {
  auto dir = resolve_policy_dir(model_ref);
  if (!dir)
    return dir.error();
  return transformer::load(*dir, placement_options(placement));
}

} // namespace kbrl::model
