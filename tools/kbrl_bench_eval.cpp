// kbrl-bench-eval: evaluator throughput on a fixed candidate set, for bench/eval_throughput.
//
//   kbrl-bench-eval --manifest M --candidates DIR --kernelbench DIR --builders 8 --gpu 0
//                   [--out kbrl.json] [--compare baseline.json] [key=value ...]
//
// Sends every candidate of the manifest at once to an evaluator supervisor (CPU builders + one
// evaluator per GPU, as kbrl-node runs it), waits for every verdict, and reports candidates per
// minute, where the time went, and - with --compare - whether each verdict matches the
// KernelBench-protocol baseline's.

#include "actors/evaluator_supervisor.hpp"
#include "messages/status_details.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/node/node_plan.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace {

namespace fs = std::filesystem;

struct manifest_entry {
  std::string id, problem, candidate, kind, duplicate_of, backend = "cuda", precision = "fp32";
};

std::string field(simdjson::dom::element e, const char* key) {
  std::string_view sv;
  return e[key].get(sv) ? std::string{} : std::string(sv);
}

/// The baseline's `correct` per candidate id, from its results.json.
std::map<std::string, bool> baseline_verdicts(const std::string& path) {
  std::map<std::string, bool> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc))
    return out;
  simdjson::dom::array cands;
  if (doc["candidates"].get(cands))
    return out;
  for (auto c : cands) {
    bool correct = false;
    if (c["correct"].get(correct) != simdjson::SUCCESS)
      correct = false; // a baseline record without a verdict counts as incorrect
    out[field(c, "id")] = correct;
  }
  return out;
}

using kbrl::done_atom;

/// What the collector fills in; read by main only after the collector said it is done.
struct collected {
  std::vector<kbrl::eval_result> results;
  std::vector<double> done_at;
  size_t answered = 0;
};

caf::behavior collect_verdicts(caf::event_based_actor* self,
                               kbrl::evaluator_supervisor_actor sup,
                               std::vector<kbrl::eval_request> reqs,
                               std::vector<manifest_entry> entries,
                               std::shared_ptr<collected> out, caf::actor notify,
                               std::chrono::steady_clock::time_point t0) {
  auto n = reqs.size();
  for (size_t i = 0; i < n; ++i) {
    auto on_answer = [self, i, n, entries, out, notify, t0](kbrl::eval_result r) {
      out->results[i] = std::move(r);
      auto at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out->done_at[i] = at;
      auto& v = out->results[i];
      std::printf("[%zu/%zu] %5.1f s  %s %-48s %-13s build %5.1f s, on GPU %5.1f s\n",
                  ++out->answered, n, at, entries[i].id.c_str(), entries[i].problem.c_str(),
                  v.correct ? "correct" : kbrl::to_string(v.error),
                  v.build_seconds + v.compile_seconds, v.total_seconds);
      std::fflush(stdout);
      if (out->answered == n) {
        self->send(notify, done_atom::value);
        self->quit();
      }
    };
    self->request(sup, caf::infinite, kbrl::evaluate_atom::value, reqs[i])
      .then([on_answer](kbrl::eval_result& r) { on_answer(std::move(r)); },
            [on_answer, self](caf::error& err) {
              kbrl::eval_result r;
              r.error = kbrl::eval_error::infrastructure;
              r.error_excerpt = self->system().render(err);
              on_answer(std::move(r));
            });
  }
  return {[](done_atom) {}};
}

/// The worker's own account of its time, summed by phase over all candidates (first-seen
/// order): tells which check or step an evaluator spends its time on.
void print_phase_sums(const std::vector<kbrl::eval_result>& results) {
  std::vector<std::pair<std::string, double>> sums;
  for (auto& r : results)
    for (auto& ph : r.phases) {
      auto it = std::find_if(sums.begin(), sums.end(),
                             [&](auto& s) { return s.first == ph.phase; });
      if (it == sums.end())
        sums.emplace_back(ph.phase, ph.seconds);
      else
        it->second += ph.seconds;
    }
  if (sums.empty())
    return;
  std::printf("the workers' phases (summed over candidates):\n");
  for (auto& [phase, seconds] : sums)
    std::printf("  %-32s %8.1f s\n", phase.c_str(), seconds);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-bench-eval: evaluator throughput on a candidate set (bench/eval_throughput)"};
  std::string manifest_path, candidates_dir, kernelbench_dir, out_path, compare_path;
  std::vector<int> gpus;
  size_t builders = 0;
  double timing_precision = 0;
  std::vector<std::string> overrides;
  app.add_option("--manifest", manifest_path, "manifest.json of the candidate set")->required();
  app.add_option("--candidates", candidates_dir, "Folder of the candidate files")->required();
  app.add_option("--kernelbench", kernelbench_dir, "Folder holding level1/, level2/")->required();
  app.add_option("--builders", builders, "CPU build workers (0: GPUs build themselves)");
  app.add_option("--gpu", gpus, "CUDA devices, one evaluator each (none: one CPU evaluator)")
    ->delimiter(',');
  app.add_option("--out", out_path, "Write the verdicts and totals as JSON here");
  app.add_option("--compare", compare_path, "Baseline results.json to compare verdicts with");
  app.add_option("--timing-precision", timing_precision,
                 "Adaptive timing (rl.timing_precision): 0 (default) times 100 runs per "
                 "candidate as KernelBench does")
    ->check(CLI::Range(0.0, 0.5));
  std::string keep_dir;
  app.add_option("--keep", keep_dir,
                 "Work in this folder and keep it (build folders with their .ninja_log)");
  app.add_option("overrides", overrides, "Run-config overrides (eval.*), key=value");
  kbrl::config::add_version_flag(app, "kbrl-bench-eval");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.load(manifest_path).get(doc)) {
    std::fprintf(stderr, "kbrl-bench-eval: %s: %s\n", manifest_path.c_str(),
                 simdjson::error_message(err));
    return 2;
  }
  simdjson::dom::array list;
  if (doc.get(list)) {
    std::fprintf(stderr, "kbrl-bench-eval: %s: expected a JSON array\n", manifest_path.c_str());
    return 2;
  }
  std::vector<manifest_entry> entries;
  for (auto e : list) {
    manifest_entry m{field(e, "id"), field(e, "problem"), field(e, "candidate"), field(e, "kind")};
    m.duplicate_of = field(e, "duplicate_of");
    if (auto b = field(e, "backend"); !b.empty())
      m.backend = b;
    entries.push_back(std::move(m));
  }

  kbrl::config::run_config run;
  for (auto& o : overrides)
    if (auto err = run.apply_override(o)) {
      std::fprintf(stderr, "kbrl-bench-eval: %s\n", kbrl::describe(err).c_str());
      return 2;
    }
  char tmpl[] = "/tmp/kbrl-bench-XXXXXX";
  std::string scratch = keep_dir;
  if (scratch.empty())
    scratch = ::mkdtemp(tmpl);
  else
    fs::create_directories(scratch);
  fs::permissions(scratch, fs::perms::others_exec, fs::perm_options::add);
  auto engine = kbrl::evaluation_engine_options(run);
  engine.worker.extensions_dir = scratch + "/extensions";
  engine.reference_cache_file.clear(); // a cold start, like the baseline
  std::vector<kbrl::evaluator_slot> slots;
  auto add_slot = [&](int gpu, int index) {
    kbrl::evaluator_slot s;
    s.name = kbrl::actor_name("bench", "evaluator", index);
    s.gpu = gpu;
    s.engine = engine;
    s.engine.worker.scratch_dir = scratch + "/evaluator." + std::to_string(index);
    s.engine.worker.gpu = gpu;
    slots.push_back(std::move(s));
  };
  if (gpus.empty())
    add_slot(-1, 0);
  for (size_t i = 0; i < gpus.size(); ++i)
    add_slot(gpus[i], static_cast<int>(i));
  auto builder_engine = engine;
  builder_engine.worker.scratch_dir = scratch + "/builders";
  builder_engine.worker.gpu = -1;
  auto supervision = kbrl::evaluation_supervision(run);
  supervision.build_workers = builders;
  supervision.queue_capacity = entries.size() + 1;

  std::vector<kbrl::eval_request> reqs;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& m = entries[i];
    auto level = m.problem.rfind("level2", 0) == 0 ? 2 : 1;
    auto prob = kbrl::eval::load_problem_file(kernelbench_dir + "/" + m.problem, level);
    if (!prob) {
      std::fprintf(stderr, "kbrl-bench-eval: %s\n", kbrl::describe(prob.error()).c_str());
      return 2;
    }
    kbrl::eval_request r;
    r.id = i;
    r.task = *prob;
    // "cpu" candidates (CPU C++ extensions of the smoke set) are checked as the torch backend.
    r.task.backend = m.backend == "torch" || m.backend == "cpu" ? kbrl::kernel_backend::torch
                                                              : kbrl::kernel_backend::cuda;
    auto candidate = kbrl::io::read_text_file(candidates_dir + "/" + m.candidate);
    if (!candidate) {
      std::fprintf(stderr, "kbrl-bench-eval: %s\n", kbrl::describe(candidate.error()).c_str());
      return 2;
    }
    r.candidate_source = std::move(*candidate);
    r.timing.timeout_s = 600;
    r.timing.timing_precision = timing_precision;
    r.trace = m.id;
    reqs.push_back(std::move(r));
  }

  caf::actor_system_config cfg;
  kbrl::register_message_types(cfg);
  caf::actor_system sys{cfg};
  kbrl::actor_stats stats;
  stats.name = "bench/evaluator-supervisor";
  stats.node = "bench";
  stats.role = "evaluator-supervisor";
  auto sup = sys.spawn(kbrl::evaluator_supervisor, stats, supervision, slots, builder_engine);

  std::printf("kbrl-bench-eval: %zu candidates, %zu builder(s), %zu evaluator(s)\n", reqs.size(),
              builders, slots.size());
  auto t0 = std::chrono::steady_clock::now();
  auto run_state = std::make_shared<collected>();
  run_state->results.resize(reqs.size());
  run_state->done_at.resize(reqs.size(), 0);
  {
    caf::scoped_actor self{sys};
    // An event-based collector sends everything at once and prints each verdict as it arrives
    // (in completion order, not submission order).
    sys.spawn(collect_verdicts, sup, reqs, entries, run_state,
              caf::actor_cast<caf::actor>(self), t0);
    self->receive([](done_atom) {});
  }
  auto& results = run_state->results;
  auto& done_at = run_state->done_at;
  auto total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string builds = "?", reused = "?";
  {
    caf::scoped_actor self{sys};
    self->request(sup, std::chrono::seconds(10), kbrl::status_atom::value)
      .receive(
        [&](kbrl::actor_status& st) {
          builds = kbrl::detail_of(st, "builds", builds);
          reused = kbrl::detail_of(st, "builds reused (duplicates)", reused);
        },
        [&](caf::error&) {});
  }
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);

  // Where the time went, summed over candidates: CPU builds run in parallel with the GPU, so
  // only the evaluator's own phases add up to (at most) the GPU's busy time.
  double build_sum = 0, load_sum = 0, correctness_sum = 0, timing_sum = 0, reference_sum = 0,
         eval_sum = 0;
  size_t correct = 0;
  for (auto& r : results) {
    build_sum += r.build_seconds;
    load_sum += r.compile_seconds;
    correctness_sum += r.correctness_seconds;
    timing_sum += r.timing_seconds;
    reference_sum += r.reference_seconds;
    eval_sum += r.total_seconds;
    correct += r.correct ? 1 : 0;
  }
  auto per_minute = reqs.size() / (total / 60.0);
  std::printf("kbrl: %zu candidates in %.1f s = %.2f candidates/min; %zu correct; builds %s, "
              "reused %s\n",
              reqs.size(), total, per_minute, correct, builds.c_str(), reused.c_str());
  std::printf("where the time went (summed over candidates):\n"
              "  CPU builders, building ahead     %8.1f s  (%zu builders in parallel)\n"
              "  evaluators, building or loading  %8.1f s\n"
              "  evaluators, correctness trials   %8.1f s\n"
              "  evaluators, timing the candidate %8.1f s\n"
              "  evaluators, reference runs       %8.1f s\n"
              "  evaluators, in all               %8.1f s  (%.0f%% of %zu evaluator(s) x wall)\n",
              build_sum, builders, load_sum, correctness_sum, timing_sum, reference_sum, eval_sum,
              100.0 * eval_sum / (total * static_cast<double>(slots.size())), slots.size());

  print_phase_sums(results);

  size_t agree = 0, compared = 0;
  if (!compare_path.empty()) {
    auto base = baseline_verdicts(compare_path);
    for (size_t i = 0; i < entries.size(); ++i) {
      auto it = base.find(entries[i].id);
      if (it == base.end())
        continue;
      ++compared;
      // The baseline is KernelBench's own check: compared with kbrl's KernelBench verdict (the
      // strict one may refuse what allclose accepts).
      auto& r = results[i];
      if (it->second == r.kernelbench_correct)
        ++agree;
      else
        std::printf("verdicts differ on %s (%s): baseline %s, kbrl's KernelBench verdict %s "
                    "(strict %s, %s)\n",
                    entries[i].id.c_str(), entries[i].problem.c_str(),
                    it->second ? "correct" : "incorrect",
                    r.kernelbench_correct ? "correct" : "incorrect",
                    r.strict_correct ? "correct" : "incorrect", kbrl::to_string(r.error));
    }
    std::printf("verdicts: %zu of %zu agree with the baseline\n", agree, compared);
  }

  if (!out_path.empty()) {
    kbrl::json_writer w;
    w.begin_object()
      .field("total_seconds", total)
      .field("candidates_per_minute", per_minute)
      .field("builders", static_cast<uint64_t>(builders))
      .field("evaluators", static_cast<uint64_t>(slots.size()))
      .field("builds", builds)
      .field("builds_reused", reused)
      .field("inputs_on", engine.inputs_on)
      .field("init_on", engine.init_on)
      .field("correctness", engine.correctness)
      .field("agree", static_cast<uint64_t>(agree))
      .field("compared", static_cast<uint64_t>(compared));
    w.key("candidates").begin_array();
    for (size_t i = 0; i < results.size(); ++i) {
      auto& r = results[i];
      w.begin_object()
        .field("id", entries[i].id)
        .field("problem", entries[i].problem)
        .field("kind", entries[i].kind)
        .field("compiled", r.compiled)
        .field("correct", r.correct)
        .field("strict_correct", r.strict_correct)
        .field("kernelbench_correct", r.kernelbench_correct)
        .field("time_coverage", r.time_coverage)
        .field("error", kbrl::to_string(r.error))
        .field("speedup", r.speedup)
        .field("kernel_ms", r.kernel_runtime.mean_ms)
        .field("reference_ms", r.reference_runtime.mean_ms)
        .field("compile_seconds", r.compile_seconds)
        .field("build_seconds", r.build_seconds)
        .field("correctness_seconds", r.correctness_seconds)
        .field("timing_seconds", r.timing_seconds)
        .field("reference_seconds", r.reference_seconds)
        .field("evaluator_seconds", r.total_seconds)
        .field("done_at_seconds", done_at[i])
        .field("evaluator", r.evaluator);
      w.key("phase_seconds").begin_object();
      for (auto& ph : r.phases)
        w.field(ph.phase, ph.seconds);
      w.end_object().end_object();
    }
    w.end_array().end_object();
    std::ofstream(out_path) << w.str() << "\n";
  }
  std::error_code ec;
  if (keep_dir.empty())
    fs::remove_all(scratch, ec);
  return 0;
}
