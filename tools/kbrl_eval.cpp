// kbrl-eval: evaluate a model, a checkpoint, or kernels that already exist, on KernelBench-style
// problems, with the metrics KernelBench reports (pass@k, fast_p, geometric-mean speedup) per
// level, per turn and per error category, and a report a person can read.
//
//   kbrl-eval --model PATH|ID [--adapter DIR] --levels 1,2 [--problems 1-20] --samples N
//             --backend cuda --output results/ [--gpu 0,1] [--config sampler.slots=64 ...]
//   kbrl-eval --generations DIR [--levels 1] [--problems 1-20] --backend cuda --output results/
//
// --model draws completions with the built-in sampler (the model in libtorch on --sampler-gpu)
// or a remote OpenAI-compatible server (--config sampler.backend=remote sampler.remote_url=...),
// from a single-turn prompt (runtime/eval/answer_parsing.hpp), and writes them to
// OUT/generations/ in the generations layout. --generations scores an existing folder in that
// layout (runtime/report/generations_dir.hpp; also KernelBench's own runs folders), so kernels of
// any system or API model are scored by the same evaluator. Every candidate goes through the
// evaluator supervisor (CPU builders + one evaluator per --gpu, as kbrl-node runs it).
//
// Output (runtime/report/results_json.hpp): OUT/problems/<id>.json as each problem finishes,
// then OUT/results.json and OUT/report.html. Interrupted (Ctrl-C), a re-run with the same OUT
// continues: finished problems are read back and completions already written are reused.
// --tensorboard DIR --step N also logs the metrics as TensorBoard scalars at step N (a training
// checkpoint's evaluation).
//
// Problems come from --kernelbench DIR or $KERNELBENCH_ROOT: a KernelBench checkout
// (KernelBench/level<L>/), a folder of level<L>/ folders, or one folder of problem files.
//
// Caches: reference timings go to OUT/.cache/ and extensions are built in a scratch folder, unless
// eval.cache_dir names a folder shared by runs (then both go there, and a candidate whose source
// was built before is loaded, not built again).
//
// Exit status: 0 evaluated (whatever the verdicts), 1 a problem with the inputs, the output folder
// or the evaluator (the message says which), 130 interrupted (re-run to continue).

#include "actors/evaluator_supervisor.hpp"
#include "actors/sampler.hpp"
#include "messages/type_ids.hpp"
#include "runtime/eval/answer_parsing.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/hub/resolve_model.hpp"
#include "runtime/node/node_runtime.hpp"
#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/generations_dir.hpp"
#include "runtime/report/html_report.hpp"
#include "runtime/report/problem_selection.hpp"
#include "runtime/report/results_json.hpp"
#include "runtime/report/run_ledger.hpp"
#include "runtime/report/tfevents_writer.hpp"
#include "runtime/sampler/sampler_settings.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

using namespace kbrl;

namespace {

namespace fs = std::filesystem;

std::atomic<int> received_signal{0};
/// SIGINT/SIGTERM while candidates are evaluated: the first asks main to stop at its next poll,
/// a second one ends the process at once.
extern "C" void kbrl_eval_on_signal(int sig) {
  if (received_signal.exchange(sig) != 0)
    std::_Exit(130);
}

using done_atom = caf::atom_constant<caf::atom("done")>;

int fail(const std::string& what) {
  std::fprintf(stderr, "kbrl-eval: %s\n", what.c_str());
  return 1;
}

caf::expected<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <class Enum>
bool parse_enum(const std::string& text, Enum& out, std::initializer_list<Enum> all) {
  for (auto e : all)
    if (text == to_string(e)) {
      out = e;
      return true;
    }
  return false;
}

// -- what the command line says ------------------------------------------------------------------

struct cli_options {
  std::string model, adapter, generations, output, kernelbench, levels, problems;
  int32_t samples = 0; // 0: --generations takes it from the folder, --model uses 1
  int32_t turns = 1;
  bool turns_given = false;
  std::string backend = "cuda", precision = "fp32";
  std::vector<int> gpus;
  int sampler_gpu = -2; // -2: the first of --gpu, else the CPU
  int builders = -1;    // -1: eval.build_workers
  int32_t trials = 5, perf_trials = 100;
  bool no_timing = false, compare_compile = false;
  double timeout_s = 300;
  uint64_t eval_seed = 42;
  double temperature = -1, top_p = 0.95;
  int32_t top_k = 0, max_new_tokens = 4096;
  uint64_t sampling_seed = 0;
  std::string chat_format = "auto", tokenizer;
  std::string tensorboard;
  int64_t step = -1;
  std::vector<std::string> config;
};

// -- the work ------------------------------------------------------------------------------------

/// One candidate to score: a file of a generations folder, or a completion to draw.
struct work_item {
  size_t problem = 0;        ///< index into the run's problems
  int32_t sample = 0;
  int32_t turn = 0;
  std::string file;          ///< the candidate's file (--model: where its completion goes)
  std::string relative;      ///< recorded as the sample's source
  bool is_completion = false;///< code must be extracted from the text
  bool generate = false;     ///< --model: no completion on disk yet
  bool missing = false;      ///< --generations: no file for this sample
};

/// How a --model run turns a problem into a generation request.
struct prompt_maker {
  std::optional<tok::tokenizer> tokenizer;   ///< encodes rendered prompts (built-in sampler)
  std::optional<tok::chat_format> chat;      ///< renders the user message; none: sent raw
  bool send_text = false;                    ///< remote: send prompt_text too
  sampling_params params;
  uint64_t seed = 0;

  generation_request make(const problem& p, int32_t sample, uint64_t id) const {
    generation_request req;
    req.id = id;
    auto user = eval::single_turn_prompt(p);
    std::string text = user;
    if (chat) {
      // A rendering failure (invalid UTF-8 in a problem file) falls back to the raw message.
      if (auto rendered = chat->render({{"user", user, std::nullopt}}, true))
        text = *rendered;
    }
    if (tokenizer)
      req.prompt_tokens = tokenizer->encode(text);
    if (send_text || !tokenizer)
      req.prompt_text = text;
    req.params = params;
    if (chat)
      req.params.stop_strings.push_back(chat->end_of_turn());
    // A seed per (problem, sample): a continued run draws what the first would have.
    req.params.seed =
      seed ^ std::stoull(eval::source_hash(p.id + "#" + std::to_string(sample)), nullptr, 16);
    req.trace = p.id + " sample " + std::to_string(sample);
    return req;
  }
};

/// The evaluator supervisor, spawned when the first candidate needs it: a run whose answers hold
/// no program (format failures) starts no worker process at all.
struct lazy_evaluators {
  std::function<evaluator_supervisor_actor()> spawn;
  evaluator_supervisor_actor handle;

  evaluator_supervisor_actor get() {
    if (!handle)
      handle = spawn();
    return handle;
  }
};

/// Everything the collector works on; main reads it only after the collector is done.
struct run_context {
  std::vector<problem> problems;
  std::vector<work_item> items;
  std::unique_ptr<report::run_ledger> ledger;
  timing_options timing;
  prompt_maker prompts;
  size_t generation_limit = 64;
  size_t recorded = 0;
  std::string failure; ///< set when the run cannot go on (an output file cannot be written)
};

std::string verdict_line(const report::sample_record& r) {
  char buf[64];
  if (r.correct) {
    if (r.speedup > 0)
      std::snprintf(buf, sizeof buf, "correct, %.2fx", r.speedup);
    else
      std::snprintf(buf, sizeof buf, "correct");
    return buf;
  }
  return r.error == "none" ? "incorrect (mismatch)" : r.error;
}

/// The event-based actor that drives the run: draws completions (bounded number in flight),
/// extracts programs, sends them to the evaluator supervisor and files every verdict.
caf::behavior collector(caf::event_based_actor* self, std::shared_ptr<run_context> ctx,
                        std::shared_ptr<lazy_evaluators> evaluators, sampler_actor sampler,
                        caf::actor notify) {
  struct state {
    std::deque<size_t> to_generate;
    size_t generating = 0;
  };
  auto st = std::make_shared<state>();
  auto finish_if_done = [self, ctx, notify] {
    if (ctx->recorded == ctx->items.size() || !ctx->failure.empty()) {
      self->send(notify, done_atom::value);
      self->quit();
    }
  };
  auto record = [ctx, finish_if_done](size_t i, report::sample_record r) {
    if (!ctx->failure.empty()) {
      finish_if_done();
      return;
    }
    auto& item = ctx->items[i];
    auto& p = ctx->problems[item.problem];
    r.problem = p.id;
    r.level = p.level;
    r.problem_number = p.number;
    r.sample = item.sample;
    r.turn = item.turn;
    if (r.source.empty())
      r.source = item.relative;
    ++ctx->recorded;
    auto turn = item.turn > 0 ? " turn " + std::to_string(item.turn) : std::string();
    std::printf("[%zu/%zu] %s sample %d%s: %s\n", ctx->recorded, ctx->items.size(),
                p.id.c_str(), item.sample, turn.c_str(), verdict_line(r).c_str());
    auto done = ctx->ledger->add(std::move(r));
    if (!done)
      ctx->failure = describe(done.error());
    else if (*done)
      std::printf("  %s finished\n", p.id.c_str());
    std::fflush(stdout);
    finish_if_done();
  };
  // A candidate's text is here: take the program out of it and have it evaluated.
  auto evaluate = [self, ctx, evaluators, record](size_t i, const std::string& text,
                                           report::sample_record base) {
    auto& item = ctx->items[i];
    std::string code = text;
    base.extraction = "file";
    if (item.is_completion) {
      auto found = eval::extract_kernel_code(text);
      if (!found) {
        base.error = to_string(eval_error::format);
        base.error_excerpt = describe(found.error());
        record(i, std::move(base));
        return;
      }
      code = std::move(found->code);
      base.extraction = found->how;
    }
    base.candidate_hash = eval::source_hash(code);
    eval_request req;
    req.id = i;
    req.candidate_source = std::move(code);
    req.task = ctx->problems[item.problem];
    req.timing = ctx->timing;
    req.trace = ctx->problems[item.problem].id + " sample " + std::to_string(item.sample);
    self->request(evaluators->get(), caf::infinite, evaluate_atom::value, std::move(req))
      .then(
        [record, i, base](eval_result& v) mutable {
          report::take_verdict(base, v);
          record(i, std::move(base));
        },
        [record, i, base, self](caf::error& err) mutable {
          base.error = to_string(eval_error::infrastructure);
          base.error_excerpt = self->system().render(err);
          record(i, std::move(base));
        });
  };
  // Keeps up to generation_limit completions in flight. It refers to itself only weakly: a
  // strong self-reference would keep the sampler's handle alive for ever, and the actor system
  // waits for every detached actor (the sampler is one) to be destroyed before it exits.
  auto pump = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_pump = pump;
  *pump = [self, ctx, st, sampler, evaluate, record, weak_pump] {
    auto pump = weak_pump.lock();
    if (!pump)
      return;
    while (st->generating < ctx->generation_limit && !st->to_generate.empty()) {
      auto i = st->to_generate.front();
      st->to_generate.pop_front();
      ++st->generating;
      auto& item = ctx->items[i];
      auto req = ctx->prompts.make(ctx->problems[item.problem], item.sample, i);
      self->request(sampler, caf::infinite, generate_atom::value, std::move(req))
        .then(
          [ctx, st, evaluate, record, pump, i](generation_result& res) {
            --st->generating;
            report::sample_record base;
            base.completion_tokens = static_cast<int32_t>(res.completion_tokens.size());
            base.finish = to_string(res.finish);
            if (res.finish == finish_reason::error || res.finish == finish_reason::cancelled) {
              base.error = report::generation_error;
              base.error_excerpt = res.error;
              record(i, std::move(base));
            } else if (auto ok = report::write_file_atomically(ctx->items[i].file,
                                                               res.completion_text);
                       !ok) {
              ctx->failure = describe(ok.error());
              record(i, std::move(base));
            } else {
              evaluate(i, res.completion_text, std::move(base));
            }
            (*pump)();
          },
          [st, record, pump, i](caf::error& err) {
            --st->generating;
            report::sample_record base;
            base.error = report::generation_error;
            base.error_excerpt = describe(err);
            record(i, std::move(base));
            (*pump)();
          });
    }
  };
  for (size_t i = 0; i < ctx->items.size(); ++i) {
    auto& item = ctx->items[i];
    if (item.missing) {
      report::sample_record r;
      r.error = report::missing_error;
      r.source = "";
      r.extraction = "";
      record(i, std::move(r));
    } else if (item.generate) {
      st->to_generate.push_back(i);
    } else {
      auto text = read_text(item.file);
      report::sample_record base;
      if (!text) {
        base.error = report::missing_error;
        base.error_excerpt = describe(text.error());
        record(i, std::move(base));
      } else {
        evaluate(i, *text, std::move(base));
      }
    }
  }
  (*pump)();
  if (ctx->items.empty())
    finish_if_done();
  return {[pump](done_atom) {}}; // the behavior owns the pump
}

// -- setting the run up --------------------------------------------------------------------------

/// The problem source: --kernelbench, else $KERNELBENCH_ROOT.
std::string problem_root(const cli_options& o) {
  if (!o.kernelbench.empty())
    return o.kernelbench;
  const char* env = std::getenv("KERNELBENCH_ROOT");
  return env ? env : "";
}

/// The backend and precision the candidates of `p` are written for and checked in (the command
/// line has checked both names).
void set_task(const cli_options& o, problem& p) {
  parse_enum(o.backend, p.backend,
             {kernel_backend::cuda, kernel_backend::triton, kernel_backend::torch,
              kernel_backend::hip, kernel_backend::cute, kernel_backend::tilelang,
              kernel_backend::thunderkittens});
  parse_enum(o.precision, p.precision,
             {kernel_precision::fp32, kernel_precision::fp16, kernel_precision::bf16});
}

/// --generations: the problems the folder (and the flags) name, and one work item per file.
caf::error plan_generations(const cli_options& o, run_context& ctx, report::run_info& info) {
  auto scan = report::scan_generations(o.generations);
  if (!scan)
    return scan.error();
  if (scan->files.empty())
    return make_error(errc::invalid_argument,
                      o.generations + ": no candidate files (expected level<L>/<problem>/"
                                      "sample_<S>.py or .txt, or KernelBench's "
                                      "level_<L>_problem_<N>_sample_<S>_kernel.py)");
  if (!scan->ignored.empty()) {
    std::string some;
    for (size_t i = 0; i < scan->ignored.size() && i < 5; ++i)
      some += (i ? ", " : "") + scan->ignored[i];
    std::fprintf(stderr, "kbrl-eval: %zu file(s) in %s match no layout and are ignored: %s%s\n",
                 scan->ignored.size(), o.generations.c_str(), some.c_str(),
                 scan->ignored.size() > 5 ? ", ..." : "");
  }
  std::vector<int32_t> levels;
  if (!o.levels.empty()) {
    auto parsed = report::parse_levels(o.levels);
    if (!parsed)
      return parsed.error();
    levels = *parsed;
  } else {
    for (auto& f : scan->files)
      if (std::find(levels.begin(), levels.end(), f.level) == levels.end())
        levels.push_back(f.level);
  }
  auto numbers = report::parse_number_set(o.problems);
  if (!numbers)
    return numbers.error();
  int32_t most_samples = 0, most_turns = 0;
  for (auto& f : scan->files) {
    most_samples = std::max(most_samples, f.sample + 1);
    most_turns = std::max(most_turns, f.turn + 1);
  }
  int32_t samples = o.samples > 0 ? o.samples : most_samples;
  int32_t turns = o.turns_given ? o.turns : most_turns;
  auto root = problem_root(o);
  // Without --problems: the problems the folder has files for (a partial folder is a subset,
  // not a failed full level). With --problems: exactly those, missing files counted as failures.
  std::vector<problem> problems;
  for (auto level : levels) {
    report::number_set wanted = *numbers;
    if (numbers->all()) {
      for (auto& f : scan->files)
        if (f.level == level)
          wanted.ranges.emplace_back(f.problem_number, f.problem_number);
      if (wanted.ranges.empty())
        return make_error(errc::invalid_argument, o.generations + ": no files for level "
                                                    + std::to_string(level));
    }
    auto some = report::select_problems(root, {level}, wanted);
    if (!some)
      return some.error();
    for (auto& p : *some)
      problems.push_back(std::move(p));
  }
  // Every file must belong to a selected problem (or be outside the selection on purpose).
  std::map<std::pair<int32_t, int32_t>, size_t> index;
  for (size_t i = 0; i < problems.size(); ++i)
    index[{problems[i].level, problems[i].number}] = i;
  std::vector<std::string> unknown;
  for (auto& f : scan->files)
    if (std::find(levels.begin(), levels.end(), f.level) != levels.end()
        && numbers->contains(f.problem_number) && !index.count({f.level, f.problem_number}))
      unknown.push_back(f.relative);
  if (!unknown.empty())
    return make_error(errc::invalid_argument,
                      "no problem under " + root + " for " + std::to_string(unknown.size())
                        + " file(s) of " + o.generations + ", e.g. " + unknown.front());
  for (auto& p : problems)
    set_task(o, p);
  // One item per file of a selected sample and turn; a sample without any file is missing.
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<const report::generation_file*>>
    by_sample;
  for (auto& f : scan->files)
    if (f.sample < samples && f.turn < turns)
      by_sample[{f.level, f.problem_number, f.sample}].push_back(&f);
  ctx.problems = std::move(problems);
  for (size_t pi = 0; pi < ctx.problems.size(); ++pi) {
    auto& p = ctx.problems[pi];
    for (int32_t s = 0; s < samples; ++s) {
      auto it = by_sample.find({p.level, p.number, s});
      if (it == by_sample.end()) {
        work_item w;
        w.problem = pi;
        w.sample = s;
        w.missing = true;
        ctx.items.push_back(std::move(w));
        continue;
      }
      for (auto* f : it->second) {
        work_item w;
        w.problem = pi;
        w.sample = s;
        w.turn = f->turn;
        w.file = f->path;
        w.relative = f->relative;
        w.is_completion = f->is_completion;
        ctx.items.push_back(std::move(w));
      }
    }
  }
  info.mode = "generations";
  info.generations_dir = fs::absolute(o.generations).lexically_normal().string();
  info.levels = levels;
  info.samples = samples;
  info.turns = turns;
  info.problem_source = root;
  return {};
}

/// --model: the problems of --levels/--problems, one work item per sample.
caf::error plan_model(const cli_options& o, run_context& ctx, report::run_info& info,
                      const std::string& generations_root) {
  if (o.levels.empty())
    return make_error(errc::invalid_argument, "--model needs --levels (e.g. --levels 1,2)");
  if (o.turns > 1)
    return make_error(errc::not_supported,
                      "--turns " + std::to_string(o.turns)
                        + ": multi-turn generation is not there yet (it needs the RL loop's "
                          "episodes, which feed each verdict back to the model); evaluate "
                          "multi-turn completions written elsewhere with --generations "
                          "(sample_<S>/turn_<T>.txt)");
  auto levels = report::parse_levels(o.levels);
  if (!levels)
    return levels.error();
  auto numbers = report::parse_number_set(o.problems);
  if (!numbers)
    return numbers.error();
  auto root = problem_root(o);
  auto problems = report::select_problems(root, *levels, *numbers);
  if (!problems)
    return problems.error();
  ctx.problems = std::move(*problems);
  int32_t samples = o.samples > 0 ? o.samples : 1;
  for (size_t pi = 0; pi < ctx.problems.size(); ++pi) {
    set_task(o, ctx.problems[pi]);
    for (int32_t s = 0; s < samples; ++s) {
      work_item w;
      w.problem = pi;
      w.sample = s;
      w.relative = report::completion_relative_path(ctx.problems[pi], s, 0, false);
      w.file = (fs::path(generations_root) / w.relative).string();
      w.is_completion = true;
      std::error_code ec;
      w.generate = !fs::exists(w.file, ec); // a continued run reuses what was drawn
      ctx.items.push_back(std::move(w));
    }
  }
  info.mode = "model";
  info.model = o.model;
  info.adapter = o.adapter.empty() ? "" : fs::absolute(o.adapter).lexically_normal().string();
  info.levels = *levels;
  info.samples = samples;
  info.turns = 1;
  info.problem_source = root;
  return {};
}

/// The tokenizer for prompts: --tokenizer, else the model's (built-in sampler only).
caf::expected<std::optional<tok::tokenizer>> prompt_tokenizer(const cli_options& o,
                                                              bool builtin) {
  std::string ref = !o.tokenizer.empty() ? o.tokenizer : builtin ? o.model : "";
  if (ref.empty())
    return std::optional<tok::tokenizer>{};
  std::error_code ec;
  fs::path dir;
  if (fs::is_directory(ref, ec)) {
    dir = ref;
  } else {
    auto resolved = hub::resolve_model(ref, hub::hub_options_from_environment());
    if (!resolved)
      return resolved.error();
    dir = *resolved;
  }
  auto t = tok::tokenizer::load(dir);
  if (!t)
    return t.error();
  return std::optional<tok::tokenizer>{std::move(*t)};
}

caf::error setup_prompts(const cli_options& o, const sampling::sampler_settings& s,
                         prompt_maker& pm, report::run_info& info) {
  bool builtin = s.backend == "builtin";
  bool chat_api = !builtin && s.remote.api == remote::remote_api::chat;
  auto tokenizer = prompt_tokenizer(o, builtin);
  if (!tokenizer)
    return tokenizer.error();
  pm.tokenizer = std::move(*tokenizer);
  std::string how = "single-turn KernelBench-style prompt";
  if (chat_api) {
    // The server applies the model's chat template to the one user message.
    pm.tokenizer.reset();
    how += ", chat endpoint (the server's template)";
  } else if (o.chat_format == "none") {
    how += ", sent as raw text";
  } else if (o.chat_format == "auto") {
    if (!pm.tokenizer)
      return make_error(errc::invalid_argument,
                        "the remote completions endpoint needs the prompt rendered in the "
                        "model's chat format: pass --tokenizer PATH|ID (its chat template is "
                        "recognised), --chat-format chatml|qwen3|llama3, --chat-format none, or "
                        "use sampler.remote_api=chat");
    auto chat = tok::chat_format::for_tokenizer(*pm.tokenizer);
    if (!chat)
      return make_error(errc::invalid_argument,
                        describe(chat.error())
                          + " (kbrl-eval: force one with --chat-format NAME, or --chat-format "
                            "none to send the prompt as it is)");
    pm.chat = std::move(*chat);
    how += ", chat format " + pm.chat->name();
  } else {
    auto chat = pm.tokenizer ? tok::chat_format::for_tokenizer(*pm.tokenizer, o.chat_format)
                             : tok::chat_format::by_name(o.chat_format);
    if (!chat)
      return make_error(errc::invalid_argument, "--chat-format " + o.chat_format + ": "
                                                  + describe(chat.error()));
    pm.chat = std::move(*chat);
    how += ", chat format " + pm.chat->name();
  }
  pm.send_text = !builtin;
  if (!builtin && pm.tokenizer && !s.remote.use_token_prompts)
    pm.tokenizer.reset();
  pm.params.temperature = o.temperature >= 0 ? o.temperature : (o.samples > 1 ? 0.7 : 0.0);
  pm.params.top_p = o.top_p;
  pm.params.top_k = o.top_k;
  pm.params.max_new_tokens = o.max_new_tokens;
  pm.seed = o.sampling_seed;
  char buf[160];
  std::snprintf(buf, sizeof buf, "temperature %g, top_p %g, top_k %d, max_new_tokens %d, seed %llu",
                pm.params.temperature, pm.params.top_p, pm.params.top_k, pm.params.max_new_tokens,
                static_cast<unsigned long long>(pm.seed));
  info.sampling = buf;
  info.prompt = how;
  return {};
}

/// Asks the sampler for its status; an error when it has no backend or did not take the adapter.
caf::error check_sampler(caf::actor_system& sys, const sampler_actor& sampler, bool adapter) {
  caf::scoped_actor self{sys};
  caf::error out;
  self->request(sampler, std::chrono::minutes(10), status_atom::value)
    .receive(
      [&](actor_status& st) {
        if (st.state == "failed") {
          out = make_error(errc::invalid_config, "the sampler could not start: " + st.last_error);
          return;
        }
        if (adapter) {
          std::string version;
          for (auto& d : st.details)
            if (d.key == "policy version")
              version = d.value;
          if (version != "1")
            out = make_error(errc::invalid_argument,
                             "the adapter was not applied: "
                               + (st.last_error.empty() ? std::string("unknown reason")
                                                        : st.last_error));
        }
      },
      [&](caf::error& err) { out = err; });
  return out;
}

std::string join_ints(const std::vector<int>& xs) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

void print_summary(const report::eval_metrics& m) {
  auto line = [&](const report::metric_group& g) {
    std::printf("%-8s %4zu problems %5zu samples  correct %5.1f%%", g.name.c_str(), g.problems,
                g.samples, 100 * g.correct_rate);
    for (size_t k = 0; k < g.pass_at_k.size() && k < 3; ++k)
      std::printf("  pass@%zu %5.1f%%", k + 1, 100 * g.pass_at_k[k]);
    for (size_t i = 0; i < m.thresholds.size(); ++i)
      if (m.thresholds[i] == 1.0 || m.thresholds[i] == 2.0 || m.thresholds[i] == 0.0)
        std::printf("  %s %5.1f%%", report::fast_p_name(m.thresholds[i]).c_str(),
                    100 * g.fast_p[i]);
    std::printf("  geomean %.2fx\n", g.geomean_speedup);
  };
  line(m.overall);
  for (auto& g : m.levels)
    line(g);
  for (auto& g : m.turns)
    line(g);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-eval: evaluate a model or existing kernels on KernelBench-style problems\n"
               "(pass@k, fast_p, speedups per level; results.json and report.html)"};
  cli_options o;
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
  auto* turns_opt = app.add_option("--turns", o.turns, "Turns per sample")->check(CLI::Range(1, 64));
  app.add_option("--backend", o.backend, "cuda, triton, torch, hip, cute, tilelang, thunderkittens")
    ->check(CLI::IsMember({"cuda", "triton", "torch", "hip", "cute", "tilelang", "thunderkittens"}))
    ->capture_default_str();
  app.add_option("--precision", o.precision)->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
    ->capture_default_str();
  app.add_option("--kernelbench", o.kernelbench,
                 "Problem source: a KernelBench checkout, a folder of level<L>/ folders or of "
                 "problem files (default $KERNELBENCH_ROOT)");
  app.add_option("--output", o.output, "Output folder (re-run with the same one to continue)")
    ->required();
  app.add_option("--gpu", o.gpus, "CUDA devices, one evaluator each (none: one CPU evaluator)")
    ->delimiter(',');
  app.add_option("--sampler-gpu", o.sampler_gpu,
                 "CUDA device of the built-in sampler, -1 for the CPU (default: the first --gpu)");
  app.add_option("--builders", o.builders, "CPU build workers (default eval.build_workers)")
    ->check(CLI::Range(0, 256));
  app.add_option("--trials", o.trials, "Correctness trials per candidate")->check(CLI::Range(1, 1000))
    ->capture_default_str();
  app.add_option("--perf-trials", o.perf_trials, "Timed runs per candidate")
    ->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_flag("--no-timing", o.no_timing, "Check correctness only (no speedups)");
  app.add_option("--timeout", o.timeout_s, "Seconds per evaluation")->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--eval-seed", o.eval_seed, "Seed of the correctness trials' inputs")
    ->capture_default_str();
  app.add_flag("--compare-torch-compile", o.compare_compile,
               "Also report speedups against a torch.compile reference");
  app.add_option("--temperature", o.temperature,
                 "Sampling temperature (default 0 = greedy with one sample, else 0.7)");
  app.add_option("--top-p", o.top_p)->capture_default_str();
  app.add_option("--top-k", o.top_k, "0: off")->capture_default_str();
  app.add_option("--max-new-tokens", o.max_new_tokens)->check(CLI::Range(1, 1 << 20))
    ->capture_default_str();
  app.add_option("--sampling-seed", o.sampling_seed)->capture_default_str();
  app.add_option("--chat-format", o.chat_format,
                 "auto (from the tokenizer's template), chatml, qwen3, llama3, or none (raw)")
    ->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer (model directory or id) for prompts when it is not the model's");
  auto* tb_opt = app.add_option("--tensorboard", o.tensorboard,
                                "Also log the metrics as TensorBoard scalars into this folder");
  app.add_option("--step", o.step, "The training step the metrics are logged at")
    ->needs(tb_opt)->check(CLI::NonNegativeNumber);
  app.add_option("--config", o.config,
                 "Run-config override key=value (sampler.*, eval.*), or a run config TOML file; "
                 "repeatable");
  CLI11_PARSE(app, argc, argv);
  o.turns_given = turns_opt->count() > 0;
  if (o.model.empty() && o.generations.empty())
    return fail("give --model PATH|ID (generate and evaluate) or --generations DIR (evaluate "
                "existing candidates)");
  if (!o.tensorboard.empty() && o.step < 0)
    return fail("--tensorboard needs --step N (the training step the metrics belong to)");

  // The run config: files first, then key=value overrides, in order.
  config::run_config run;
  for (auto& c : o.config) {
    if (c.find('=') == std::string::npos) {
      auto loaded = config::run_config::load(c);
      if (!loaded)
        return fail(describe(loaded.error()));
      run = std::move(*loaded);
    }
  }
  for (auto& c : o.config)
    if (c.find('=') != std::string::npos)
      if (auto err = run.apply_override(c))
        return fail(describe(err));
  if (o.builders >= 0)
    if (auto err = run.apply_override("eval.build_workers=" + std::to_string(o.builders)))
      return fail(describe(err));

  report::run_info info;
  info.backend = o.backend;
  info.precision = o.precision;
  info.problems = o.problems.empty() ? "all" : o.problems;
  info.started = report::utc_now();
  info.tensorboard_step = o.tensorboard.empty() ? -1 : o.step;
  info.evaluator = o.gpus.empty() ? "cpu" : "gpu " + join_ints(o.gpus);
  auto ctx = std::make_shared<run_context>();
  ctx->timing.correctness_trials = o.trials;
  ctx->timing.perf_trials = o.perf_trials;
  ctx->timing.measure_performance = !o.no_timing && o.perf_trials > 0;
  ctx->timing.seed = o.eval_seed;
  ctx->timing.timeout_s = o.timeout_s;
  ctx->timing.compare_torch_compile = o.compare_compile;
  info.timing = ctx->timing;

  const auto out_dir = fs::path(o.output);
  const auto generations_root = (out_dir / "generations").string();
  std::optional<sampling::sampler_settings> sampler_settings;
  if (!o.generations.empty()) {
    if (auto err = plan_generations(o, *ctx, info))
      return fail(describe(err));
  } else {
    if (auto err = plan_model(o, *ctx, info, generations_root))
      return fail(describe(err));
    int sampler_gpu = o.sampler_gpu >= -1 ? o.sampler_gpu : o.gpus.empty() ? -1 : o.gpus.front();
    sampler_settings = sampling::sampler_settings_from(run, sampler_gpu, "kbrl-eval/sampler");
    // --model is what the built-in sampler loads, or the name a remote server knows the model
    // by (unless sampler.remote_model says otherwise).
    if (sampler_settings->backend == "builtin")
      sampler_settings->model = o.model;
    else if (sampler_settings->remote.model.empty())
      sampler_settings->remote.model = o.model;
    ctx->generation_limit = std::max<size_t>(1, sampler_settings->queue_capacity);
    if (auto err = setup_prompts(o, *sampler_settings, ctx->prompts, info))
      return fail(describe(err));
  }
  if (ctx->timing.compare_torch_compile)
    std::fprintf(stderr, "kbrl-eval: --compare-torch-compile: the evaluation worker does not time "
                         "a torch.compile reference yet; the report says so\n");

  // The output folder: a continued run must have been started with the same settings.
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    return fail(o.output + ": cannot create the output folder: " + ec.message());
  auto signature = report::signature_of(info);
  auto run_file = (out_dir / "run.json").string();
  if (fs::exists(run_file, ec)) {
    auto stored = report::read_run_signature(run_file);
    if (!stored)
      return fail(describe(stored.error()));
    if (auto diff = report::signature_difference(signature, *stored); !diff.empty())
      return fail(o.output + " holds a run with other settings:\n" + diff
                  + "\nuse another --output folder (or delete this one)");
  }
  if (auto ok = report::write_file_atomically(run_file, report::run_json(info)); !ok)
    return fail(describe(ok.error()));
  ctx->ledger = std::make_unique<report::run_ledger>(o.output, signature);
  auto restored = ctx->ledger->restore(ctx->problems);
  if (!restored)
    return fail(describe(restored.error()));
  std::set<std::string> done(restored->begin(), restored->end());
  {
    std::vector<work_item> open;
    std::map<std::string, size_t> per_problem;
    for (auto& w : ctx->items)
      if (!done.count(ctx->problems[w.problem].id)) {
        ++per_problem[ctx->problems[w.problem].id];
        open.push_back(std::move(w));
      }
    ctx->items = std::move(open);
    for (auto& [id, n] : per_problem)
      ctx->ledger->expect(id, n);
  }
  size_t to_generate = std::count_if(ctx->items.begin(), ctx->items.end(),
                                     [](const work_item& w) { return w.generate; });
  size_t missing = std::count_if(ctx->items.begin(), ctx->items.end(),
                                 [](const work_item& w) { return w.missing; });
  std::string extra;
  if (sampler_settings)
    extra += ", " + std::to_string(to_generate) + " to generate";
  if (missing > 0)
    extra += ", " + std::to_string(missing) + " sample(s) without a file (counted as missing)";
  std::printf("kbrl-eval: %zu problems (%zu finished before), %zu candidates to evaluate%s\n",
              ctx->problems.size(), done.size(), ctx->items.size() - missing, extra.c_str());
  std::fflush(stdout);

  // The evaluators, as kbrl-node and kbrl-bench-eval set them up.
  auto engine = evaluation_engine_options(run);
  if (auto ok = eval::validate_overrides(engine.rule_overrides); !ok)
    return fail(describe(ok.error()));
  char tmpl[] = "/tmp/kbrl-eval-XXXXXX";
  if (!::mkdtemp(tmpl))
    return fail("cannot create a scratch folder under /tmp");
  std::string scratch = tmpl;
  // Searchable by others: as root, workers run as nobody inside it.
  fs::permissions(scratch, fs::perms::others_exec, fs::perm_options::add, ec);
  // Caches: with eval.cache_dir, reference timings and built extensions are shared by every run
  // that names the folder (a candidate built once is loaded, not built, next time); without it,
  // reference timings stay with the output folder and builds with this invocation.
  auto cache_dir = run.get_string("eval.cache_dir");
  if (cache_dir.empty()) {
    engine.reference_cache_file = (out_dir / ".cache" / "reference_times.jsonl").string();
    engine.worker.extensions_dir = scratch + "/extensions";
  } else {
    engine.worker.extensions_dir = (fs::path(cache_dir) / "extensions").string();
  }
  std::vector<evaluator_slot> slots;
  auto add_slot = [&](int gpu, int index) {
    evaluator_slot s;
    s.name = actor_name("kbrl-eval", "evaluator", index);
    s.gpu = gpu;
    s.engine = engine;
    s.engine.worker.scratch_dir = scratch + "/evaluator." + std::to_string(index);
    s.engine.worker.gpu = gpu;
    slots.push_back(std::move(s));
  };
  if (o.gpus.empty())
    add_slot(-1, 0);
  for (size_t i = 0; i < o.gpus.size(); ++i)
    add_slot(o.gpus[i], static_cast<int>(i));
  auto builder_engine = engine;
  builder_engine.worker.scratch_dir = scratch + "/builders";
  builder_engine.worker.gpu = -1;
  auto supervision = evaluation_supervision(run);
  supervision.queue_capacity = ctx->items.size() + 1; // the collector bounds nothing itself

  int exit_code = 0;
  auto t0 = std::chrono::steady_clock::now();
  if (!ctx->items.empty()) {
    caf::actor_system_config cfg;
    register_message_types(cfg);
    caf::actor_system sys{cfg};
    actor_stats sup_stats;
    sup_stats.name = "kbrl-eval/evaluator-supervisor";
    sup_stats.node = "kbrl-eval";
    sup_stats.role = "evaluator-supervisor";
    auto evaluators = std::make_shared<lazy_evaluators>();
    evaluators->spawn = [&sys, sup_stats, supervision, slots, builder_engine] {
      return sys.spawn(evaluator_supervisor, sup_stats, supervision, slots, builder_engine);
    };
    sampler_actor sampler;
    if (sampler_settings && to_generate > 0) {
      actor_stats st;
      st.name = "kbrl-eval/sampler";
      st.node = "kbrl-eval";
      st.role = "sampler";
      std::printf("kbrl-eval: loading %s (%s sampler)\n", o.model.c_str(),
                  sampler_settings->backend.c_str());
      std::fflush(stdout);
      sampler = sys.spawn<caf::detached>(kbrl::sampler, st, *sampler_settings);
      if (!o.adapter.empty()) {
        policy_update up;
        up.version = 1;
        up.base_model = o.model;
        up.adapter_dir = info.adapter;
        caf::anon_send(sampler, policy_atom::value, up);
      }
      if (auto err = check_sampler(sys, sampler, !o.adapter.empty())) {
        exit_code = fail(describe(err));
        caf::anon_send_exit(sampler, caf::exit_reason::user_shutdown);
      }
    }
    if (exit_code == 0) {
      caf::scoped_actor self{sys};
      auto coll =
        sys.spawn(collector, ctx, evaluators, sampler, caf::actor_cast<caf::actor>(self));
      // Only while candidates are evaluated does a signal wait for the next poll; before (model
      // loading) and after (shutdown) it ends the process as usual - no file is ever half
      // written, so nothing is lost either way.
      std::signal(SIGINT, kbrl_eval_on_signal);
      std::signal(SIGTERM, kbrl_eval_on_signal);
      bool finished = false;
      while (!finished) {
        self->receive([&](done_atom) { finished = true; },
                      caf::after(std::chrono::milliseconds(200)) >> [&] {
                        if (received_signal.load() == 0)
                          return;
                        // Finished problems are on disk (each file written whole). Leave now
                        // rather than wait for evaluations in flight: the workers see their
                        // pipes close and end after their current candidate.
                        fs::remove_all(scratch, ec);
                        std::fprintf(stderr,
                                     "\nkbrl-eval: interrupted; finished problems are in %s - "
                                     "run the same command again to continue\n",
                                     o.output.c_str());
                        std::fflush(nullptr);
                        std::_Exit(130);
                      });
      }
      (void)coll;
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      if (sampler)
        caf::anon_send_exit(sampler, caf::exit_reason::user_shutdown);
    }
    // The handles go before the actor system, which waits for its detached actors to be gone.
    if (evaluators->handle)
      caf::anon_send_exit(evaluators->handle, caf::exit_reason::user_shutdown);
    evaluators->handle = nullptr;
    evaluators->spawn = nullptr;
  }
  fs::remove_all(scratch, ec);
  if (exit_code != 0)
    return exit_code;
  if (!ctx->failure.empty())
    return fail(ctx->failure);

  // Aggregate, write results.json and report.html, log to TensorBoard.
  info.finished = report::utc_now();
  info.wall_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto records = ctx->ledger->records();
  auto metrics = report::compute_metrics(records);
  if (auto ok = report::write_file_atomically((out_dir / "results.json").string(),
                                              report::results_json(info, metrics, records));
      !ok)
    return fail(describe(ok.error()));
  if (auto ok = report::write_file_atomically((out_dir / "report.html").string(),
                                              report::render_html_report(info, metrics, records));
      !ok)
    return fail(describe(ok.error()));
  if (!o.tensorboard.empty()) {
    auto writer = report::tfevents_writer::create(o.tensorboard, "kbrl-eval");
    if (!writer)
      return fail(describe(writer.error()));
    if (auto ok = writer->write_scalars(o.step, report::metric_scalars(metrics)); !ok)
      return fail(describe(ok.error()));
    std::printf("kbrl-eval: metrics logged at step %lld to %s\n", static_cast<long long>(o.step),
                writer->path().c_str());
  }
  print_summary(metrics);
  std::printf("kbrl-eval: wrote %s and %s\n", (out_dir / "results.json").c_str(),
              (out_dir / "report.html").c_str());
  return 0;
}
