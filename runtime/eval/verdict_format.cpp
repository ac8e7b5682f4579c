#include "runtime/eval/verdict_format.hpp"

#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"

#include <cstdio>

namespace kbrl::eval {

namespace {

void write_stats(json_writer& w, const char* key, const runtime_stats& s) {
  w.key(key)
    .begin_object()
    .field("mean_ms", s.mean_ms)
    .field("std_ms", s.std_ms)
    .field("min_ms", s.min_ms)
    .field("max_ms", s.max_ms)
    .field("trials", s.trials)
    .end_object();
}

std::string ms(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", x);
  return buf;
}

/// Trials that passed the strict check (trials_passed may count KernelBench's passes).
int strict_passes(const eval_result& r) {
  if (r.trials.empty())
    return r.trials_passed;
  int n = 0;
  for (auto& t : r.trials)
    n += t.passed ? 1 : 0;
  return n;
}

} // namespace

std::string verdict_json(const eval_result& r) {
  json_writer w;
  w.begin_object()
    .field("id", r.id)
    .field("compiled", r.compiled)
    .field("correct", r.correct)
    .field("trials_passed", r.trials_passed)
    .field("trials_total", r.trials_total)
    .field("strict_correct", r.strict_correct)
    .field("kernelbench_correct", r.kernelbench_correct)
    .field("kernelbench_trials_passed", r.kernelbench_trials_passed)
    .field("error", to_string(r.error))
    .field("error_excerpt", r.error_excerpt);
  w.key("trials").begin_array();
  for (auto& t : r.trials)
    w.begin_object()
      .field("passed", t.passed)
      .field("kernelbench_passed", t.kernelbench_passed)
      .field("max_abs_diff", t.max_abs_diff)
      .field("mean_abs_diff", t.mean_abs_diff)
      .field("max_rel_diff", t.max_rel_diff)
      .field("norm_rel_diff", t.norm_rel_diff)
      .field("note", t.note)
      .end_object();
  w.end_array();
  write_stats(w, "kernel_runtime", r.kernel_runtime);
  write_stats(w, "reference_runtime", r.reference_runtime);
  write_stats(w, "compiled_reference_runtime", r.compiled_reference_runtime);
  w.field("speedup", r.speedup);
  w.key("hack_flags").begin_array();
  for (auto& f : r.hack_flags)
    w.value(f);
  w.end_array();
  w.field("time_coverage", r.time_coverage);
  w.key("kernels").begin_array();
  for (auto& k : r.kernels)
    w.begin_object().field("name", k.name).field("ms", k.ms).field("own", k.own).end_object();
  w.end_array();
  w.field("timing_input_sets", r.timing_input_sets)
    .field("timing_note", r.timing_note)
    .field("isolation", r.isolation)
    .field("reference_shared", r.reference_shared);
  w.key("timing_check")
    .begin_object()
    .field("events_ms", r.timing_events_ms)
    .field("wall_ms", r.timing_wall_ms)
    .field("overhead_ms", r.timing_overhead_ms)
    .end_object();
  w.field("device", r.device)
    .field("evaluator", r.evaluator)
    .field("compile_seconds", r.compile_seconds)
    .field("build_seconds", r.build_seconds)
    .field("correctness_seconds", r.correctness_seconds)
    .field("timing_seconds", r.timing_seconds)
    .field("reference_seconds", r.reference_seconds)
    .field("total_seconds", r.total_seconds)
    .end_object();
  return w.str();
}

std::string verdict_text(const eval_result& r) {
  // Both verdicts: "correct (strict) / KernelBench: correct"; `correct` follows one of them.
  std::string out;
  auto kernelbench = std::string(" / KernelBench: ")
                     + (r.kernelbench_correct ? "correct" : "incorrect");
  if (r.strict_correct || r.kernelbench_correct) {
    out = std::string(r.strict_correct ? "correct" : "incorrect") + " (strict)" + kernelbench;
    if (!r.strict_correct)
      out += ", " + std::to_string(strict_passes(r)) + " of "
             + std::to_string(r.trials_total) + " trials pass the strict check";
    if (r.speedup > 0) {
      char buf[128];
      std::snprintf(buf, sizeof buf, ", %.3gx %s (%s vs %s for the reference)", r.speedup,
                    r.speedup >= 1 ? "faster" : "of the reference's speed",
                    ms(r.kernel_runtime.mean_ms).c_str(), ms(r.reference_runtime.mean_ms).c_str());
      out += buf;
    }
  } else if (r.error == eval_error::mismatch || (r.compiled && r.error == eval_error::none)) {
    out = "incorrect (strict)" + kernelbench + ": " + std::to_string(strict_passes(r))
          + " of " + std::to_string(r.trials_total) + " trials pass the strict check, "
          + std::to_string(r.kernelbench_trials_passed) + " KernelBench's";
  } else {
    out = std::string("failed: ") + to_string(r.error);
  }
  out += "\n";
  for (size_t i = 0; i < r.trials.size(); ++i) {
    auto& t = r.trials[i];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  trial %zu: %s (KernelBench %s), max abs diff %.3g, max rel diff %.3g, "
                  "norm rel diff %.3g%s%s\n",
                  i + 1, t.passed ? "pass" : "FAIL", t.kernelbench_passed ? "pass" : "FAIL",
                  t.max_abs_diff, t.max_rel_diff, t.norm_rel_diff, t.note.empty() ? "" : ", ",
                  t.note.c_str());
    out += buf;
  }
  if (r.time_coverage >= 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "time coverage: %.1f %% of the GPU time in its own kernels\n",
                  100 * r.time_coverage);
    out += buf;
    for (auto& k : r.kernels) {
      std::snprintf(buf, sizeof buf, "  %s %s ", k.own ? "own  " : "other", ms(k.ms).c_str());
      out += buf + k.name + "\n";
    }
  }
  if (r.timing_wall_ms > 0 || r.timing_events_ms > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "timing check: events %s, wall clock %s, loop overhead %s\n",
                  ms(r.timing_events_ms).c_str(), ms(r.timing_wall_ms).c_str(),
                  ms(r.timing_overhead_ms).c_str());
    out += buf;
  }
  if (r.timing_input_sets > 0)
    out += "timed over " + std::to_string(r.timing_input_sets) + " input set(s)"
           + (r.timing_note.empty() ? "" : ": " + r.timing_note) + "\n";
  if (!r.hack_flags.empty())
    out += "flags: " + join(r.hack_flags) + "\n";
  if (!r.error_excerpt.empty())
    out += r.error_excerpt + (r.error_excerpt.back() == '\n' ? "" : "\n");
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "device %s%s%s, %.1f s (build %.1f s, correctness %.1f s, timing %.1f s, "
                "reference %.1f s)\n",
                r.device.c_str(), r.isolation.empty() ? "" : ", isolation ",
                r.isolation.c_str(), r.total_seconds, r.compile_seconds + r.build_seconds,
                r.correctness_seconds, r.timing_seconds, r.reference_seconds);
  out += buf;
  return out;
}

} // namespace kbrl::eval
