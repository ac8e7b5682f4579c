// kbrl-eval-kernel: evaluate one candidate kernel against its problem in an isolated worker,
// the way every kbrl reward is computed (like KernelBench's run_and_check).
//
//   kbrl-eval-kernel --problem 1/19 --candidate relu.py --backend cuda
//   kbrl-eval-kernel --problem problems/1_relu.py --candidate c.py --backend torch --json
//   kbrl-eval-kernel --static-only generations/ more.py --backend triton [--json]
//
// Exit status: 0 correct, 1 incorrect (ran, outputs differ, or refused by a static check),
// 2 failed (compile, runtime, timeout, crash), 3 usage or infrastructure error.
// --static-only pre-screens files without running anything (no problem, no process): it prints
// each file's static findings and exits 0 when none is an error, 1 when any file is refused.

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/eval/answer_parsing.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/static_report.hpp"
#include "runtime/eval/verdict_format.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/node/node_plan.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace {

template <class Enum>
bool parse_enum(const std::string& text, Enum& out, std::initializer_list<Enum> all) {
  for (auto e : all)
    if (text == kbrl::to_string(e)) {
      out = e;
      return true;
    }
  return false;
}

/// --static-only: the static checks over files and directories, nothing run.
int static_only(const std::vector<std::string>& paths, const std::string& backend,
                const std::string& precision, const std::vector<std::string>& overrides,
                bool json) {
  kbrl::eval::static_check_options sco;
  if (!parse_enum(backend, sco.backend,
                  {kbrl::kernel_backend::cuda, kbrl::kernel_backend::triton,
                   kbrl::kernel_backend::torch, kbrl::kernel_backend::hip,
                   kbrl::kernel_backend::cute, kbrl::kernel_backend::tilelang,
                   kbrl::kernel_backend::thunderkittens})) {
    std::fprintf(stderr, "kbrl-eval-kernel: --backend %s: unknown backend\n", backend.c_str());
    return 3;
  }
  if (!parse_enum(precision, sco.precision,
                  {kbrl::kernel_precision::fp32, kbrl::kernel_precision::fp16,
                   kbrl::kernel_precision::bf16})) {
    std::fprintf(stderr, "kbrl-eval-kernel: --precision %s: expected fp32, fp16 or bf16\n",
                 precision.c_str());
    return 3;
  }
  kbrl::config::run_config run;
  for (auto& o : overrides)
    if (auto err = run.apply_override(o)) {
      std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(err).c_str());
      return 3;
    }
  sco.overrides = kbrl::evaluation_engine_options(run).rule_overrides;
  if (auto ok = kbrl::eval::validate_overrides(sco.overrides); !ok) {
    std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(ok.error()).c_str());
    return 3;
  }
  auto files = kbrl::eval::candidate_files(paths);
  if (!files) {
    std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(files.error()).c_str());
    return 3;
  }
  auto screened = kbrl::eval::screen_files(*files, sco);
  if (!screened) {
    std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(screened.error()).c_str());
    return 3;
  }
  std::fputs((json ? kbrl::eval::screen_json(*screened) : kbrl::eval::screen_text(*screened)).c_str(),
             stdout);
  bool refused = std::any_of(screened->begin(), screened->end(),
                             [](const auto& f) { return f.result.rejected(); });
  return refused ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-eval-kernel: evaluate one candidate kernel against its KernelBench-style "
               "problem\n(static checks, build, correctness trials, timing) in an isolated "
               "worker process"};
  std::string problem_spec, candidate_path, backend = "cuda", precision = "fp32", isolation,
                                              python, scratch;
  std::vector<std::string> roots;
  int trials = 5, perf_trials = 100, gpu = -1;
  double timeout_s = 300, timing_precision = 0;
  uint64_t seed = 42;
  bool json = false, no_timing = false, list_rules = false;
  std::vector<std::string> overrides;
  app.add_option("--problem", problem_spec, "Problem file, or LEVEL/ID (e.g. 1/19)")->required();
  app.add_option("--candidate", candidate_path, "Candidate program (ModelNew)")
    ->required()
    ->check(CLI::ExistingFile);
  app.add_option("--kernelbench,--problems-root", roots,
                 "Where LEVEL/ID problems are looked up before $KERNELBENCH_ROOT (kbrl-eval's "
                 "--kernelbench, the run config's problems.root)");
  app.add_option("--backend", backend, "cuda, triton, torch, hip, cute, tilelang, thunderkittens");
  app.add_option("--precision", precision, "fp32, fp16 or bf16");
  app.add_option("--trials", trials, "Correctness trials")->check(CLI::Range(1, 1000));
  app.add_option("--perf-trials", perf_trials, "Timed runs")->check(CLI::Range(0, 100000));
  app.add_option("--timing-precision", timing_precision,
                 "Adaptive timing: stop once the mean's 95 % confidence interval is within this "
                 "share of it (0.01: +-1 %), 10 runs and 100 ms at least, --perf-trials at "
                 "most; 0 (default): exactly --perf-trials runs, as KernelBench")
    ->check(CLI::Range(0.0, 0.5));
  app.add_flag("--no-timing", no_timing, "Check correctness only");
  app.add_option("--seed", seed, "Base seed of the correctness trials");
  app.add_option("--timeout", timeout_s, "Seconds for the whole evaluation")
    ->check(CLI::PositiveNumber);
  app.add_option("--gpu", gpu, "CUDA device; -1 (default) runs on the CPU");
  app.add_option("--isolation", isolation, "auto, bwrap, unshare or none (default: auto)");
  app.add_option("--python", python, "Python with torch (default: the first that imports it)");
  app.add_option("--scratch", scratch, "Scratch folder (default: a fresh one under /tmp)");
  app.add_flag("--json", json, "Print the verdict as JSON");
  app.add_flag("--list-rules", list_rules, "List the static-check rules and exit");
  app.add_option("overrides", overrides,
                 "Run-config overrides, e.g. eval.rules_warn=[\"stream_injection\"]");
  // --list-rules needs neither a problem nor a candidate.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--list-rules") {
      for (auto& r : kbrl::eval::all_rules())
        std::printf("%-22s %-8s %s\n", r.id.c_str(), kbrl::eval::to_string(r.default_level),
                    r.description.c_str());
      return 0;
    }
  // --static-only needs neither a problem nor a worker: its own small command line.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--static-only") {
      CLI::App screen{"kbrl-eval-kernel --static-only: the static checks over candidate files "
                      "and directories, nothing run"};
      std::vector<std::string> paths, cfg;
      std::string b = "cuda", p = "fp32";
      bool as_json = false, flag = false;
      screen.add_flag("--static-only", flag, "Pre-screen files with the static checks only");
      screen.add_option("--backend", b, "cuda (default), triton, torch, hip, cute, tilelang, "
                                        "thunderkittens");
      screen.add_option("--precision", p, "fp32 (default), fp16 or bf16");
      screen.add_flag("--json", as_json, "Print the findings as JSON");
      screen.add_option("--config", cfg, "Run-config overrides, e.g. eval.rules_warn=[...]");
      screen.add_option("paths", paths, "Candidate files or directories of them")->required();
      kbrl::config::add_version_flag(screen, "kbrl-eval-kernel");
      if (auto status = kbrl::config::parse_command_line(screen, argc, argv, 3))
        return *status;
      return static_only(paths, b, p, cfg, as_json);
    }
  kbrl::config::add_version_flag(app, "kbrl-eval-kernel");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 3))
    return *status;

  auto prob = kbrl::eval::find_problem(problem_spec, roots);
  if (!prob) {
    std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(prob.error()).c_str());
    return 3;
  }
  if (!parse_enum(backend, prob->backend,
                  {kbrl::kernel_backend::cuda, kbrl::kernel_backend::triton,
                   kbrl::kernel_backend::torch, kbrl::kernel_backend::hip,
                   kbrl::kernel_backend::cute, kbrl::kernel_backend::tilelang,
                   kbrl::kernel_backend::thunderkittens})) {
    std::fprintf(stderr, "kbrl-eval-kernel: --backend %s: unknown backend\n", backend.c_str());
    return 3;
  }
  if (!parse_enum(precision, prob->precision,
                  {kbrl::kernel_precision::fp32, kbrl::kernel_precision::fp16,
                   kbrl::kernel_precision::bf16})) {
    std::fprintf(stderr, "kbrl-eval-kernel: --precision %s: expected fp32, fp16 or bf16\n",
                 precision.c_str());
    return 3;
  }
  auto candidate_source = kbrl::io::read_text_file(candidate_path);
  if (!candidate_source) {
    std::fprintf(stderr, "kbrl-eval-kernel: --candidate: %s\n",
                 kbrl::describe(candidate_source.error()).c_str());
    return 3;
  }
  // A model's whole answer (.txt, .md): the program is taken out of it as kbrl-eval does.
  const auto ext = std::filesystem::path(candidate_path).extension();
  if (ext == ".txt" || ext == ".md") {
    auto found = kbrl::eval::extract_kernel_code(*candidate_source);
    if (!found) {
      std::fprintf(stderr, "kbrl-eval-kernel: --candidate %s: no program in the answer: %s\n",
                   candidate_path.c_str(), kbrl::describe(found.error()).c_str());
      return 1; // a format failure of the candidate, as kbrl-eval scores it
    }
    std::fprintf(stderr, "kbrl-eval-kernel: the program of %s (%s)\n", candidate_path.c_str(),
                 found->how.c_str());
    *candidate_source = std::move(found->code);
  }

  kbrl::config::run_config run;
  for (auto& o : overrides)
    if (auto err = run.apply_override(o)) {
      std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(err).c_str());
      return 3;
    }
  if (!isolation.empty())
    if (auto err = run.apply_override("eval.isolation=" + isolation)) {
      std::fprintf(stderr, "kbrl-eval-kernel: --isolation: %s\n", kbrl::describe(err).c_str());
      return 3;
    }
  if (!python.empty())
    (void)run.apply_override("eval.python=\"" + python + "\"");
  auto opts = kbrl::evaluation_engine_options(run);
  if (auto ok = kbrl::eval::validate_overrides(opts.rule_overrides); !ok) {
    std::fprintf(stderr, "kbrl-eval-kernel: %s\n", kbrl::describe(ok.error()).c_str());
    return 3;
  }
  bool own_scratch = scratch.empty();
  if (own_scratch) {
    char tmpl[] = "/tmp/kbrl-eval-XXXXXX";
    scratch = ::mkdtemp(tmpl);
    // Searchable by others: as root, the worker runs as nobody inside it.
    std::filesystem::permissions(scratch, std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }
  opts.worker.scratch_dir = scratch + "/worker";
  opts.worker.extensions_dir = scratch + "/extensions";
  opts.worker.gpu = gpu;

  kbrl::eval_request req;
  req.id = 1;
  req.candidate_source = *candidate_source;
  req.task = *prob;
  req.timing.correctness_trials = trials;
  req.timing.perf_trials = perf_trials;
  req.timing.timing_precision = timing_precision;
  req.timing.measure_performance = !no_timing && perf_trials > 0;
  req.timing.seed = seed;
  req.timing.timeout_s = timeout_s;
  req.trace = candidate_path;

  kbrl::eval_result res;
  {
    // The engine starts its worker only once the static checks have passed.
    kbrl::eval::eval_engine engine{opts};
    res = engine.evaluate(req);
    res.evaluator = "kbrl-eval-kernel";
  }
  if (own_scratch) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  std::fputs((json ? kbrl::eval::verdict_json(res) + "\n" : kbrl::eval::verdict_text(res)).c_str(),
             stdout);
  if (res.correct)
    return 0;
  if (res.error == kbrl::eval_error::mismatch || res.error == kbrl::eval_error::static_check)
    return 1;
  return res.error == kbrl::eval_error::infrastructure ? 3 : 2;
}
