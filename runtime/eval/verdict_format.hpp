#pragma once
// An evaluation verdict for people (a few lines) and for scripts (one JSON object).

#include "messages/data.hpp"

#include <string>

namespace kbrl::eval {

/// The verdict as one JSON object: every field of eval_result (runtime/eval/verdict_codec.hpp
/// reads it back).
std::string verdict_json(const eval_result& r);

/// The verdict in a few lines: both verdicts and the speedup ("correct (strict) / KernelBench:
/// correct, 2.31x faster (0.412 ms vs 0.951 ms for the reference)"), the trials, the time
/// coverage and the profiled kernels, the timing check, flags, the error excerpt.
std::string verdict_text(const eval_result& r);

} // namespace kbrl::eval
