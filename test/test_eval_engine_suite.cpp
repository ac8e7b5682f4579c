// The evaluation engine end to end with the real Python worker (torch on the CPU here; CUDA and
// Triton candidates run where a GPU is present): every candidate in test/data/candidates_runtime
// declares in its first line what the worker must answer ("# kbrl-test: problem=... expect_...").
// After each one - crashes, hangs, hacks - the same engine evaluates a good candidate correctly.

#include "runtime/device/devices.hpp"
#include "runtime/eval/build_artifact.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/python_probe.hpp"
#include "cluster_fixture.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace kbrl;
using namespace kbrl::eval;

namespace {

namespace fs = std::filesystem;

std::string data(const std::string& rel) {
  return std::string(KBRL_TEST_DATA) + "/" + rel;
}

/// Files under `root` whose names end with `suffix` (none when root does not exist).
std::vector<std::string> find_files(const std::string& root, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(it->path().string());
  }
  return out;
}

/// Every built extension library under `root` with its modification time: equal before and
/// after an evaluation when nothing was rebuilt.
std::map<std::string, fs::file_time_type> built_libraries(const std::string& root) {
  std::map<std::string, fs::file_time_type> out;
  for (auto& so : find_files(root, ".so"))
    out[so] = fs::last_write_time(so);
  return out;
}

/// The key=value pairs of a candidate's "# kbrl-test:" lines. Where a GPU is present, a key with
/// the suffix _cuda (expect_error_cuda=...) replaces the plain one.
std::map<std::string, std::string> expectations(const std::string& source, bool cuda) {
  std::map<std::string, std::string> out, on_cuda;
  std::istringstream lines(source);
  std::string line;
  while (std::getline(lines, line)) {
    auto pos = line.find("kbrl-test:");
    if (line.rfind("#", 0) != 0 || pos == std::string::npos)
      continue;
    std::istringstream words(line.substr(pos + 10));
    std::string w;
    while (words >> w) {
      auto eq = w.find('=');
      if (eq == std::string::npos)
        continue;
      auto key = w.substr(0, eq);
      if (key.size() > 5 && key.compare(key.size() - 5, 5, "_cuda") == 0)
        on_cuda[key.substr(0, key.size() - 5)] = w.substr(eq + 1);
      else
        out[key] = w.substr(eq + 1);
    }
  }
  if (cuda)
    for (auto& [k, v] : on_cuda)
      out[k] = v;
  return out;
}

struct engine_fixture {
  test::temp_dir dir;
  engine_options opts;
  bool cuda = cuda_device_count() > 0;

  engine_fixture() {
    opts.worker.python = resolve_python("auto");
    opts.worker.script = std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
    opts.worker.scratch_dir = dir / "scratch";
    opts.worker.extensions_dir = dir / "extensions";
    opts.worker.gpu = cuda ? 0 : -1;
  }

  eval_request request(const std::string& candidate_file, uint64_t id) {
    auto source = test::read_file(candidate_file);
    auto exp = expectations(source, cuda);
    auto prob = load_problem_file(data("problems/" + exp["problem"]));
    BOOST_REQUIRE_MESSAGE(prob, test::why(prob));
    eval_request req;
    req.id = id;
    req.candidate_source = source;
    req.task = *prob;
    req.task.backend = kernel_backend::torch;
    if (exp.count("backend"))
      req.task.backend = exp["backend"] == "cuda" ? kernel_backend::cuda : kernel_backend::triton;
    if (exp["precision"] == "bf16")
      req.task.precision = kernel_precision::bf16;
    req.timing.perf_trials = exp.count("perf_trials") ? std::stoi(exp["perf_trials"]) : 0;
    req.timing.measure_performance = req.timing.perf_trials > 0;
    req.timing.timeout_s = exp.count("timeout_s") ? std::stod(exp["timeout_s"]) : 60;
    req.trace = fs::path(candidate_file).filename().string();
    return req;
  }

  /// The C++ load_inline candidate, built and checked on the CPU without timing: the build
  /// cases' request.
  eval_request load_inline_cpu_request(uint64_t id, double timeout_s) {
    auto req = request(data("candidates_runtime/relu_load_inline_cpu.py"), id);
    req.task.backend = kernel_backend::torch;
    req.timing.timeout_s = timeout_s;
    req.timing.perf_trials = 0;
    req.timing.measure_performance = false;
    return req;
  }

  void check_good_after(eval_engine& engine, const std::string& after, uint64_t id) {
    auto good = engine.evaluate(request(data("candidates_runtime/relu_correct_clamp.py"), id));
    BOOST_CHECK_MESSAGE(good.correct, "a good candidate after " << after << " was not judged "
                                                                << "correct: "
                                                                << to_string(good.error) << " "
                                                                << good.error_excerpt);
  }
};

/// What the engine reports for a worker expectation ("killed": the engine kills at the deadline).
eval_error expected_error(const std::string& word) {
  if (word == "killed")
    return eval_error::timeout;
  for (auto e : {eval_error::none, eval_error::compile, eval_error::runtime, eval_error::mismatch,
                 eval_error::timeout, eval_error::crashed})
    if (word == to_string(e))
      return e;
  return eval_error::infrastructure;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(eval_engine_suite, engine_fixture)

BOOST_AUTO_TEST_CASE(every_runtime_candidate_gets_its_verdict_and_the_engine_recovers) {
  // Static rules off: this exercises what the worker itself detects at run time.
  for (auto& rule : all_rules())
    opts.rule_overrides[rule.id] = severity::off;
  eval_engine engine{opts};
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(data("candidates_runtime")))
    files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  uint64_t id = 1;
  size_t checked = 0;
  for (auto& file : files) {
    auto exp = expectations(test::read_file(file), cuda);
    auto name = fs::path(file).filename().string();
    auto req = exp["requires"];
    if ((req == "cuda" || req == "triton") && !cuda)
      continue;
    if (req == "cpu" && cuda)
      continue;
    BOOST_TEST_CONTEXT(name) {
      const auto workers_before = engine.workers_started();
      // A candidate that tests the memory limit gets an engine with its limit (the limit is an
      // engine option); left at the default 16 GiB it would fill this machine first.
      std::unique_ptr<eval_engine> limited;
      if (exp.count("memory_limit_mb")) {
        auto o = opts;
        o.memory_limit_gb = std::stod(exp["memory_limit_mb"]) / 1024.0;
        limited = std::make_unique<eval_engine>(o);
      }
      auto res = (limited ? *limited : engine).evaluate(request(file, id++));
      const auto why_restart = engine.last_failure(); // cleared when the next worker starts
      auto want = expected_error(exp["expect_error"]);
      BOOST_CHECK_MESSAGE(res.error == want, name << ": got " << to_string(res.error)
                                                  << ", expected " << exp["expect_error"]
                                                  << "; " << res.error_excerpt.substr(0, 300));
      if (exp.count("expect_correct"))
        BOOST_CHECK_EQUAL(res.correct, exp["expect_correct"] == "true");
      if (exp.count("expect_flags")) {
        std::istringstream flags(exp["expect_flags"]);
        std::string f;
        while (std::getline(flags, f, ','))
          BOOST_CHECK_MESSAGE(std::find(res.hack_flags.begin(), res.hack_flags.end(), f)
                                != res.hack_flags.end(),
                              name << ": flag " << f << " missing");
      }
      ++checked;
      check_good_after(engine, name, id++);
      // workers_before counts this candidate's first worker too
      BOOST_CHECK_MESSAGE(engine.workers_started() <= std::max<uint64_t>(workers_before, 1),
                          name << " cost a worker: " << why_restart);
    }
  }
  BOOST_TEST_MESSAGE(checked << " candidates checked; " << engine.workers_started()
                             << " workers started");
  BOOST_CHECK_GE(checked, 25u);
  // Crashes and hangs are the candidate process's: the harness answers them and lives on, so one
  // worker serves the whole set (before the candidate got a process of its own, each cost one).
  BOOST_CHECK_EQUAL(engine.workers_started(), 1u);
}

BOOST_AUTO_TEST_CASE(nothing_of_one_candidate_reaches_the_next) {
  // When candidates shared the worker's process, one that replaced torch.relu, torch.matmul and
  // the reference modules' forward made plain zero-output candidates of *other* problems correct
  // (issue 21). Each candidate now has a fresh process: the next ones meet an untouched torch.
  for (auto& rule : all_rules())
    opts.rule_overrides[rule.id] = severity::off;
  eval_engine engine{opts};
  auto inline_request = [&](const std::string& problem_file, const std::string& forward,
                            uint64_t id) {
    auto prob = load_problem_file(data("problems/" + problem_file));
    BOOST_REQUIRE_MESSAGE(prob, test::why(prob));
    eval_request req;
    req.id = id;
    req.task = *prob;
    req.task.backend = kernel_backend::torch;
    req.candidate_source = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                           "    def forward(self, *args):\n        " + forward + "\n";
    req.timing.measure_performance = false;
    req.timing.timeout_s = 60;
    return req;
  };
  auto patcher = engine.evaluate(request(data("candidates_runtime/relu_patches_reference_module.py"), 1));
  BOOST_CHECK(!patcher.correct);
  // Honest itself (its own relu), it replaces torch.matmul for whoever comes next.
  auto matmul_patcher = engine.evaluate(inline_request(
    "1_small_relu.py",
    "torch.matmul = lambda a, b: torch.zeros(a.shape[0], b.shape[1]); "
    "return args[0].clamp_min(0.0)", 2));
  BOOST_TEST_MESSAGE("the matmul patcher: " << to_string(matmul_patcher.error) << ", flags "
                                            << matmul_patcher.hack_flags.size());
  auto zeros_relu = engine.evaluate(inline_request("1_small_relu.py", "return torch.zeros_like(args[0])", 3));
  BOOST_CHECK(!zeros_relu.correct && !zeros_relu.kernelbench_correct);
  BOOST_CHECK(zeros_relu.error == eval_error::mismatch);
  auto zeros_matmul = engine.evaluate(inline_request(
    "2_small_matmul.py", "return torch.zeros(args[0].shape[0], args[1].shape[1])", 4));
  BOOST_CHECK(!zeros_matmul.correct && !zeros_matmul.kernelbench_correct);
  BOOST_CHECK(zeros_matmul.error == eval_error::mismatch);
  auto honest_matmul = engine.evaluate(inline_request("2_small_matmul.py", "return args[0] @ args[1]", 5));
  BOOST_CHECK_MESSAGE(honest_matmul.correct, honest_matmul.error_excerpt);
}

BOOST_AUTO_TEST_CASE(one_timing_input_set_still_catches_outputs_cached_by_input_identity) {
  // What a worker falls back to when only one set of a problem's inputs fits in GPU memory: the
  // set's tensors are refilled with fresh values after timing. A candidate keyed on its input's
  // address answers those with the old result; an honest one is still correct and timed.
  for (auto& rule : all_rules())
    opts.rule_overrides[rule.id] = severity::off;
  opts.timing_input_sets = 1;
  eval_engine engine{opts};
  for (auto name : {"relu_cached_by_ptr.py", "relu_cached_output.py"}) {
    auto res = engine.evaluate(request(data(std::string("candidates_runtime/") + name), 1));
    BOOST_TEST_CONTEXT(name) {
      BOOST_CHECK(!res.correct);
      BOOST_CHECK(res.error == eval_error::mismatch);
      BOOST_CHECK(std::find(res.hack_flags.begin(), res.hack_flags.end(), "cached_output")
                  != res.hack_flags.end());
    }
  }
  auto req = request(data("candidates_runtime/relu_correct_clamp.py"), 3);
  req.timing.perf_trials = 10;
  req.timing.measure_performance = true;
  auto good = engine.evaluate(req);
  BOOST_CHECK_MESSAGE(good.correct, to_string(good.error) << " " << good.error_excerpt);
  BOOST_CHECK_EQUAL(good.kernel_runtime.trials, 10);
  BOOST_CHECK_GT(good.reference_runtime.trials, 0);
}

BOOST_AUTO_TEST_CASE(static_checks_refuse_hacks_before_any_process_runs) {
  eval_engine engine{opts};
  size_t refused = 0;
  for (auto name : {"relu_cached_output.py", "relu_cached_by_ptr.py", "relu_monkeypatch.py",
                    "matmul_changes_flags.py", "relu_segfault.py", "relu_sys_exit.py"}) {
    auto res = engine.evaluate(request(data(std::string("candidates_runtime/") + name), 1));
    BOOST_CHECK_MESSAGE(res.error == eval_error::static_check,
                        name << ": " << to_string(res.error));
    BOOST_CHECK(!res.hack_flags.empty());
    refused += res.error == eval_error::static_check ? 1 : 0;
  }
  BOOST_CHECK_EQUAL(refused, 6u);
  // Nothing above needed a worker.
  BOOST_CHECK_EQUAL(engine.workers_started(), 0u);
  check_good_after(engine, "the refused candidates", 2);
  BOOST_CHECK_EQUAL(engine.workers_started(), 1u);
}

BOOST_AUTO_TEST_CASE(the_reference_is_timed_once_per_problem_and_settings) {
  eval_engine engine{opts};
  auto a = engine.evaluate(request(data("candidates_runtime/relu_correct_clamp.py"), 1));
  auto b = engine.evaluate(request(data("candidates_runtime/relu_correct_clamp.py"), 2));
  BOOST_REQUIRE(a.correct && b.correct);
  BOOST_CHECK_GT(a.reference_runtime.trials, 0);
  BOOST_CHECK_EQUAL(a.reference_runtime.mean_ms, b.reference_runtime.mean_ms);
  BOOST_CHECK_EQUAL(engine.reference_cache_hits(), 1u);
  BOOST_CHECK_GT(b.speedup, 0.0);
  // Each verdict says where its time went. That only the first ran the reference's timing is
  // the cache hit above: comparing the two durations made the test fail on a loaded machine.
  BOOST_CHECK_GT(a.correctness_seconds, 0.0);
  BOOST_CHECK_GT(a.timing_seconds, 0.0);
  BOOST_CHECK_GT(a.reference_seconds, 0.0);
}

// Adaptive timing (rl.timing_precision): the candidate's and the reference's loops stop once the
// mean is known to the precision, between 10 runs and perf_trials; the worker's harness accepted
// the candidate's loop (it checks the stop against the plan) and the verdict is the same. With
// precision 0 both run exactly perf_trials, KernelBench's count.
BOOST_AUTO_TEST_CASE(adaptive_timing_runs_between_ten_and_perf_trials) {
  auto fixed = request(data("candidates_runtime/relu_correct_clamp.py"), 1);
  fixed.timing.perf_trials = 200;
  fixed.timing.measure_performance = true;
  auto adaptive = fixed;
  adaptive.id = 2;
  adaptive.timing.timing_precision = 0.05;
  eval_engine engine{opts};
  auto a = engine.evaluate(fixed);
  auto b = engine.evaluate(adaptive);
  BOOST_REQUIRE_MESSAGE(a.correct, to_string(a.error) << ": " << a.error_excerpt);
  BOOST_REQUIRE_MESSAGE(b.correct, to_string(b.error) << ": " << b.error_excerpt);
  BOOST_CHECK_EQUAL(a.kernel_runtime.trials, 200);
  BOOST_CHECK_EQUAL(a.reference_runtime.trials, 200);
  for (auto& r : {b.kernel_runtime, b.reference_runtime}) {
    BOOST_CHECK_GE(r.trials, 10);
    BOOST_CHECK_LE(r.trials, 200);
  }
  BOOST_CHECK_GT(b.speedup, 0.0);
  // The reference's timing is cached per settings: the adaptive request did not reuse the
  // fixed one's 200 runs.
  BOOST_CHECK_EQUAL(engine.reference_cache_hits(), 0u);
}

BOOST_AUTO_TEST_CASE(a_build_ahead_is_only_loaded_by_the_evaluating_worker) {
  // A C++ extension here; a CUDA one (nvcc) where a GPU is present.
  auto req = request(data(cuda ? "candidates_runtime/relu_cuda_load_inline.py"
                               : "candidates_runtime/relu_load_inline_cpu.py"),
                     1);
  req.task.backend = cuda ? kernel_backend::cuda : kernel_backend::torch;
  req.timing.timeout_s = 600;
  if (cuda) // builders see no GPU: both sides must name the architecture, or torch rebuilds
    opts.worker.extra_env.push_back("TORCH_CUDA_ARCH_LIST=" + detect_cuda_arch_list());
  auto builder_opts = opts;
  builder_opts.worker.scratch_dir = dir / "builder";
  builder_opts.worker.gpu = -1;
  eval_engine builder{builder_opts};
  auto built = builder.build(req);
  BOOST_REQUIRE_MESSAGE(built.compiled, to_string(built.error) << ": " << built.error_excerpt);
  BOOST_TEST_MESSAGE("build ahead took " << built.compile_seconds << " s");
  auto libraries_before = built_libraries(opts.worker.extensions_dir);
  BOOST_REQUIRE(!libraries_before.empty());
  // The fenced build could not write the precompiled torch/extension.h it found missing: it
  // wished for it, and the worker has it made beside the build folders (pch_maker.py). The
  // next source with the same flags compiles its C++ half with it.
  const auto pch = opts.worker.extensions_dir + "/.kbrl-pch";
  BOOST_REQUIRE_MESSAGE(
    test::eventually([&] { return !find_files(pch, ".gch").empty(); }, std::chrono::seconds(300)),
    "no precompiled header in " << pch);
  auto second = req;
  second.candidate_source += "\n# the same extension, another source: another build folder\n";
  auto built_second = builder.build(second);
  BOOST_REQUIRE_MESSAGE(built_second.compiled,
                        to_string(built_second.error) << ": " << built_second.error_excerpt);
  BOOST_TEST_MESSAGE("the second build ahead took " << built_second.compile_seconds << " s");
  const auto ninja = fs::path(builder.build_dir_of(second.candidate_source))
                     / (cuda ? "kbrl_test_relu_cuda" : "kbrl_test_relu_cpu") / "build.ninja";
  BOOST_CHECK_MESSAGE(test::read_file(ninja.string()).find("kbrl_torch_extension.h")
                        != std::string::npos,
                      ninja << " does not include the precompiled header");
  libraries_before = built_libraries(opts.worker.extensions_dir);
  eval_engine evaluator{opts}; // same extensions folder, a different worker process
  auto res = evaluator.evaluate(req);
  BOOST_REQUIRE_MESSAGE(res.correct, to_string(res.error) << ": " << res.error_excerpt);
  BOOST_TEST_MESSAGE("loading it in the evaluating worker took " << res.compile_seconds << " s");
  // The evaluating worker loaded what the builder made: nothing was compiled again.
  BOOST_CHECK(built_libraries(opts.worker.extensions_dir) == libraries_before);
  auto broken = request(data("candidates_runtime/relu_load_inline_bad.py"), 2);
  broken.task.backend = kernel_backend::torch;
  broken.timing.timeout_s = 600;
  auto failed = builder.build(broken);
  BOOST_CHECK(!failed.compiled);
  BOOST_CHECK(failed.error == eval_error::compile);
  BOOST_CHECK_MESSAGE(failed.error_excerpt.find("error") != std::string::npos,
                      failed.error_excerpt);
}

BOOST_AUTO_TEST_CASE(the_candidates_of_a_problem_share_the_reference_work) {
  // Static rules off: the hostile candidates below must run to show what they cannot reach.
  for (auto& rule : all_rules())
    opts.rule_overrides[rule.id] = severity::off;
  eval_engine engine{opts};
  auto untimed = [&](const std::string& candidate, uint64_t id) {
    auto req = request(data("candidates_runtime/" + candidate), id);
    req.timing.perf_trials = 0; // expected outputs only (reference timings have their own cache)
    req.timing.measure_performance = false;
    return engine.evaluate(req);
  };
  auto good = [&](uint64_t id) { return untimed("relu_correct_clamp.py", id); };
  auto first = good(1);
  BOOST_REQUIRE_MESSAGE(first.correct, to_string(first.error) << ": " << first.error_excerpt);
  BOOST_CHECK(!first.reference_shared);
  BOOST_CHECK_GT(first.reference_seconds, 0.0);
  // A candidate that writes into its inputs, and one that patches every reference module it
  // can find: the kept inputs and model are in the trusted process, out of their reach.
  auto inplace = untimed("relu_inplace_input.py", 2);
  BOOST_CHECK(inplace.reference_shared);
  BOOST_CHECK(std::count(inplace.hack_flags.begin(), inplace.hack_flags.end(),
                         "inputs_modified") == 1);
  auto patcher = untimed("relu_patches_reference_module.py", 3);
  BOOST_CHECK(!patcher.correct);
  BOOST_CHECK_MESSAGE(patcher.reference_shared, to_string(patcher.error) << ": "
                                                  << patcher.error_excerpt);
  auto again = good(4);
  BOOST_REQUIRE_MESSAGE(again.correct, to_string(again.error) << ": " << again.error_excerpt);
  BOOST_CHECK(again.reference_shared);
  BOOST_CHECK_EQUAL(again.reference_seconds, 0.0); // nothing of the reference ran
  // The same verdict, trial by trial, as when the reference ran for it.
  BOOST_REQUIRE_EQUAL(again.trials.size(), first.trials.size());
  for (size_t i = 0; i < first.trials.size(); ++i) {
    BOOST_CHECK_EQUAL(again.trials[i].passed, first.trials[i].passed);
    BOOST_CHECK_EQUAL(again.trials[i].max_abs_diff, first.trials[i].max_abs_diff);
  }
  BOOST_CHECK_EQUAL(engine.references_shared(), 3u);

  // Off: every candidate runs the reference again.
  opts.shared_reference_mb = 0;
  eval_engine unshared{opts};
  auto req = request(data("candidates_runtime/relu_correct_clamp.py"), 5);
  unshared.evaluate(req);
  auto second = unshared.evaluate(req);
  BOOST_CHECK(second.correct);
  BOOST_CHECK(!second.reference_shared);
  BOOST_CHECK_GT(second.reference_seconds, 0.0);
  BOOST_CHECK_EQUAL(unshared.references_shared(), 0u);
}

BOOST_AUTO_TEST_CASE(a_build_made_in_another_folder_is_loaded_not_rebuilt) {
  // What a builder node sends: the library and its record, installed into another build cache.
  auto req = load_inline_cpu_request(1, 600);
  auto builder_opts = opts;
  builder_opts.worker.scratch_dir = dir / "builder";
  builder_opts.worker.extensions_dir = dir / "builder_extensions";
  builder_opts.worker.gpu = -1;
  eval_engine builder{builder_opts};
  auto built = builder.build(req);
  BOOST_REQUIRE_MESSAGE(built.compiled, to_string(built.error) << ": " << built.error_excerpt);
  auto files = collect_build_files(builder.build_dir_of(req.candidate_source));
  BOOST_REQUIRE_MESSAGE(files, test::why(files));
  BOOST_REQUIRE_EQUAL(files->size(), 2u); // the library and its record
  eval_engine evaluator{opts};
  // Started first, as an evaluator node's are: the build cache is then its worker's (as root:
  // user nobody's), and the installed folders are handed to the same owner.
  BOOST_REQUIRE(evaluator.start());
  auto here = evaluator.build_dir_of(req.candidate_source);
  BOOST_CHECK_NE(here, builder.build_dir_of(req.candidate_source));
  auto installed = install_build_files(here, *files);
  BOOST_REQUIRE_MESSAGE(installed, test::why(installed));
  auto res = evaluator.evaluate(req);
  BOOST_REQUIRE_MESSAGE(res.correct, to_string(res.error) << ": " << res.error_excerpt);
  // Loaded, not built: torch wrote its sources, but no ninja file or object appeared here.
  BOOST_CHECK(find_files(here, "build.ninja").empty());
  BOOST_CHECK(find_files(here, ".o").empty());

  // A record whose key is not what this build would have (another toolchain, flags, sources):
  // ignored, the extension is built here, and the verdict is the same.
  auto other = load_inline_cpu_request(2, 600);
  other.candidate_source += "\n# another source, another folder\n";
  auto foreign = *files;
  for (auto& f : foreign)
    if (f.path.find(library_record_name) != std::string::npos)
      f.bytes.replace(f.bytes.find("\"key\": \"") + 9, 8, "00000000");
  BOOST_REQUIRE(install_build_files(evaluator.build_dir_of(other.candidate_source), foreign));
  auto rebuilt = evaluator.evaluate(other);
  BOOST_REQUIRE_MESSAGE(rebuilt.correct, to_string(rebuilt.error) << ": " << rebuilt.error_excerpt);
  BOOST_CHECK(!find_files(evaluator.build_dir_of(other.candidate_source), "build.ninja").empty());

  // Paths from another node are refused unless they are a record or a library inside the folder.
  for (auto bad : {"../escape.so", "/tmp/abs.so", "x/../../y.so", "main.cpp", ""})
    BOOST_CHECK_MESSAGE(!install_build_files(here, {{bad, "x"}}), bad);
}

// A builder killed mid-build (its node lost, kill -9) leaves torch's `lock` file in the source's
// build folder. With torch's own lock every later build of that source waited for the file to go
// away, forever; kbrl's lock dies with its holder, so the next build goes ahead.
BOOST_AUTO_TEST_CASE(a_lock_left_by_a_killed_build_does_not_block_the_next_build) {
  auto req = load_inline_cpu_request(1, 300);
  eval_engine engine{opts};
  BOOST_REQUIRE(engine.start()); // the build cache is then its worker's user's
  // torch builds extension NAME in TORCH_EXTENSIONS_DIR/NAME (the candidate's load_inline name)
  const fs::path folder =
    fs::path(engine.build_dir_of(req.candidate_source)) / "kbrl_test_relu_cpu";
  fs::create_directories(folder);
  std::ofstream(folder / "lock") << "";
  // Owned by the worker's user, as the killed builder's file would be.
  struct stat cache{};
  BOOST_REQUIRE_EQUAL(::stat(opts.worker.extensions_dir.c_str(), &cache), 0);
  for (const auto& p : {folder.parent_path(), folder, folder / "lock"})
    BOOST_REQUIRE_EQUAL(::chown(p.c_str(), cache.st_uid, cache.st_gid), 0);
  auto res = engine.evaluate(req);
  // Without it the build waits on the file until the time limit, a timeout verdict.
  BOOST_CHECK_MESSAGE(res.correct, to_string(res.error) << ": " << res.error_excerpt);
}

// HACKS.md class 33: a candidate that writes over another candidate's library in the shared
// extensions folder (static rules off, so only the run-time fence stands in its way). With the
// fence every write is refused and the other candidate's next evaluation loads its own library;
// with the fence off (the control) the writes go through and that evaluation fails.
BOOST_AUTO_TEST_CASE(a_candidate_cannot_write_another_candidates_build_folder) {
  for (auto& rule : all_rules())
    opts.rule_overrides[rule.id] = severity::off;
  auto hostile = [&](uint64_t id) {
    auto prob = load_problem_file(data("problems/1_small_relu.py"));
    BOOST_REQUIRE_MESSAGE(prob, test::why(prob));
    eval_request req;
    req.id = id;
    req.candidate_source = test::read_file(data("hacks/overwrite_build_folders.py"));
    req.task = *prob;
    req.task.backend = kernel_backend::torch;
    req.timing.perf_trials = 0;
    req.timing.measure_performance = false;
    req.timing.timeout_s = 60;
    req.trace = "overwrite_build_folders.py";
    return req;
  };
  const auto forged = fs::path(opts.worker.extensions_dir) / "0000000000000000-forged";
  {
    eval_engine engine{opts};
    BOOST_REQUIRE(engine.start());
    auto victim = engine.evaluate(load_inline_cpu_request(1, 300));
    BOOST_REQUIRE_MESSAGE(victim.correct, to_string(victim.error) << ": " << victim.error_excerpt);
    if (engine.write_fence().rfind("landlock", 0) != 0) {
      // As a GPU test without a GPU: this kernel cannot fence, and the evaluator warns.
      BOOST_TEST_MESSAGE("no write fence on this kernel (" << engine.write_fence()
                                                           << "): class 33 not checked here");
      return;
    }
    const auto libraries = built_libraries(opts.worker.extensions_dir);
    BOOST_REQUIRE(!libraries.empty());
    auto attack = engine.evaluate(hostile(2));
    BOOST_CHECK(!attack.correct);
    BOOST_CHECK_EQUAL(to_string(attack.error), "runtime");
    // Every write refused: the library, the compiler wrapper, the precompiled header the
    // first build wished for (being made, or made), a folder of its own choosing.
    BOOST_CHECK_MESSAGE(test::contains(attack.error_excerpt, "writes refused")
                          && test::contains(attack.error_excerpt, ".so (Permission denied)")
                          && test::contains(attack.error_excerpt, ".kbrl-bin/")
                          && test::contains(attack.error_excerpt, ".kbrl-pch/")
                          && test::contains(attack.error_excerpt, "writes that went through: 0"),
                        attack.error_excerpt);
    BOOST_CHECK(built_libraries(opts.worker.extensions_dir) == libraries);
    BOOST_CHECK(!fs::exists(forged));
    auto again = engine.evaluate(load_inline_cpu_request(3, 300));
    BOOST_CHECK_MESSAGE(again.correct, to_string(again.error) << ": " << again.error_excerpt);
  }
  // The control: without the fence the same candidate gets through and breaks the other one.
  opts.worker.extra_env.push_back("KBRL_EVAL_NO_WRITE_FENCE=1");
  eval_engine open{opts};
  BOOST_REQUIRE(open.start());
  BOOST_CHECK_EQUAL(open.write_fence(), "off: KBRL_EVAL_NO_WRITE_FENCE=1");
  auto attack = open.evaluate(hostile(4));
  BOOST_CHECK_MESSAGE(attack.correct, to_string(attack.error) << ": " << attack.error_excerpt);
  BOOST_CHECK(fs::exists(forged));
  auto broken = open.evaluate(load_inline_cpu_request(5, 300));
  BOOST_CHECK_MESSAGE(!broken.correct, "the overwritten library still loaded");
}

BOOST_AUTO_TEST_CASE(reference_timings_are_reused_across_runs) {
  opts.reference_cache_file = dir / "cache/reference_times.jsonl";
  {
    eval_engine first_run{opts};
    auto a = first_run.evaluate(request(data("candidates_runtime/relu_correct_clamp.py"), 1));
    BOOST_REQUIRE(a.correct);
    BOOST_CHECK_EQUAL(first_run.reference_cache_hits(), 0u);
  }
  eval_engine second_run{opts}; // a new engine, as in a later run
  auto b = second_run.evaluate(request(data("candidates_runtime/relu_correct_clamp.py"), 2));
  BOOST_REQUIRE(b.correct);
  BOOST_CHECK_EQUAL(second_run.reference_cache_hits(), 1u);
  BOOST_CHECK_GT(b.reference_runtime.trials, 0);
}

BOOST_AUTO_TEST_SUITE_END()
