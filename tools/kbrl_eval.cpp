// kbrl-eval: evaluate a model, a checkpoint, or kernels that already exist, on KernelBench-style
// problems, with the metrics KernelBench reports (pass@k, fast_p, geometric-mean speedup) per
// level, per turn and per error category, and a report a person can read.
//
//   kbrl-eval --model PATH|ID [--adapter DIR] --levels 1,2 [--problems 1-20] --samples N
//             [--turns T] --backend cuda --output results/ [--gpu 0,1] [--config sampler.slots=64]
//   kbrl-eval --generations DIR [--levels 1] [--problems 1-20] --backend cuda --output results/
//   kbrl-eval ... --manifest cluster.toml     (evaluate on the cluster's evaluator nodes)
//
// This file only reads the command line and calls runtime/evalcli/, in this order:
//   work_plan        the problems and the work items (--model or --generations)
//   prompt_maker     tokenizer, chat format and sampling of a --model run
//   output_folder    the output folder: same settings as before, what is finished already
//   evaluator_setup  evaluators per --gpu, caches
//   eval_session     the actor system: sampler, evaluators (local, or the cluster's with
//                    --manifest: cluster_evaluators, cluster_dispatch), the scheduler
//                    (eval_scheduler)
//   run_outputs      results.json, report.html, TensorBoard (tensorboard_target), console table
//
// Problems come from --kernelbench DIR or $KERNELBENCH_ROOT: a KernelBench checkout
// (KernelBench/level<L>/), a folder of level<L>/ folders, or one folder of problem files.
//
// Exit status: 0 evaluated (whatever the verdicts), 1 a problem with the inputs, the output folder
// or the evaluator (the message says which), 2 a command-line mistake, 3 nothing could be judged
// (every sample an infrastructure failure, a failed generation or a missing file: the files are
// written, the numbers mean nothing), 130 interrupted (re-run to continue).

#include "runtime/config/command_line.hpp"
#include "runtime/config/manifest.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/device/devices.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/evalcli/cluster_evaluators.hpp"
#include "runtime/evalcli/device_check.hpp"
#include "runtime/evalcli/eval_options.hpp"
#include "runtime/evalcli/output_folder.hpp"
#include "runtime/evalcli/prompt_maker.hpp"
#include "runtime/evalcli/run_outputs.hpp"
#include "runtime/evalcli/tensorboard_target.hpp"
#include "runtime/evalcli/work_plan.hpp"
#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/results_json.hpp"
#include "tools/evalcli/eval_session.hpp"
#include "tools/evalcli/evaluator_setup.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

using namespace kbrl;

namespace {

namespace fs = std::filesystem;

int fail(const std::string& what) {
  std::fprintf(stderr, "kbrl-eval: %s\n", what.c_str());
  return 1;
}

int fail(const caf::error& err) { return fail(describe(err)); }

std::string join_ints(const std::vector<int>& xs) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

/// The run config: files first, then key=value overrides in order, then the flags that stand
/// for eval.* keys.
caf::expected<config::run_config> run_config_of(const evalcli::eval_options& o) {
  config::run_config run;
  for (auto& c : o.config)
    if (c.find('=') == std::string::npos) {
      auto loaded = config::run_config::load(c);
      if (!loaded)
        return loaded.error();
      run = std::move(*loaded);
    }
  for (auto& c : o.config)
    if (c.find('=') != std::string::npos)
      if (auto err = run.apply_override(c))
        return err;
  if (o.builders >= 0)
    if (auto err = run.apply_override("eval.build_workers=" + std::to_string(o.builders)))
      return err;
  if (!o.reference.empty())
    if (auto err = run.apply_override("eval.reference_mode=" + o.reference))
      return err;
  return run;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-eval: evaluate a model or existing kernels on KernelBench-style problems\n"
               "(pass@k, fast_p, speedups per level; results.json and report.html)"};
  evalcli::eval_options o;
  auto* model_opt = app.add_option("--model", o.model,
                                   "Model directory or Hugging Face id to generate with (the "
                                   "built-in sampler), or the remote server's model name");
  app.add_option("--adapter", o.adapter, "PEFT LoRA adapter directory (a training checkpoint)");
  auto* gen_opt = app.add_option("--generations", o.generations,
                                 "Score existing candidates: a folder laid out as "
                                 "level<L>/<problem>/sample_<S>.py|.txt");
  model_opt->excludes(gen_opt);
  app.add_option("--levels", o.levels, "Levels, e.g. 1,2 (--generations: those in the folder)");
  app.add_option("--problems", o.problems,
                 "Problem numbers, e.g. 1-20,25 (default: all; --generations: those in the "
                 "folder, and listed ones without files count as failures)");
  app.add_option("--samples", o.samples,
                 "Samples per problem (--generations: default the most any problem has)")
    ->check(CLI::Range(1, 100000));
  auto* turns_opt =
    app.add_option("--prompt-style", o.prompt_style,
                   "Single-turn prompts: kernelbench (KernelBench's prompt, the default) or "
                   "episode (the RL loop's first prompt with the [prompt] keys of --config: "
                   "what a policy trained by kbrl, e.g. the quickstart's, was trained on)")
      ->check(CLI::IsMember({"kernelbench", "episode"}));
    app.add_option("--turns", o.turns,
                   "Turns per sample. --model: T > 1 runs episodes as training does (each turn "
                   "prompted with the earlier answers and the evaluator's feedback; metrics per "
                   "turn and best of turns). --generations stays single-turn per file: it scores "
                   "the turn files sample_<S>/turn_<T> that are there (default: all of them)")
      ->check(CLI::Range(1, 64));
  app.add_option("--backend", o.backend, "cuda, triton, torch, hip, cute, tilelang, thunderkittens")
    ->check(CLI::IsMember({"cuda", "triton", "torch", "hip", "cute", "tilelang", "thunderkittens"}))
    ->capture_default_str();
  app.add_option("--precision", o.precision)->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
    ->capture_default_str();
  app.add_option("--kernelbench,--problems-root", o.kernelbench,
                 "Problem source: a KernelBench checkout, a folder of level<L>/ folders or of "
                 "problem files (default problems.root of --config, then $KERNELBENCH_ROOT)");
  app.add_option("--output", o.output, "Output folder (re-run with the same one to continue)")
    ->required();
  auto* gpu_opt =
    app.add_option("--gpu", o.gpus, "CUDA devices, one evaluator each (none: one CPU evaluator)")
      ->delimiter(',');
  app.add_option("--manifest", o.manifest,
                 "Evaluate on a running kbrl cluster: this manifest's evaluator nodes (kbrl-node "
                 "--role evaluator) get the candidates, as many at once as they have evaluators; "
                 "nodes that cannot be reached are warned about and left out, a node lost during "
                 "the run has its candidates sent again to the others. Default: eval.manifest of "
                 "--config (empty: evaluate in this process)")
    ->check(CLI::ExistingFile)->excludes(gpu_opt);
  app.add_option("--sampler-gpu", o.sampler_gpu,
                 "CUDA device of the built-in sampler, -1 for the CPU (default: the first --gpu)");
  app.add_option("--builders", o.builders, "CPU build workers (default eval.build_workers)")
    ->check(CLI::Range(0, 256));
  app.add_option("--trials", o.trials, "Correctness trials per candidate")->check(CLI::Range(1, 1000))
    ->capture_default_str();
  app.add_option("--perf-trials", o.perf_trials, "Timed runs per candidate")
    ->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--timing-precision", o.timing_precision,
                 "Adaptive timing: stop once the mean's 95 % confidence interval is within this "
                 "share of it (0.01: +-1 %), 10 runs and 100 ms at least, --perf-trials at "
                 "most; 0: exactly --perf-trials runs, as KernelBench")
    ->check(CLI::Range(0.0, 0.5))->capture_default_str();
  app.add_flag("--no-timing", o.no_timing, "Check correctness only (no speedups)");
  app.add_option("--timeout", o.timeout_s, "Seconds per evaluation")->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--eval-seed", o.eval_seed, "Seed of the correctness trials' inputs")
    ->capture_default_str();
  app.add_option("--reference", o.reference,
                 "What speedups are measured against: eager (the PyTorch reference as written) "
                 "or compile (the reference compiled with torch.compile, default mode, its "
                 "compilation not timed; needs torch >= 2.0 in the evaluation worker). Default: "
                 "eval.reference_mode (eager)")
    ->check(CLI::IsMember({"eager", "compile"}));
  app.add_flag("--compare-torch-compile", o.compare_compile,
               "Also time a torch.compile reference and report speedups against it beside the "
               "eager ones");
  app.add_option("--temperature", o.temperature,
                 "Sampling temperature (default 0 = greedy with one sample, else 0.7)");
  app.add_option("--top-p", o.top_p)->capture_default_str();
  app.add_option("--top-k", o.top_k, "0: off")->capture_default_str();
  app.add_option("--max-new-tokens", o.max_new_tokens)->check(CLI::Range(1, 1 << 20))
    ->capture_default_str();
  app.add_option("--sampling-seed", o.sampling_seed)->capture_default_str();
  app.add_option("--chat-format", o.chat_format,
                 "auto (from the tokenizer's template), chatml, qwen3, llama3, jinja (the "
                 "tokenizer's own template through python3-jinja2), or none (raw)")
    ->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer (model directory or id) for prompts when it is not the model's");
  auto* tb_opt = app.add_option("--tensorboard", o.tensorboard,
                                "Also log the metrics as TensorBoard scalars (eval/...): a "
                                "training run's folder (into its tensorboard/, beside the "
                                "training curves) or a TensorBoard log folder");
  app.add_option("--step", o.step,
                 "The training step the metrics are logged at (default: the --adapter "
                 "checkpoint's step, from its checkpoints.jsonl)")
    ->needs(tb_opt)->check(CLI::NonNegativeNumber);
  app.add_option("--sample-counting", o.sample_counting,
                 "How problems with fewer samples than others count: kernelbench (each its own "
                 "samples, as KernelBench's calculate_pass_at_k) or padded (every problem padded "
                 "to the largest count, a missing sample failed)")
    ->check(CLI::IsMember({"kernelbench", "padded"}))->capture_default_str();
  app.add_option("--config", o.config,
                 "Run-config override key=value (sampler.*, eval.*), or a run config TOML file; "
                 "repeatable");
  std::vector<std::string> positional;
  app.add_option("overrides", positional,
                 "key=value run-config overrides after the options, as kbrl-node takes them");
  kbrl::config::add_version_flag(app, "kbrl-eval");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;
  for (auto& p : positional) {
    if (p.find('=') == std::string::npos)
      return fail("'" + p + "': expected key=value after the options (e.g. eval.isolation=none)");
    o.config.push_back(p);
  }
  o.turns_given = turns_opt->count() > 0;
  if (o.model.empty() && o.generations.empty())
    return fail("give --model PATH|ID (generate and evaluate) or --generations DIR (evaluate "
                "existing candidates)");
  auto run = run_config_of(o);
  if (!run)
    return fail(run.error());
  if (o.kernelbench.empty()) // the same problem folder a training run's config names
    o.kernelbench = run->get_string("problems.root");
  std::optional<config::cluster_manifest> cluster;
  if (o.manifest.empty())
    o.manifest = run->get_string("eval.manifest");
  if (!o.manifest.empty()) {
    if (!o.gpus.empty())
      return fail("--gpu names local evaluators; with a cluster manifest (eval.manifest = "
                  + o.manifest + ") the evaluator nodes' GPUs are used: give one or the other");
    auto m = config::load_manifest(o.manifest);
    if (!m)
      return fail(m.error());
    cluster = std::move(*m);
  }
  if (!cluster)
    if (auto why = evalcli::device_problem(o.backend, o.gpus, cuda_device_count()))
      return fail(*why);
  std::optional<evalcli::tensorboard_target> tensorboard;
  if (!o.tensorboard.empty()) {
    auto target = evalcli::resolve_tensorboard(o.tensorboard, o.step, o.adapter);
    if (!target)
      return fail(target.error());
    tensorboard = std::move(*target);
  }

  report::run_info info;
  info.backend = o.backend;
  info.precision = o.precision;
  info.problems = o.problems.empty() ? "all" : o.problems;
  info.started = report::utc_now();
  info.tensorboard_step = tensorboard ? tensorboard->step : -1;
  info.machine = evalcli::machine_description(torch_version());
  info.evaluator = cluster        ? "cluster " + cluster->name
                   : o.gpus.empty() ? "cpu"
                                    : "gpu " + join_ints(o.gpus);
  info.reference = run->get_string("eval.reference_mode");
  info.correctness = run->get_string("eval.correctness");
  auto ctx = std::make_shared<evalcli::run_context>();
  ctx->timing.correctness_trials = o.trials;
  ctx->timing.perf_trials = o.perf_trials;
  ctx->timing.timing_precision = o.timing_precision;
  ctx->timing.measure_performance = !o.no_timing && o.perf_trials > 0;
  ctx->timing.seed = o.eval_seed;
  ctx->timing.timeout_s = o.timeout_s;
  ctx->timing.compare_torch_compile = o.compare_compile;
  info.timing = ctx->timing;

  // What to evaluate, and for --model how to draw it.
  const auto out_dir = fs::path(o.output);
  ctx->generations_root = (out_dir / "generations").string();
  evalcli::work_plan plan;
  evalcli::session_options session;
  session.model = o.model;
  session.output_dir = o.output;
  session.cluster = cluster;
  session.cluster_settings = evalcli::verdict_settings(*run);
  if (!o.generations.empty()) {
    if (auto err = evalcli::plan_generations(o, plan, info))
      return fail(err);
  } else {
    if (auto err = evalcli::plan_model(o, ctx->generations_root, plan, info))
      return fail(err);
    int sampler_gpu = o.sampler_gpu >= -1 ? o.sampler_gpu : o.gpus.empty() ? -1 : o.gpus.front();
    auto settings = sampling::sampler_settings_from(*run, sampler_gpu, "kbrl-eval/sampler");
    // --model is what the built-in sampler loads, or the name a remote server knows the model
    // by (unless sampler.remote_model says otherwise).
    if (settings.backend == "builtin")
      settings.model = o.model;
    else if (settings.remote.model.empty())
      settings.remote.model = o.model;
    ctx->generation_limit = std::max<size_t>(1, settings.queue_capacity);
    if (auto err = evalcli::setup_prompts(o, settings, ctx->prompts, info))
      return fail(err);
    // Episode prompts (every turn > 1, and single turns with --prompt-style episode) follow
    // the run config's [prompt] keys, as training episodes do.
    auto episode_prompts = episode::prompt_settings_from(*run);
    if (!episode_prompts)
      return fail(episode_prompts.error());
    ctx->prompts.episode = std::move(*episode_prompts);
    ctx->prompts.episode_style = o.prompt_style == "episode";
    if (ctx->prompts.episode_style && o.turns == 1) {
      if (!ctx->prompts.chat)
        return fail(make_error(errc::invalid_argument,
                               "--prompt-style episode needs a chat format (not --chat-format "
                               "none)"));
      const std::string kernelbench = "single-turn KernelBench-style prompt";
      if (auto at = info.prompt.find(kernelbench); at != std::string::npos)
        info.prompt.replace(at, kernelbench.size(),
                            "single-turn, the RL loop's first prompt ([prompt] keys of --config)");
    }
    session.sampler = std::move(settings);
    session.adapter_dir = info.adapter;
  }
  ctx->problems = std::move(plan.problems);
  ctx->items = std::move(plan.items);

  // The output folder: a continued run must have been started with the same settings.
  auto resumed = evalcli::open_output_folder(o.output, info, *ctx);
  if (!resumed)
    return fail(resumed.error());
  size_t missing = 0, to_generate = 0, episodes = 0, episodes_open = 0;
  for (size_t i = 0; i < ctx->items.size(); ++i) {
    auto& w = ctx->items[i];
    missing += w.missing ? 1 : 0;
    to_generate += w.generate ? 1 : 0;
    episodes += w.turns > 1 ? 1 : 0;
    episodes_open += w.turns > 1 && ctx->logged[i].size() < static_cast<size_t>(w.turns) ? 1 : 0;
  }
  // The sampler (a model to load) only when something may have to be drawn.
  session.draws = to_generate > 0 || episodes_open > 0;
  if (episodes > 0) {
    std::printf("kbrl-eval: %zu problems (%zu finished before), %zu samples of %d turns to run "
                "(%zu turns done before)\n",
                ctx->problems.size(), resumed->problems_finished, episodes, o.turns,
                resumed->turns_logged);
  } else {
    std::string extra;
    if (session.sampler)
      extra += ", " + std::to_string(to_generate) + " to generate";
    if (missing > 0)
      extra += ", " + std::to_string(missing) + " sample(s) without a file (counted as missing)";
    std::printf("kbrl-eval: %zu problems (%zu finished before), %zu candidates to evaluate%s\n",
                ctx->problems.size(), resumed->problems_finished, ctx->items.size() - missing,
                extra.c_str());
  }
  std::fflush(stdout);

  auto evaluators = evalcli::setup_evaluators(o, *run, o.output, ctx->expected + 1);
  if (!evaluators)
    return fail(evaluators.error());
  auto t0 = std::chrono::steady_clock::now();
  caf::error session_failure;
  if (!ctx->items.empty())
    session_failure = evalcli::run_session(ctx, *evaluators, session);
  std::error_code ec;
  fs::remove_all(evaluators->scratch, ec);
  if (session_failure)
    return fail(session_failure);
  if (!ctx->failure.empty())
    return fail(ctx->failure);

  // Aggregate, write results.json and report.html, log to TensorBoard.
  if (!ctx->evaluated_on.empty())
    info.evaluator = ctx->evaluated_on;
  info.finished = report::utc_now();
  info.wall_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto records = ctx->ledger->records();
  auto metrics = report::compute_metrics(records, report::default_fast_p_thresholds(),
                                         *report::parse_sample_counting(o.sample_counting));
  const auto sources = o.generations.empty() ? ctx->generations_root : o.generations;
  if (auto ok = evalcli::write_run_outputs(o.output, info, metrics, records, sources); !ok)
    return fail(ok.error());
  if (tensorboard) {
    auto path = evalcli::log_to_tensorboard(*tensorboard, metrics);
    if (!path)
      return fail(path.error());
    std::printf("kbrl-eval: metrics logged at step %lld (%s) to %s\n",
                static_cast<long long>(tensorboard->step), tensorboard->step_source.c_str(),
                path->c_str());
  }
  evalcli::print_summary(metrics, info.reference);
  if (cluster) {
    std::map<std::string, size_t> per_node;
    size_t sent_again = 0;
    for (auto& r : records) {
      if (!r.node.empty())
        ++per_node[r.node];
      sent_again += r.retries > 0 ? 1 : 0;
    }
    std::string line;
    for (auto& [node, n] : per_node)
      line += (line.empty() ? "" : ", ") + node + " " + std::to_string(n);
    std::printf("kbrl-eval: samples per evaluator node: %s; %zu sent again after their node was "
                "lost\n",
                line.empty() ? "none" : line.c_str(), sent_again);
  }
  std::printf("kbrl-eval: wrote %s and %s\n", (out_dir / "results.json").c_str(),
              (out_dir / "report.html").c_str());
  const size_t judged = report::judged_samples(records);
  if (judged == 0 && !records.empty()) {
    std::fprintf(stderr,
                 "kbrl-eval: no candidate could be judged: every sample is an infrastructure "
                 "failure, a failed generation or a missing file (errors above and in "
                 "results.json); the metrics mean nothing\n");
    return 3;
  }
  return 0;
}
