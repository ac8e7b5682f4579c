#include "runtime/eval/eval_engine.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/static_checks.hpp"
#include "runtime/eval/verdict_codec.hpp"
#include "runtime/io/hash.hpp"
#include "runtime/io/json_writer.hpp"

#include <simdjson.h>

#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

namespace kbrl::eval {

namespace {

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

double number(simdjson::dom::element obj, const char* key, double fallback = 0) {
  double d = 0;
  if (!obj[key].get(d))
    return d;
  int64_t i = 0;
  if (!obj[key].get(i))
    return static_cast<double>(i);
  return fallback;
}

std::string text(simdjson::dom::element obj, const char* key) {
  std::string_view sv;
  return obj[key].get(sv) ? std::string{} : std::string(sv);
}

bool flag(simdjson::dom::element obj, const char* key) {
  bool b = false;
  return !obj[key].get(b) && b;
}

runtime_stats read_stats(simdjson::dom::element obj, const char* key) {
  runtime_stats st;
  simdjson::dom::element s;
  if (obj[key].get(s))
    return st;
  st.mean_ms = number(s, "mean_ms");
  st.std_ms = number(s, "std_ms");
  st.min_ms = number(s, "min_ms");
  st.max_ms = number(s, "max_ms");
  st.trials = static_cast<int32_t>(number(s, "trials"));
  return st;
}

eval_error parse_error_category(const std::string& s) {
  return eval_error_named(s).value_or(eval_error::infrastructure);
}

std::string bounded(std::string s, size_t limit) {
  if (s.size() > limit)
    s = s.substr(0, limit / 2) + "\n[...]\n" + s.substr(s.size() - limit / 2);
  return s;
}

std::string timing_key(const eval_request& req, const std::string& device) {
  auto& t = req.timing;
  return source_hash(req.task.reference_source) + "|" + device + "|"
         + to_string(req.task.precision) + "|" + std::to_string(t.perf_trials) + "|"
         + std::to_string(t.warmup_runs) + "|" + std::to_string(t.timing_precision);
}

} // namespace

bool may_build_an_extension(kernel_backend backend, const std::string& source) {
  if (backend != kernel_backend::torch)
    return true;
  return source.find("load_inline") != std::string::npos
         || source.find("cpp_extension") != std::string::npos;
}

double scaled_timeout_s(double requested_s, double base_s, double build_s, int64_t calls,
                        double reference_ms) {
  const double per_call_s = std::max(1.0, 50.0 * reference_ms / 1000.0);
  return std::min(requested_s, base_s + build_s + static_cast<double>(calls) * per_call_s);
}

caf::expected<evaluate_answer> parse_evaluate_answer(std::string_view json,
                                                     const engine_options& opts,
                                                     int32_t trials_asked) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return make_error(errc::invalid_argument,
                      std::string("not readable as JSON: ") + simdjson::error_message(err));
  if (!doc.is_object())
    return make_error(errc::invalid_argument, "not a JSON object");
  evaluate_answer out;
  auto& res = out.verdict;
  res.trials_total = trials_asked;
  read_verdict_fields(doc, res);
  res.speedup = 0; // the engine's to compute, against its own reference timing
  res.error = parse_error_category(text(doc, "error"));
  res.error_excerpt = bounded(res.error_excerpt, opts.excerpt_bytes);
  if (opts.correctness == "kernelbench")
    use_kernelbench_verdict(res);
  out.sticky_cuda_error = flag(doc, "sticky_cuda_error");
  return out;
}

std::string source_hash(std::string_view text) {
  return hex64(io::fnv1a_64(text));
}

eval_engine::eval_engine(engine_options opts) : opts_(std::move(opts)) {
  // Request ids start at a random point (below 2^40: exact in any JSON reader), so that a line
  // forged onto the answer pipe cannot name the request it pretends to answer.
  next_id_ = 1 + (std::random_device{}() * 256ull) % (1ull << 40);
  load_reference_cache();
}

void eval_engine::load_reference_cache() {
  if (opts_.reference_cache_file.empty())
    return;
  std::ifstream in(opts_.reference_cache_file);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc))
      continue; // a torn last line from a crash: skip it
    auto key = text(doc, "key");
    auto st = read_stats(doc, "runtime");
    if (!key.empty() && st.trials > 0)
      reference_times_[key] = st;
  }
}

void eval_engine::remember_reference(const std::string& key, const runtime_stats& st) {
  reference_times_[key] = st;
  if (opts_.reference_cache_file.empty())
    return;
  json_writer w;
  w.begin_object().field("key", key).key("runtime").begin_object()
    .field("mean_ms", st.mean_ms).field("std_ms", st.std_ms).field("min_ms", st.min_ms)
    .field("max_ms", st.max_ms).field("trials", st.trials).end_object().end_object();
  auto line = w.str() + "\n";
  // One write of a whole line with O_APPEND: evaluators sharing the file do not interleave.
  std::error_code ec;
  std::filesystem::create_directories(
    std::filesystem::path(opts_.reference_cache_file).parent_path(), ec);
  int fd = ::open(opts_.reference_cache_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

eval_engine::~eval_engine() {
  if (worker_ && worker_->alive()) {
    json_writer w;
    w.begin_object().field("op", "exit").field("id", next_id_++).end_object();
    (void)worker_->call(w.str(), std::chrono::seconds(2));
  }
}

isolation_mode eval_engine::isolation() const {
  return worker_ ? worker_->isolation() : resolve_isolation(opts_.worker.isolation);
}

pid_t eval_engine::worker_pid() const {
  return worker_ ? worker_->pid() : -1;
}

void eval_engine::kill_worker() {
  if (worker_)
    worker_->kill();
}

caf::expected<void> eval_engine::start() {
  worker_.reset(); // kills the old one
  auto w = worker_process::start(opts_.worker);
  if (!w)
    return std::move(w.error());
  worker_ = std::move(*w);
  ++workers_started_;
  since_start_ = 0;
  json_writer hello;
  // An evaluating worker starts its spare candidate processes now, so the first evaluations
  // do not wait for one (worker_protocol.md).
  hello.begin_object()
    .field("op", "hello")
    .field("id", next_id_++)
    .field("evaluates", !opts_.builds_only)
    .end_object();
  auto answer = worker_->call(hello.str(), opts_.start_timeout);
  if (!answer) {
    auto out = worker_->take_output().text();
    return make_error(errc::worker_crashed, "the evaluation worker did not start: "
                                              + describe(answer.error())
                                              + (out.empty() ? "" : "; it printed: "
                                                                      + bounded(out, 2000)));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(*answer).get(doc) || !flag(doc, "ok"))
    return make_error(errc::worker_crashed, "the evaluation worker answered hello with: "
                                              + bounded(*answer, 500));
  device_ = text(doc, "device");
  write_fence_ = text(doc, "write_fence");
  if (write_fence_.empty())
    write_fence_ = "off: the worker did not say";
  needs_restart_ = false;
  restart_planned_ = false;
  last_failure_.clear();
  worker_->take_output(); // whatever importing torch printed
  return caf::unit;
}

caf::expected<std::string> eval_engine::request(const std::string& json,
                                                std::chrono::milliseconds deadline) {
  if (!worker_)
    return make_error(errc::worker_crashed, "no worker");
  return worker_->call(json, deadline);
}

bool eval_engine::canary_ok() {
  json_writer w;
  w.begin_object().field("op", "canary").field("id", next_id_++).end_object();
  auto answer = request(w.str(), opts_.canary_timeout);
  if (!answer) {
    last_failure_ = "canary check failed: " + describe(answer.error());
    return false;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(*answer).get(doc) || !flag(doc, "ok")) {
    last_failure_ = "canary check failed: " + bounded(*answer, 500);
    return false;
  }
  return true;
}

void eval_engine::maybe_recycle() {
  if (needs_restart_ || !worker_)
    return;
  if (since_start_ >= opts_.recycle_after) {
    needs_restart_ = restart_planned_ = true;
    last_failure_ = "recycled after " + std::to_string(since_start_) + " evaluations";
    return;
  }
  json_writer w;
  w.begin_object().field("op", "stats").field("id", next_id_++).end_object();
  auto answer = request(w.str(), opts_.canary_timeout);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (!answer || parser.parse(*answer).get(doc))
    return;
  auto rss = number(doc, "rss_mb");
  if (rss > opts_.recycle_rss_mb) {
    needs_restart_ = restart_planned_ = true;
    last_failure_ = "recycled at " + std::to_string(static_cast<int64_t>(rss)) + " MB resident";
  }
}

bool eval_engine::refuse_statically(const eval_request& req, eval_result& res) {
  static_check_options sco;
  sco.overrides = opts_.rule_overrides;
  sco.backend = req.task.backend;
  sco.precision = req.task.precision;
  auto checks = check_candidate(req.candidate_source, sco);
  res.hack_flags = checks.hack_flags();
  if (!checks.rejected())
    return false;
  res.error = eval_error::static_check;
  std::string why;
  for (auto& f : checks.findings)
    if (f.level == severity::error)
      why += "line " + std::to_string(f.line) + ": [" + f.rule + "] " + f.message + "\n";
  res.error_excerpt = bounded(why, opts_.excerpt_bytes);
  return true;
}

bool eval_engine::ensure_worker(eval_result& res) {
  if (!needs_restart_ && (!worker_ || !worker_->alive())) {
    // The worker died between requests (killed from outside, OOM): not this candidate's doing,
    // so it gets a fresh worker instead of a crash verdict.
    last_failure_ = "the worker " + (worker_ ? worker_->exit_description() : "was missing")
                    + " between requests";
    needs_restart_ = true;
  }
  if (needs_restart_) {
    // First use, a dead worker, or a caller without a supervisor: start a worker now.
    if (auto ok = start(); !ok) {
      restart_planned_ = false; // a worker that cannot start is a failure, recycle or not
      res.error = eval_error::infrastructure;
      res.error_excerpt = "the evaluation worker is not running: " + describe(ok.error());
      return false;
    }
    res.device = device_;
  }
  return true;
}

eval_result eval_engine::empty_verdict(const eval_request& req) const {
  eval_result res;
  res.id = req.id;
  res.device = device_;
  res.trials_total = req.timing.correctness_trials;
  return res;
}

void eval_engine::worker_lost(eval_result& res, const caf::error& err,
                              const captured_output& printed, const std::string& during) {
  res.error = err.code() == static_cast<uint8_t>(errc::timeout) ? eval_error::timeout
                                                                 : eval_error::crashed;
  res.error_excerpt = bounded(during + describe(err)
                                + (printed.total_bytes > 0 ? "\noutput:\n" + printed.text()
                                                           : std::string{}),
                              opts_.excerpt_bytes);
  needs_restart_ = true;
  last_failure_ = describe(err);
}

void eval_engine::unreadable_answer(eval_result& res, const std::string& answer) {
  res.error = eval_error::infrastructure;
  res.error_excerpt = "unreadable answer from the worker: " + bounded(answer, 500);
  needs_restart_ = true;
  last_failure_ = res.error_excerpt;
}

std::string eval_engine::build_dir_of(const std::string& candidate_source) const {
  return opts_.worker.extensions_dir + "/" + source_hash(candidate_source);
}

eval_result eval_engine::build(const eval_request& req) {
  auto started = std::chrono::steady_clock::now();
  auto res = empty_verdict(req);
  auto finish = [&] {
    res.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return res;
  };
  if (refuse_statically(req, res) || !ensure_worker(res))
    return finish();
  json_writer w;
  w.begin_object()
    .field("op", "build")
    .field("id", next_id_++)
    .field("candidate", req.candidate_source)
    .field("build_dir", build_dir_of(req.candidate_source))
    .field("memory_limit_mb", opts_.memory_limit_gb * 1024.0)
    .end_object();
  auto answer =
    request(w.str(), std::chrono::milliseconds(static_cast<int64_t>(req.timing.timeout_s * 1000)));
  auto printed = worker_->take_output();
  if (!answer) {
    worker_lost(res, answer.error(), printed, "building: ");
    return finish();
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(*answer).get(doc)) {
    unreadable_answer(res, *answer);
    return finish();
  }
  res.compiled = flag(doc, "ok");
  res.compile_seconds = number(doc, "compile_seconds");
  if (!res.compiled) {
    res.error = parse_error_category(text(doc, "error"));
    res.error_excerpt = bounded(text(doc, "error_excerpt"), opts_.excerpt_bytes);
    if (res.error_excerpt.empty() && printed.total_bytes > 0)
      res.error_excerpt = bounded(printed.text(), opts_.excerpt_bytes);
  }
  return finish();
}

eval_result eval_engine::evaluate(const eval_request& req) {
  auto started = std::chrono::steady_clock::now();
  auto res = empty_verdict(req);
  auto finish = [&] {
    res.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return res;
  };

  // 1. Static checks: hostile or lazy code is refused before a process sees it.
  if (refuse_statically(req, res) || !ensure_worker(res))
    return finish();

  // 2. The reference's timing is reused across candidates of the same problem and settings; the
  //    torch.compile reference's is kept under its own key.
  auto key = timing_key(req, device_);
  auto cached = reference_times_.find(key);
  bool time_reference = req.timing.measure_performance && cached == reference_times_.end();
  const bool against_compile = opts_.reference_mode == "compile";
  const bool want_compiled =
    req.timing.measure_performance && (against_compile || req.timing.compare_torch_compile);
  auto compiled_key = key + "|torch.compile:default";
  auto compiled_cached = reference_times_.find(compiled_key);
  bool time_compiled = want_compiled && compiled_cached == reference_times_.end();

  // 3. The worker evaluates, within a budget scaled to the problem once its reference is known.
  auto t = req.timing;
  if (cached != reference_times_.end() && opts_.scaled_timeout_base_s > 0) {
    const bool built = !may_build_an_extension(req.task.backend, req.candidate_source)
                       || std::filesystem::exists(build_dir_of(req.candidate_source));
    // timed calls are counted twice (the host cross-check, the rotated input sets' checks),
    // plus the coverage profile and the two-runs determinism check
    const int64_t calls = t.correctness_trials + t.warmup_runs
                          + (t.measure_performance ? t.perf_trials * 2 + 2 : 0);
    t.timeout_s = scaled_timeout_s(t.timeout_s, opts_.scaled_timeout_base_s,
                                   built && !time_compiled ? 0 : opts_.scaled_timeout_build_s,
                                   calls, cached->second.mean_ms);
  }
  json_writer w;
  w.begin_object()
    .field("op", "evaluate")
    .field("id", next_id_++)
    .field("reference", req.task.reference_source)
    .field("candidate", req.candidate_source)
    .field("backend", to_string(req.task.backend))
    .field("precision", to_string(req.task.precision))
    .field("correctness_trials", t.correctness_trials)
    .field("perf_trials", t.measure_performance ? t.perf_trials : 0)
    .field("timing_precision", t.timing_precision)
    .field("warmup_runs", t.warmup_runs)
    .field("seed", t.seed)
    .field("atol", t.atol)
    .field("rtol", t.rtol)
    .field("time_reference", time_reference)
    .field("time_compiled_reference", time_compiled)
    .field("compile_check", against_compile && req.timing.measure_performance)
    .field("inputs_on", opts_.inputs_on)
    .field("init_on", opts_.init_on)
    .field("timing_input_sets", static_cast<int64_t>(opts_.timing_input_sets))
    .field("strict_rtol", opts_.strict_rtol)
    .field("strict_floor", opts_.strict_floor)
    .field("strict_norm_tol", opts_.strict_norm_tol)
    .field("min_time_coverage", opts_.min_time_coverage)
    .field("profile_coverage", opts_.profile_coverage)
    .field("memory_limit_mb", opts_.memory_limit_gb * 1024.0)
    .field("shared_reference_mb", opts_.shared_reference_mb)
    .field("build_dir", build_dir_of(req.candidate_source))
    .field("timeout_s", t.timeout_s)
    .end_object();
  auto deadline =
    std::chrono::milliseconds(static_cast<int64_t>(t.timeout_s * 1000)) + opts_.kill_grace;
  const auto stray_before = worker_->stray_answers();
  auto answer = request(w.str(), deadline);
  // Lines on the answer pipe that did not answer this request: something wrote there during
  // this candidate's evaluation. The real answer is still the worker's, but nothing of this
  // evaluation is trusted: not correct, and its reference times are not kept.
  const bool forged = worker_->stray_answers() > stray_before;
  ++evaluations_;
  ++since_start_;
  auto printed = worker_->take_output();
  if (!answer) {
    // The candidate took the worker down (or hung it): a verdict, and a fresh worker next time.
    worker_lost(res, answer.error(), printed, "");
    return finish();
  }
  auto parsed = parse_evaluate_answer(*answer, opts_, t.correctness_trials);
  if (!parsed) {
    unreadable_answer(res, *answer);
    return finish();
  }
  {
    auto device = std::move(res.device);
    auto id = res.id;
    res = std::move(parsed->verdict);
    res.device = std::move(device);
    res.id = id;
  }
  if (res.reference_shared)
    ++references_shared_;
  // The reference's timings: answered when asked for (and cached), else the cached ones.
  auto answered_reference = res.reference_runtime;
  auto answered_compiled = res.compiled_reference_runtime;
  res.reference_runtime = {};
  res.compiled_reference_runtime = {};
  if (forged) {
    res.correct = res.strict_correct = res.kernelbench_correct = false;
    res.hack_flags.push_back("protocol_violation");
    res.error_excerpt = bounded("lines that answered no request appeared on the worker's answer "
                                "pipe during this evaluation (a forged verdict?); they were "
                                "ignored\n" + res.error_excerpt, opts_.excerpt_bytes);
    if (res.error == eval_error::none)
      res.error = eval_error::mismatch;
  }
  if (time_reference) {
    res.reference_runtime = answered_reference;
    if (res.reference_runtime.trials > 0 && !forged)
      remember_reference(key, res.reference_runtime);
  } else if (cached != reference_times_.end()) {
    res.reference_runtime = cached->second;
    ++ref_cache_hits_;
  }
  if (time_compiled) {
    res.compiled_reference_runtime = answered_compiled;
    if (res.compiled_reference_runtime.trials > 0 && !forged)
      remember_reference(compiled_key, res.compiled_reference_runtime);
  } else if (want_compiled && compiled_cached != reference_times_.end()) {
    res.compiled_reference_runtime = compiled_cached->second;
  }
  auto& against = against_compile ? res.compiled_reference_runtime : res.reference_runtime;
  // Timed and correct by either verdict: kbrl-eval's KernelBench fast_p needs the speedup of
  // a candidate only KernelBench's check accepts; reward and metrics look at it only when
  // their verdict is correct.
  if ((res.correct || res.kernelbench_correct) && res.kernel_runtime.mean_ms > 0
      && against.mean_ms > 0) {
    res.speedup = against.mean_ms / res.kernel_runtime.mean_ms;
    if (res.speedup > opts_.suspicious_speedup)
      res.hack_flags.push_back("suspicious_speedup");
  }
  if (printed.total_bytes > 0 && res.error != eval_error::none && res.error_excerpt.empty())
    res.error_excerpt = bounded(printed.text(), opts_.excerpt_bytes);
  if (worker_->isolation() == isolation_mode::none)
    res.isolation += res.isolation.empty() ? "no sandbox (eval.isolation = none)"
                                           : ", no sandbox (eval.isolation = none)";

  // 4. After a CUDA error the context may be poisoned for everything that follows.
  if (parsed->sticky_cuda_error) {
    needs_restart_ = true;
    last_failure_ = "sticky CUDA error: " + bounded(res.error_excerpt, 300);
  } else if (res.error == eval_error::runtime && !canary_ok()) {
    needs_restart_ = true;
  }
  maybe_recycle();
  return finish();
}

} // namespace kbrl::eval
