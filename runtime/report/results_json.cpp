#include "runtime/report/results_json.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <simdjson.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kbrl::report {

namespace {

namespace fs = std::filesystem;

/// Text for JSON: valid UTF-8 (simdjson refuses anything else when reading it back).
std::string clean(const std::string& s) { return tok::repair_utf8(s); }

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string timing_text(const timing_options& t) {
  std::ostringstream out;
  out << "correctness_trials " << t.correctness_trials << ", perf_trials " << t.perf_trials
      << ", warmup_runs " << t.warmup_runs << ", seed " << t.seed << ", timeout_s "
      << number_text(t.timeout_s) << ", measure_performance "
      << (t.measure_performance ? "true" : "false") << ", compare_torch_compile "
      << (t.compare_torch_compile ? "true" : "false") << ", atol " << number_text(t.atol)
      << ", rtol " << number_text(t.rtol);
  if (t.timing_precision > 0) // only when set: results of KernelBench-style runs keep their text
    out << ", timing_precision " << number_text(t.timing_precision);
  return out.str();
}

void write_timing(json_writer& w, const timing_options& t) {
  w.begin_object()
    .field("correctness_trials", t.correctness_trials)
    .field("perf_trials", t.perf_trials)
    .field("timing_precision", t.timing_precision)
    .field("warmup_runs", t.warmup_runs)
    .field("seed", t.seed)
    .field("timeout_s", t.timeout_s)
    .field("measure_performance", t.measure_performance)
    .field("compare_torch_compile", t.compare_torch_compile)
    .field("atol", t.atol)
    .field("rtol", t.rtol)
    .end_object();
}

void write_info(json_writer& w, const run_info& info) {
  w.begin_object()
    .field("mode", clean(info.mode))
    .field("model", clean(info.model))
    .field("adapter", clean(info.adapter))
    .field("generations_dir", clean(info.generations_dir))
    .field("problem_source", clean(info.problem_source));
  w.key("levels").begin_array();
  for (auto l : info.levels)
    w.value(l);
  w.end_array()
    .field("problems", clean(info.problems))
    .field("samples", info.samples)
    .field("turns", info.turns)
    .field("backend", info.backend)
    .field("precision", info.precision);
  w.key("timing");
  write_timing(w, info.timing);
  w.field("reference", info.reference);
  w.field("correctness", info.correctness);
  w.field("sampling", clean(info.sampling))
    .field("prompt", clean(info.prompt))
    .field("evaluator", clean(info.evaluator))
    .field("machine", clean(info.machine))
    .field("kbrl_version", info.kbrl_version)
    .field("started", info.started)
    .field("finished", info.finished)
    .field("wall_seconds", info.wall_seconds)
    .field("tensorboard_step", info.tensorboard_step)
    .end_object();
}

void write_signature(json_writer& w, const run_signature& sig) {
  w.begin_object();
  for (auto& [k, v] : sig)
    w.field(k, clean(v));
  w.end_object();
}

/// A threshold as KernelBench's analysis writes it (Python's str of a float): "0.0", "1.5".
std::string threshold_key(double p) { return fast_p_name(p).substr(5); }

void write_group(json_writer& w, const metric_group& g, const std::vector<double>& thresholds) {
  w.begin_object()
    .field("name", g.name)
    .field("problems", static_cast<uint64_t>(g.problems))
    .field("samples", static_cast<uint64_t>(g.samples))
    .field("compiled", static_cast<uint64_t>(g.compiled))
    .field("correct", static_cast<uint64_t>(g.correct))
    .field("compiled_rate", g.compiled_rate)
    .field("correct_rate", g.correct_rate);
  w.key("pass_at_k").begin_object();
  for (size_t k = 1; k <= g.pass_at_k.size(); ++k)
    w.field(std::to_string(k), g.pass_at_k[k - 1]);
  w.end_object();
  w.field("pass_at_k_problems", static_cast<uint64_t>(g.pass_at_k_problems));
  w.key("fast_p").begin_object();
  for (size_t i = 0; i < thresholds.size(); ++i)
    w.field(threshold_key(thresholds[i]), g.fast_p[i]);
  w.end_object();
  w.key("fast_p_best_of_n").begin_object();
  for (size_t i = 0; i < thresholds.size(); ++i)
    w.field(threshold_key(thresholds[i]), g.fast_p_best[i]);
  w.end_object();
  w.field("timed_correct", static_cast<uint64_t>(g.timed_correct))
    .field("geomean_speedup", g.geomean_speedup);
  // KernelBench's own verdict beside the one `correct` follows (strict by default).
  w.field("kernelbench_correct", static_cast<uint64_t>(g.kernelbench_correct))
    .field("kernelbench_correct_rate", g.kernelbench_correct_rate);
  w.key("kernelbench_pass_at_k").begin_object();
  for (size_t k = 1; k <= g.kernelbench_pass_at_k.size(); ++k)
    w.field(std::to_string(k), g.kernelbench_pass_at_k[k - 1]);
  w.end_object();
  w.key("kernelbench_fast_p").begin_object();
  for (size_t i = 0; i < thresholds.size() && i < g.kernelbench_fast_p.size(); ++i)
    w.field(threshold_key(thresholds[i]), g.kernelbench_fast_p[i]);
  w.end_object();
  if (!g.fast_p_vs_compile.empty()) {
    w.key("vs_torch_compile").begin_object()
      .field("timed_correct", static_cast<uint64_t>(g.compile_timed_correct))
      .field("geomean_speedup", g.geomean_speedup_vs_compile);
    w.key("fast_p").begin_object();
    for (size_t i = 0; i < thresholds.size(); ++i)
      w.field(threshold_key(thresholds[i]), g.fast_p_vs_compile[i]);
    w.end_object().end_object();
  }
  w.key("errors").begin_object();
  for (auto& [k, n] : g.errors)
    w.field(k, static_cast<uint64_t>(n));
  w.end_object();
  w.key("hack_flags").begin_object();
  for (auto& [k, n] : g.hack_flags)
    w.field(k, static_cast<uint64_t>(n));
  w.end_object();
  w.end_object();
}

// -- reading -------------------------------------------------------------------------------------

using simdjson::dom::element;

/// Reads a file into simdjson's padded buffer and parses it.
caf::expected<element> parse_file(simdjson::dom::parser& parser, const std::string& path) {
  element doc;
  if (auto err = parser.load(path).get(doc))
    return make_error(errc::invalid_argument,
                      path + ": not readable as JSON: " + simdjson::error_message(err));
  return doc;
}

/// Field readers that name the file and the field when it is missing or of the wrong type.
struct field_reader {
  const std::string& where;
  element obj;
  std::string error;

  std::string text(const char* key) {
    std::string_view v;
    if (obj[key].get(v)) {
      fail(key, "a string");
      return {};
    }
    return std::string(v);
  }
  /// "" when absent; an error when present and not a string.
  std::string optional_text(const char* key) {
    if (obj[key].error() == simdjson::NO_SUCH_FIELD)
      return {};
    return text(key);
  }
  /// 0 when absent; an error when present and not an integer.
  int64_t optional_integer(const char* key) {
    if (obj[key].error() == simdjson::NO_SUCH_FIELD)
      return 0;
    return integer(key);
  }
  int64_t integer(const char* key) {
    int64_t v = 0;
    if (obj[key].get(v))
      fail(key, "an integer");
    return v;
  }
  double real(const char* key) {
    double v = 0;
    auto value = obj[key];
    if (value.error()) {
      fail(key, "a number");
      return 0;
    }
    if (value.is_null())
      return 0; // json_writer writes non-finite numbers as null
    if (value.get(v)) {
      int64_t i = 0;
      if (value.get(i)) {
        fail(key, "a number");
        return 0;
      }
      v = static_cast<double>(i);
    }
    return v;
  }
  /// `fallback` when absent; an error when present and not true or false.
  bool optional_boolean(const char* key, bool fallback) {
    if (obj[key].error() == simdjson::NO_SUCH_FIELD)
      return fallback;
    return boolean(key);
  }
  /// `fallback` when absent; an error when present and not a number (null reads as 0).
  double optional_real(const char* key, double fallback) {
    if (obj[key].error() == simdjson::NO_SUCH_FIELD)
      return fallback;
    return real(key);
  }
  bool boolean(const char* key) {
    bool v = false;
    if (obj[key].get(v))
      fail(key, "true or false");
    return v;
  }
  std::vector<std::string> texts(const char* key) {
    std::vector<std::string> out;
    simdjson::dom::array arr;
    if (obj[key].get(arr)) {
      fail(key, "an array of strings");
      return out;
    }
    for (auto item : arr) {
      std::string_view v;
      if (item.get(v)) {
        fail(key, "an array of strings");
        return out;
      }
      out.emplace_back(v);
    }
    return out;
  }
  void fail(const char* key, const char* expected) {
    if (error.empty())
      error = where + ": \"" + key + "\": expected " + expected;
  }
};

caf::expected<sample_record> read_record(element e, const std::string& where) {
  field_reader f{where, e, {}};
  sample_record r;
  r.problem = f.text("problem");
  r.level = static_cast<int32_t>(f.integer("level"));
  r.problem_number = static_cast<int32_t>(f.integer("problem_number"));
  r.sample = static_cast<int32_t>(f.integer("sample"));
  r.turn = static_cast<int32_t>(f.integer("turn"));
  r.compiled = f.boolean("compiled");
  r.correct = f.boolean("correct");
  r.error = f.text("error");
  r.speedup = f.real("speedup");
  r.kernel_ms = f.real("kernel_ms");
  r.reference_ms = f.real("reference_ms");
  r.compiled_reference_ms = f.real("compiled_reference_ms");
  r.trials_passed = static_cast<int32_t>(f.integer("trials_passed"));
  r.trials_total = static_cast<int32_t>(f.integer("trials_total"));
  r.hack_flags = f.texts("hack_flags");
  r.error_excerpt = f.text("error_excerpt");
  r.source = f.text("source");
  r.extraction = f.text("extraction");
  r.candidate_hash = f.text("candidate_hash");
  r.evaluator_seconds = f.real("evaluator_seconds");
  r.completion_tokens = static_cast<int32_t>(f.integer("completion_tokens"));
  r.finish = f.text("finish");
  // Written since evaluation on a cluster; folders of earlier versions lack them.
  r.node = f.optional_text("node");
  r.evaluator = f.optional_text("evaluator");
  r.retries = static_cast<int32_t>(f.optional_integer("retries"));
  // Written since issue 16 (the strict verdict beside KernelBench's): earlier records' verdict
  // was KernelBench's allclose check, and their time coverage was not measured.
  r.kernelbench_correct = f.optional_boolean("kernelbench_correct", r.correct);
  r.time_coverage = f.optional_real("time_coverage", -1);
  if (!f.error.empty())
    return make_error(errc::invalid_argument, f.error);
  return r;
}

caf::expected<std::vector<sample_record>> read_records(element doc, const char* key,
                                                       const std::string& path) {
  simdjson::dom::array arr;
  if (doc[key].get(arr))
    return make_error(errc::invalid_argument,
                      path + ": \"" + key + "\": expected an array of sample records");
  std::vector<sample_record> out;
  size_t i = 0;
  for (auto item : arr) {
    auto r = read_record(item, path + ": " + key + "[" + std::to_string(i++) + "]");
    if (!r)
      return r.error();
    out.push_back(std::move(*r));
  }
  return out;
}

caf::expected<run_signature> read_signature(element doc, const std::string& path) {
  simdjson::dom::object obj;
  if (doc["signature"].get(obj))
    return make_error(errc::invalid_argument, path + ": \"signature\": expected an object");
  run_signature sig;
  for (auto [k, v] : obj) {
    std::string_view s;
    if (v.get(s))
      return make_error(errc::invalid_argument, path + ": signature \"" + std::string(k)
                                                  + "\": expected a string");
    sig.emplace_back(std::string(k), std::string(s));
  }
  return sig;
}

} // namespace

run_signature signature_of(const run_info& info) {
  run_signature sig{
    {"mode", info.mode},
    {"model", info.model},
    {"adapter", info.adapter},
    {"generations_dir", info.generations_dir},
    {"samples", std::to_string(info.samples)},
    {"turns", std::to_string(info.turns)},
    {"backend", info.backend},
    {"precision", info.precision},
    {"timing", timing_text(info.timing)},
    {"sampling", info.sampling},
    {"prompt", info.prompt},
  };
  if (info.reference != "eager")
    sig.emplace_back("reference", info.reference);
  if (info.correctness != "strict")
    sig.emplace_back("correctness", info.correctness);
  return sig;
}

std::string signature_difference(const run_signature& now, const run_signature& stored) {
  std::string out;
  for (auto& [key, value] : now) {
    std::string old = "(not set)";
    for (auto& [k, v] : stored)
      if (k == key)
        old = v;
    if (old != value)
      out += (out.empty() ? "" : "\n") + key + ": \"" + value + "\" now, \"" + old
             + "\" in the output folder";
  }
  for (auto& [key, value] : stored) {
    bool here = false;
    for (auto& [k, v] : now)
      here = here || k == key;
    if (!here)
      out += (out.empty() ? "" : "\n") + key + ": \"(not set)\" now, \"" + value
             + "\" in the output folder";
  }
  return out;
}

void write_record(json_writer& w, const sample_record& r) {
  w.begin_object()
    .field("problem", clean(r.problem))
    .field("level", r.level)
    .field("problem_number", r.problem_number)
    .field("sample", r.sample)
    .field("turn", r.turn)
    .field("compiled", r.compiled)
    .field("correct", r.correct)
    .field("kernelbench_correct", r.kernelbench_correct)
    .field("error", clean(r.error))
    .field("speedup", r.speedup)
    .field("kernel_ms", r.kernel_ms)
    .field("reference_ms", r.reference_ms)
    .field("compiled_reference_ms", r.compiled_reference_ms)
    .field("trials_passed", r.trials_passed)
    .field("trials_total", r.trials_total);
  w.key("hack_flags").begin_array();
  for (auto& f : r.hack_flags)
    w.value(clean(f));
  w.end_array()
    .field("time_coverage", r.time_coverage)
    .field("error_excerpt", clean(r.error_excerpt))
    .field("source", clean(r.source))
    .field("extraction", clean(r.extraction))
    .field("candidate_hash", clean(r.candidate_hash))
    .field("evaluator_seconds", r.evaluator_seconds)
    .field("completion_tokens", r.completion_tokens)
    .field("finish", clean(r.finish))
    .field("node", clean(r.node))
    .field("evaluator", clean(r.evaluator))
    .field("retries", r.retries)
    .end_object();
}

std::string run_json(const run_info& info) {
  json_writer w;
  w.begin_object().key("run");
  write_info(w, info);
  w.key("signature");
  write_signature(w, signature_of(info));
  w.end_object();
  return w.str() + "\n";
}

caf::expected<run_signature> read_run_signature(const std::string& path) {
  simdjson::dom::parser parser;
  auto doc = parse_file(parser, path);
  if (!doc)
    return doc.error();
  return read_signature(*doc, path);
}

std::string problem_json(const std::string& problem, const run_signature& signature,
                         const std::vector<sample_record>& records) {
  json_writer w;
  w.begin_object().field("problem", clean(problem)).key("signature");
  write_signature(w, signature);
  w.key("samples").begin_array();
  for (auto& r : records)
    write_record(w, r);
  w.end_array().end_object();
  return w.str() + "\n";
}

caf::expected<problem_file> read_problem_json(const std::string& path) {
  simdjson::dom::parser parser;
  auto doc = parse_file(parser, path);
  if (!doc)
    return doc.error();
  problem_file out;
  std::string_view name;
  if ((*doc)["problem"].get(name))
    return make_error(errc::invalid_argument, path + ": \"problem\": expected a string");
  out.problem = std::string(name);
  auto sig = read_signature(*doc, path);
  if (!sig)
    return sig.error();
  out.signature = std::move(*sig);
  auto records = read_records(*doc, "samples", path);
  if (!records)
    return records.error();
  out.records = std::move(*records);
  return out;
}

std::string results_json(const run_info& info, const eval_metrics& m,
                         const std::vector<sample_record>& records) {
  json_writer w;
  w.begin_object().key("run");
  write_info(w, info);
  w.key("aggregate").begin_object();
  w.key("thresholds").begin_array();
  for (auto p : m.thresholds)
    w.value(p);
  w.end_array();
  w.field("max_samples", static_cast<uint64_t>(m.max_samples))
    .field("max_turns", static_cast<uint64_t>(m.max_turns))
    .field("fast_p_scores", "the first sample of each problem (KernelBench); fast_p_best_of_n: "
                            "any sample")
    .field("sample_counting", to_string(m.counting))
    .field("sample_counting_means",
           m.counting == sample_counting::kernelbench
             ? "as KernelBench's calculate_pass_at_k: each problem counts the samples it has "
               "(missing ones are not samples); pass@k averages over the problems with samples, "
               "one with fewer than k adding 0"
             : "every problem padded to the largest sample count, a missing sample counting as "
               "a failed one (kbrl-eval --sample-counting padded)");
  w.field("speedup_reference", info.reference == "compile"
                                  ? "torch.compile (default mode) of the reference"
                                  : "the eager PyTorch reference");
  bool compile_wanted = info.timing.compare_torch_compile || info.reference == "compile";
  w.field("torch_compile_reference",
          m.compile_reference_timed ? "timed"
          : compile_wanted          ? "missing: no sample has a torch.compile timing (see the "
                                      "samples' error_excerpt)"
                                    : "not requested");
  w.key("overall");
  write_group(w, m.overall, m.thresholds);
  w.key("levels").begin_array();
  for (auto& g : m.levels)
    write_group(w, g, m.thresholds);
  w.end_array();
  w.key("turns").begin_array();
  for (auto& g : m.turns)
    write_group(w, g, m.thresholds);
  w.end_array();
  w.key("problems").begin_array();
  for (auto& p : m.problems) {
    w.begin_object()
      .field("problem", clean(p.problem))
      .field("level", p.level)
      .field("number", p.number)
      .field("samples", static_cast<uint64_t>(p.samples))
      .field("correct", static_cast<uint64_t>(p.correct))
      .field("best_speedup", p.best_speedup)
      .field("first_correct", p.first_correct)
      .field("first_speedup", p.first_speedup);
    w.key("errors").begin_object();
    for (auto& [k, n] : p.errors)
      w.field(k, static_cast<uint64_t>(n));
    w.end_object().end_object();
  }
  w.end_array();
  w.end_object(); // aggregate
  w.key("samples").begin_array();
  for (auto& r : records)
    write_record(w, r);
  w.end_array().end_object();
  return w.str() + "\n";
}

caf::expected<sample_record> parse_record(std::string_view json, const std::string& where) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return make_error(errc::invalid_argument,
                      where + ": not readable as JSON: " + simdjson::error_message(err));
  return read_record(doc, where);
}

caf::expected<std::vector<sample_record>> read_results_samples(const std::string& path) {
  simdjson::dom::parser parser;
  auto doc = parse_file(parser, path);
  if (!doc)
    return doc.error();
  return read_records(*doc, "samples", path);
}

caf::expected<void> write_file_atomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  auto parent = fs::path(path).parent_path();
  if (!parent.empty())
    fs::create_directories(parent, ec);
  if (ec)
    return make_error(errc::io_failure, parent.string() + ": cannot create: " + ec.message());
  return io::write_file_atomically(path, {text});
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace kbrl::report
