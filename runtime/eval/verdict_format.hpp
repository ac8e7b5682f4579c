#pragma once
// An evaluation verdict for people (a few lines) and for scripts (one JSON object).

#include "messages/data.hpp"

#include <string>

namespace kbrl::eval {

/// The verdict as one JSON object: every field of eval_result.
std::string verdict_json(const eval_result& r);

/// The verdict in a few lines: "correct, 2.31x faster (0.412 ms vs 0.951 ms)", trials, flags,
/// the error excerpt.
std::string verdict_text(const eval_result& r);

} // namespace kbrl::eval
