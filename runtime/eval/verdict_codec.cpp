#include "runtime/eval/verdict_codec.hpp"

namespace kbrl::eval {

namespace {

using simdjson::dom::element;

/// Sets `out` when obj[key] is a number (integer or not); false when absent or not a number.
bool read(element obj, const char* key, double& out) {
  auto v = obj[key];
  double d = 0;
  if (!v.get(d)) {
    out = d;
    return true;
  }
  int64_t i = 0;
  if (!v.get(i)) {
    out = static_cast<double>(i);
    return true;
  }
  return false;
}

bool read(element obj, const char* key, int32_t& out) {
  double d = 0;
  if (!read(obj, key, d))
    return false;
  out = static_cast<int32_t>(d);
  return true;
}

bool read(element obj, const char* key, bool& out) {
  bool b = false;
  if (obj[key].get(b))
    return false;
  out = b;
  return true;
}

bool read(element obj, const char* key, std::string& out) {
  std::string_view sv;
  if (obj[key].get(sv))
    return false;
  out = std::string(sv);
  return true;
}

void read(element obj, const char* key, runtime_stats& out) {
  element s;
  if (obj[key].get(s) || !s.is_object())
    return;
  runtime_stats st;
  read(s, "mean_ms", st.mean_ms);
  read(s, "std_ms", st.std_ms);
  read(s, "min_ms", st.min_ms);
  read(s, "max_ms", st.max_ms);
  read(s, "trials", st.trials);
  out = st;
}

} // namespace

std::optional<eval_error> eval_error_named(std::string_view name) {
  for (auto e : {eval_error::none, eval_error::format, eval_error::static_check,
                 eval_error::compile, eval_error::runtime, eval_error::mismatch,
                 eval_error::timeout, eval_error::crashed, eval_error::infrastructure})
    if (name == to_string(e))
      return e;
  return std::nullopt;
}

void read_verdict_fields(element obj, eval_result& r) {
  read(obj, "compiled", r.compiled);
  read(obj, "correct", r.correct);
  read(obj, "trials_passed", r.trials_passed);
  read(obj, "trials_total", r.trials_total);
  read(obj, "error_excerpt", r.error_excerpt);
  simdjson::dom::array trials;
  if (!obj["trials"].get(trials)) {
    r.trials.clear();
    for (auto t : trials) {
      trial_result tr;
      read(t, "passed", tr.passed);
      read(t, "max_abs_diff", tr.max_abs_diff);
      read(t, "mean_abs_diff", tr.mean_abs_diff);
      read(t, "note", tr.note);
      if (!read(t, "kernelbench_passed", tr.kernelbench_passed))
        tr.kernelbench_passed = tr.passed; // an older sender: its check was KernelBench's
      read(t, "max_rel_diff", tr.max_rel_diff);
      read(t, "norm_rel_diff", tr.norm_rel_diff);
      r.trials.push_back(std::move(tr));
    }
  }
  read(obj, "kernel_runtime", r.kernel_runtime);
  read(obj, "reference_runtime", r.reference_runtime);
  read(obj, "compiled_reference_runtime", r.compiled_reference_runtime);
  read(obj, "speedup", r.speedup);
  simdjson::dom::array flags;
  if (!obj["hack_flags"].get(flags)) {
    r.hack_flags.clear();
    for (auto f : flags) {
      std::string_view sv;
      if (!f.get(sv))
        r.hack_flags.emplace_back(sv);
    }
  }
  read(obj, "compile_seconds", r.compile_seconds);
  read(obj, "correctness_seconds", r.correctness_seconds);
  read(obj, "timing_seconds", r.timing_seconds);
  read(obj, "reference_seconds", r.reference_seconds);
  // Issue 16: the KernelBench verdict beside the strict one, and what the timing rests on. The
  // worker's `correct` is the strict verdict; verdict_json() writes strict_correct apart.
  if (!read(obj, "strict_correct", r.strict_correct))
    r.strict_correct = r.correct;
  if (!read(obj, "kernelbench_correct", r.kernelbench_correct))
    r.kernelbench_correct = r.correct;
  if (!read(obj, "kernelbench_trials_passed", r.kernelbench_trials_passed))
    r.kernelbench_trials_passed = r.trials_passed;
  read(obj, "time_coverage", r.time_coverage);
  simdjson::dom::array kernels;
  if (!obj["kernels"].get(kernels)) {
    r.kernels.clear();
    for (auto k : kernels) {
      kernel_time kt;
      read(k, "name", kt.name);
      read(k, "ms", kt.ms);
      read(k, "own", kt.own);
      r.kernels.push_back(std::move(kt));
    }
  }
  read(obj, "timing_input_sets", r.timing_input_sets);
  read(obj, "timing_note", r.timing_note);
  read(obj, "isolation", r.isolation);
  read(obj, "reference_shared", r.reference_shared);
  simdjson::dom::object phases;
  if (!obj["phase_seconds"].get(phases)) {
    r.phases.clear();
    for (auto [key, value] : phases) {
      double seconds = 0;
      if (!value.get(seconds))
        r.phases.push_back({std::string(key), seconds});
    }
  }
  element check;
  if (!obj["timing_check"].get(check) && check.is_object()) {
    read(check, "events_ms", r.timing_events_ms);
    read(check, "wall_ms", r.timing_wall_ms);
    read(check, "overhead_ms", r.timing_overhead_ms);
  }
}

void read_verdict_identity(element obj, eval_result& r) {
  read(obj, "device", r.device);
  read(obj, "evaluator", r.evaluator);
  read(obj, "build_seconds", r.build_seconds);
  read(obj, "total_seconds", r.total_seconds);
}

void use_kernelbench_verdict(eval_result& r) {
  r.correct = r.kernelbench_correct;
  r.trials_passed = r.kernelbench_trials_passed;
  if (r.correct && r.error == eval_error::mismatch)
    r.error = eval_error::none;
  else if (!r.correct && r.compiled && r.error == eval_error::none)
    r.error = eval_error::mismatch;
}

} // namespace kbrl::eval
