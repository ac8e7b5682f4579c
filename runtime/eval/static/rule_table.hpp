#pragma once
// The rules of the static checks: ids, default severities, where each applies, and why. The
// order is the order of all_rules(): KernelBench's rules first, then kbrl's.
//
// A rule's default is `error` only where the construct has no honest use in a candidate; rules
// that honest kernels trigger (or that only concern spelling) default to `warning`, because the
// runtime checks of the evaluation process carry the hard decisions (runtime/eval/STATIC_RULES.md
// lists every rule, its default and the honest code behind each warning).

#include "messages/data.hpp"
#include "runtime/eval/static_checks.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kbrl::eval::static_impl {

/// When a rule is evaluated at all.
enum class applies_to : uint8_t {
  always,
  kernel_backends, ///< every backend but torch
  fp32,            ///< fp32 problems only
  cuda,
  hip,
  triton,
  thunderkittens,
  cute,
  tilelang,
  launched, ///< cuda, hip and triton: backends whose kernels kbrl can follow from forward
};

struct rule_def {
  const char* id;
  severity level; ///< the default (patterns marked `suspect` report at most a warning)
  applies_to when;
  const char* description;
};

/// Every rule, in all_rules() order.
const rule_def* rule_defs();

/// How many rules there are.
size_t rule_count();

/// The index of a rule in rule_defs(), or rule_count() when there is none.
size_t rule_index(std::string_view id);

/// Whether a rule runs for this backend and precision.
bool rule_applies(applies_to when, kernel_backend backend, kernel_precision precision);

} // namespace kbrl::eval::static_impl
