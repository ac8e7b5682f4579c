// kbrl-warmstart: make a tiny policy from example answers, so that RL has a model to start from
// on a machine without a GPU or network (the quickstart's policy is made with it).
//
//   kbrl-warmstart --problems config/quickstart/problems --solutions config/quickstart/solutions.jsonl
//                  --config config/quickstart/run.toml --output DIR [--seed 0] [--epochs N]
//                  [--vocab-size N] [--hidden N] [--layers N] [--dtype bf16|fp32] [--measure N]
//   kbrl-warmstart --measure N --policy DIR --problems ... --config ...
//
// The first form trains a byte-level BPE tokenizer and a qwen2 model on the examples' prompts
// (rendered from the config's prompt.* keys, as RL episodes render them) and writes a model
// directory in the Hugging Face layout with a warmstart.json that records how it was made
// (runtime/warmstart/warm_start.hpp). The same command, seed and thread count (--threads, default
// 1: the model is tiny, and one thread adds its floats in one order) rebuild the same bytes. --measure N then samples N completions per problem at temperature 1 and scores them with
// the evaluator on the CPU: the share that parse, compile and are correct is where RL starts.
// The second form only measures an existing policy.
//
// Exit status: 0 done, 1 a bad input or a failure (the message names the file and line), 2 bad
// command-line arguments.

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/node/node_plan.hpp"
#include "runtime/warmstart/starting_point.hpp"
#include "runtime/warmstart/warm_start.hpp"

#include <CLI/CLI.hpp>

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace kbrl;

namespace {

int fail(const caf::error& err) {
  std::fprintf(stderr, "kbrl-warmstart: %s\n", describe(err).c_str());
  return 1;
}

/// "1 min 05 s", "42 s".
std::string duration(double s) {
  char buf[64];
  auto total = static_cast<long>(std::lround(s));
  if (total >= 60)
    std::snprintf(buf, sizeof buf, "%ld min %02ld s", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld s", total);
  return buf;
}

std::string percent(int32_t part, int32_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%5.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

int measure(const std::string& policy, const std::vector<problem>& problems,
            const episode::prompt_settings& prompts, const config::run_config& run, int32_t samples,
            uint64_t seed) {
  warmstart::measure_options mo;
  mo.samples_per_problem = samples;
  mo.seed = seed;
  mo.engine = evaluation_engine_options(run);
  char tmpl[] = "/tmp/kbrl-warmstart-XXXXXX";
  const char* made = ::mkdtemp(tmpl);
  if (made == nullptr) {
    std::fprintf(stderr, "kbrl-warmstart: cannot create a scratch folder under /tmp\n");
    return 1;
  }
  std::string scratch = made;
  // Searchable by others: as root, the worker runs as nobody inside it.
  std::filesystem::permissions(scratch, std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  mo.engine.worker.scratch_dir = scratch + "/worker";
  mo.engine.worker.extensions_dir = scratch + "/extensions";
  mo.engine.worker.gpu = -1;
  std::printf("measuring %s: %d samples per problem at temperature 1, scored on the CPU\n",
              policy.c_str(), samples);
  std::printf("%-28s %8s %8s %8s\n", "problem", "parse", "compile", "correct");
  auto tallies = warmstart::measure_starting_point(
    policy, problems, prompts, mo, [](const warmstart::problem_tally& t) {
      std::printf("%-28s %8s %8s %8s\n", t.problem.c_str(), percent(t.parsed, t.samples).c_str(),
                  percent(t.compiled, t.samples).c_str(), percent(t.correct, t.samples).c_str());
      std::fflush(stdout);
    });
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!tallies)
    return fail(tallies.error());
  warmstart::problem_tally all;
  int32_t some_correct = 0;
  for (auto& t : *tallies) {
    all.samples += t.samples;
    all.parsed += t.parsed;
    all.compiled += t.compiled;
    all.correct += t.correct;
    some_correct += t.correct > 0 ? 1 : 0;
  }
  std::printf("%-28s %8s %8s %8s\n", "all", percent(all.parsed, all.samples).c_str(),
              percent(all.compiled, all.samples).c_str(), percent(all.correct, all.samples).c_str());
  std::printf("%d of %d completions correct; %d of %zu problems solved at least once\n",
              all.correct, all.samples, some_correct, tallies->size());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-warmstart: train a tiny policy (tokenizer and all weights) on example "
               "answers, so RL has a model to start from"};
  warmstart::warm_start_options o;
  std::string output, policy, dtype = "bf16", backend = "torch";
  int32_t measure_samples = 0;
  int threads = 1;
  app.add_option("--problems", o.problems_root, "Folder with level<N>/ folders of problems")
    ->required()
    ->check(CLI::ExistingDirectory);
  app.add_option("--solutions", o.solutions_path, "Example answers, one JSON object per line");
  app.add_option("--config", o.config_path, "Run config whose [prompt] keys shape the prompts")
    ->check(CLI::ExistingFile);
  app.add_option("--output", output, "Model directory to write");
  app.add_option("--policy", policy, "With --measure and without --output: the policy to measure");
  app.add_option("--backend", backend, "The backend the prompts ask for")
    ->check(CLI::IsMember({"torch", "cuda", "triton"}))
    ->capture_default_str();
  app.add_option("--seed", o.training.seed, "Seeds the weights and the order of examples")
    ->capture_default_str();
  app.add_option("--epochs", o.training.epochs, "Passes over the examples")
    ->check(CLI::Range(1, 100000))
    ->capture_default_str();
  app.add_option("--batch", o.training.batch_sequences, "Sequences per optimiser step")
    ->check(CLI::Range(1, 4096))
    ->capture_default_str();
  app.add_option("--lr", o.training.lr, "Peak learning rate (cosine decay after warm-up)")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--warmup", o.training.warmup_steps, "Warm-up steps")->capture_default_str();
  app.add_option("--vocab-size", o.vocab_size, "Tokenizer ids in all, special tokens included")
    ->check(CLI::Range(259, 1 << 20))
    ->capture_default_str();
  app.add_option("--hidden", o.shape.hidden_size, "Hidden size")
    ->check(CLI::Range(8, 8192))
    ->capture_default_str();
  app.add_option("--intermediate", o.shape.intermediate_size, "MLP width")
    ->check(CLI::Range(8, 32768))
    ->capture_default_str();
  app.add_option("--layers", o.shape.num_hidden_layers, "Decoder layers")
    ->check(CLI::Range(1, 128))
    ->capture_default_str();
  app.add_option("--heads", o.shape.num_attention_heads, "Query heads (divide --hidden)")
    ->check(CLI::Range(1, 256))
    ->capture_default_str();
  app.add_option("--kv-heads", o.shape.num_key_value_heads, "Key/value heads (divide --heads)")
    ->check(CLI::Range(1, 256))
    ->capture_default_str();
  app.add_option("--dtype", dtype, "Type of the weights written")
    ->check(CLI::IsMember({"bf16", "fp32"}))
    ->capture_default_str();
  app.add_option("--threads", threads,
                 "CPU threads (0: torch's default); the same count repeats a run byte for byte")
    ->check(CLI::Range(0, 1024))
    ->capture_default_str();
  app.add_option("--measure", measure_samples,
                 "Sample this many completions per problem and report parse/compile/correct")
    ->check(CLI::Range(0, 1024));
  kbrl::config::add_version_flag(app, "kbrl-warmstart");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  if (output.empty() && (measure_samples == 0 || policy.empty())) {
    std::fprintf(stderr, "kbrl-warmstart: give --output DIR (and --solutions) to train, or "
                         "--measure N --policy DIR to measure a policy\n");
    return 2;
  }
  if (!output.empty() && o.solutions_path.empty()) {
    std::fprintf(stderr, "kbrl-warmstart: --solutions is required to train\n");
    return 2;
  }
  if (o.shape.hidden_size % o.shape.num_attention_heads != 0
      || o.shape.num_attention_heads % o.shape.num_key_value_heads != 0
      || (o.shape.hidden_size / o.shape.num_attention_heads) % 2 != 0) {
    std::fprintf(stderr, "kbrl-warmstart: --heads must divide --hidden into an even head width, "
                         "and --kv-heads must divide --heads\n");
    return 2;
  }
  if (threads > 0)
    at::set_num_threads(threads);
  o.output = output;
  o.dtype = dtype == "fp32" ? model::st_dtype::f32 : model::st_dtype::bf16;
  o.backend = backend == "cuda"     ? kernel_backend::cuda
              : backend == "triton" ? kernel_backend::triton
                                    : kernel_backend::torch;
  for (int i = 0; i < argc; ++i)
    o.command_line += (i ? " " : "") + std::string(argv[i]);

  auto run = o.config_path.empty() ? caf::expected<config::run_config>(config::run_config{})
                                   : config::run_config::load(o.config_path);
  if (!run)
    return fail(run.error());
  auto prompts = episode::prompt_settings_from(*run);
  if (!prompts)
    return fail(prompts.error());
  auto problems = warmstart::load_problem_folder(o.problems_root, o.backend, o.precision);
  if (!problems)
    return fail(problems.error());

  if (!output.empty()) {
    std::printf("warm start: %zu problems under %s, examples from %s, writing %s\n",
                problems->size(), o.problems_root.c_str(), o.solutions_path.c_str(),
                output.c_str());
    std::fflush(stdout);
    auto result = warmstart::run_warm_start(o, [](const warmstart::finetune_progress& p) {
      if (!p.epoch_done)
        return;
      std::printf("epoch %lld/%lld: loss %.3f per token (step %lld/%lld, learning rate %.2g), "
                  "%.0f tokens/s, %s so far, about %s left\n",
                  static_cast<long long>(p.epoch), static_cast<long long>(p.epochs), p.epoch_loss,
                  static_cast<long long>(p.step), static_cast<long long>(p.steps), p.lr,
                  p.tokens_per_s, duration(p.elapsed_s).c_str(), duration(p.remaining_s).c_str());
      std::fflush(stdout);
    });
    if (!result)
      return fail(result.error());
    std::printf("done: %zu examples, vocabulary of %d tokens, %lld weights; prompts up to %zu "
                "tokens (mean %.0f), completions up to %zu (mean %.0f)\n"
                "loss per completion token %.3f before, %.3f after %s of training\n"
                "wrote %s (model.safetensors, config.json, tokenizer files, warmstart.json)\n",
                result->examples, result->vocab_size, static_cast<long long>(result->parameters),
                result->longest_prompt, result->mean_prompt, result->longest_completion,
                result->mean_completion, result->initial_loss, result->final_loss,
                duration(result->train_seconds).c_str(), output.c_str());
    std::fflush(stdout);
    if (policy.empty())
      policy = output;
  }
  if (measure_samples > 0)
    return measure(policy, *problems, *prompts, *run, measure_samples, o.training.seed);
  return 0;
}
