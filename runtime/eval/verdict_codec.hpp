#pragma once
// The one verdict codec (issue 17): eval_result fields read from a JSON object. The worker's
// `evaluate` answer (worker_protocol.md) and eval::verdict_json() (kbrl-eval-kernel --json, the
// turn logs of kbrl-eval) use the same field names, so both are read here:
//   eval_engine          the worker's answer (then adds what only it knows: cached reference
//                        timings, the speedup, the device, eval.correctness)
//   evalcli::turn_log    a logged turn's verdict_json() text, read back for the next prompt
//
// The worker's `correct` is its strict verdict; strict_correct (written by verdict_json() only)
// keeps it when eval.correctness = "kernelbench" put KernelBench's verdict into `correct`.
// Senders older than issue 16 lack the KernelBench verdict: such a verdict gets
// kernelbench_correct = correct, kernelbench_trials_passed = trials_passed and, per trial,
// kernelbench_passed = passed (their `correct` was KernelBench's allclose check).

#include "messages/data.hpp"

#include <simdjson.h>

#include <optional>
#include <string_view>

namespace kbrl::eval {

/// The eval_error that to_string() names `name` ("none", "mismatch", ...), or nullopt.
std::optional<eval_error> eval_error_named(std::string_view name);

/// Reads the verdict fields present in `obj` into `r`; a field that is absent (or of another
/// type) leaves r's value, except for the fallbacks above. Read: compiled, correct,
/// trials_passed, trials_total, error_excerpt (unbounded), trials, kernel_runtime,
/// reference_runtime, compiled_reference_runtime, speedup, hack_flags, the stage seconds
/// (compile, correctness, timing, reference), strict_correct, kernelbench_correct,
/// kernelbench_trials_passed, time_coverage, kernels, timing_input_sets, timing_note,
/// isolation and timing_check ({"events_ms", "wall_ms", "overhead_ms"}). Not read, because the
/// two sources mean different things by them or only one has them: error (its category name;
/// see eval_error_named()), id, device, evaluator, build_seconds, total_seconds.
void read_verdict_fields(simdjson::dom::element obj, eval_result& r);

/// The fields read_verdict_fields() does not read but verdict_json() writes: device, evaluator,
/// build_seconds, total_seconds (a verdict read back from verdict_json()).
void read_verdict_identity(simdjson::dom::element obj, eval_result& r);

/// Makes KernelBench's verdict the one `correct` follows (eval.correctness = "kernelbench"):
/// correct = kernelbench_correct, trials_passed = kernelbench_trials_passed, and the error
/// category follows: `mismatch` becomes `none` for a KernelBench-correct candidate, `none`
/// becomes `mismatch` for a KernelBench-incorrect one that compiled and ran every trial.
void use_kernelbench_verdict(eval_result& r);

} // namespace kbrl::eval
