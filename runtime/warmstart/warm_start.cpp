#include "runtime/warmstart/warm_start.hpp"

#include "messages/errors.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/episode/problem_set.hpp"
#include "runtime/episode/prompt_config.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/hash.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/tokenizer/bpe_trainer.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/warmstart/solutions.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>

namespace kbrl::warmstart {

namespace fs = std::filesystem;

namespace {

caf::expected<void> write_text(const fs::path& path, const std::string& text) {
  return io::write_file_atomically(path, {text});
}

std::string generation_config_json(int32_t im_end, int32_t endoftext) {
  json_writer w;
  w.begin_object();
  w.key("eos_token_id").begin_array().value(im_end).value(endoftext).end_array();
  w.field("pad_token_id", endoftext);
  w.field("do_sample", true);
  w.field("temperature", 1.0);
  w.field("top_p", 1.0);
  w.end_object();
  return w.str() + "\n";
}

std::string dtype_name(model::st_dtype d) {
  switch (d) {
    case model::st_dtype::bf16: return "bfloat16";
    case model::st_dtype::f16: return "float16";
    case model::st_dtype::f64: return "float64";
    default: return "float32";
  }
}

} // namespace

std::string chatml_tokenizer_config_json() {
  static const std::string chat_template =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  json_writer w;
  w.begin_object();
  w.field("add_bos_token", false);
  w.field("add_prefix_space", false);
  w.key("bos_token").null();
  w.field("eos_token", "<|im_end|>");
  w.field("pad_token", "<|endoftext|>");
  w.key("unk_token").null();
  w.field("model_max_length", int64_t{2048});
  w.field("clean_up_tokenization_spaces", false);
  w.field("split_special_tokens", false);
  w.field("tokenizer_class", "Qwen2Tokenizer");
  w.field("chat_template", chat_template);
  w.end_object();
  return w.str() + "\n";
}

caf::expected<std::vector<problem>> load_problem_folder(const std::string& root,
                                                        kernel_backend backend,
                                                        kernel_precision precision) {
  std::error_code ec;
  std::vector<int32_t> levels;
  static const std::regex level_dir("level([0-9]+)");
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::smatch m;
    auto name = it->path().filename().string();
    if (it->is_directory() && std::regex_match(name, m, level_dir))
      levels.push_back(std::stoi(m[1].str()));
  }
  if (ec)
    return make_error(errc::io_failure, root + ": cannot list the problems folder: " + ec.message());
  if (levels.empty())
    return make_error(errc::invalid_config,
                      root + ": no level<N>/ folder of problems (e.g. level1/1_ReLU.py)");
  std::sort(levels.begin(), levels.end());
  episode::problem_selection sel;
  sel.root = root;
  sel.levels = levels;
  sel.backend = backend;
  sel.precision = precision;
  return episode::load_problem_set(sel);
}

caf::expected<warm_start_result> run_warm_start(
  const warm_start_options& o, const std::function<void(const finetune_progress&)>& progress) {
  // -- inputs -----------------------------------------------------------------------------------
  auto cfg = o.config_path.empty() ? caf::expected<config::run_config>(config::run_config{})
                                   : config::run_config::load(o.config_path);
  if (!cfg)
    return cfg.error();
  auto prompts = episode::prompt_settings_from(*cfg);
  if (!prompts)
    return make_error(errc::invalid_config, o.config_path + ": " + describe(prompts.error()));
  auto problems = load_problem_folder(o.problems_root, o.backend, o.precision);
  if (!problems)
    return problems.error();
  auto solutions = load_solutions(o.solutions_path);
  if (!solutions)
    return solutions.error();
  if (auto ok = check_problems_exist(*solutions, *problems, o.solutions_path, o.problems_root); !ok)
    return ok.error();
  std::map<std::string, const problem*> by_id;
  for (auto& p : *problems)
    by_id[p.id] = &p;

  // -- 1, 2: the tokenizer, trained on the rendered prompts and the completions ------------------
  auto chatml = tok::chat_format::by_name("chatml");
  if (!chatml)
    return chatml.error();
  std::vector<std::string> texts;
  for (auto& s : *solutions) {
    // Without history the budget never drops anything, so no tokenizer is needed to size it.
    auto messages = episode::conversation(*by_id[s.problem], {}, *prompts,
                                          [](const std::string& t) { return t.size(); });
    auto rendered = chatml->render(messages, true);
    if (!rendered)
      return make_error(errc::invalid_config, o.solutions_path + ":" + std::to_string(s.line)
                                                + ": the prompt cannot be rendered: "
                                                + describe(rendered.error()));
    texts.push_back(*rendered);
    texts.push_back(s.completion);
  }
  tok::bpe_trainer_options bpe;
  bpe.vocab_size = o.vocab_size;
  auto vocabulary = tok::train_bpe(texts, bpe);
  if (!vocabulary)
    return vocabulary.error();
  std::error_code ec;
  fs::create_directories(o.output, ec);
  if (ec)
    return make_error(errc::io_failure, o.output.string() + ": cannot create: " + ec.message());
  if (auto ok = write_text(o.output / "tokenizer.json", tok::render_tokenizer_json(*vocabulary)); !ok)
    return ok.error();
  if (auto ok = write_text(o.output / "tokenizer_config.json", chatml_tokenizer_config_json()); !ok)
    return ok.error();
  auto tokenizer = tok::tokenizer::load(o.output);
  if (!tokenizer)
    return tokenizer.error();
  auto chat = tok::chat_format::for_tokenizer(*tokenizer);
  if (!chat)
    return chat.error();
  const int32_t im_end = vocabulary->special_id("<|im_end|>");
  const int32_t endoftext = vocabulary->special_id("<|endoftext|>");

  // -- the examples as the episodes' token ids ---------------------------------------------------
  warm_start_result r;
  r.problems = problems->size();
  r.examples = solutions->size();
  r.vocab_size = tokenizer->vocab_size();
  std::vector<supervised_example> examples;
  for (auto& s : *solutions) {
    supervised_example e;
    auto ids = episode::prompt_tokens(*by_id[s.problem], {}, *prompts, *tokenizer, *chat);
    if (!ids)
      return ids.error();
    e.prompt_tokens = std::move(*ids);
    e.completion_tokens = tokenizer->encode_ordinary(s.completion);
    e.completion_tokens.push_back(im_end); // the turn ends: the sampler stops here
    r.longest_prompt = std::max(r.longest_prompt, e.prompt_tokens.size());
    r.longest_completion = std::max(r.longest_completion, e.completion_tokens.size());
    r.mean_prompt += static_cast<double>(e.prompt_tokens.size()) / solutions->size();
    r.mean_completion += static_cast<double>(e.completion_tokens.size()) / solutions->size();
    examples.push_back(std::move(e));
  }
  if (static_cast<int64_t>(r.longest_prompt + r.longest_completion)
      > o.shape.max_position_embeddings)
    return make_error(errc::invalid_argument,
                      "the longest example has " + std::to_string(r.longest_prompt) + " + "
                        + std::to_string(r.longest_completion)
                        + " tokens, more than max_position_embeddings "
                        + std::to_string(o.shape.max_position_embeddings));

  // -- 3: config and random weights --------------------------------------------------------------
  model::model_config c;
  c.model_type = "qwen2";
  c.vocab_size = r.vocab_size;
  c.hidden_size = o.shape.hidden_size;
  c.intermediate_size = o.shape.intermediate_size;
  c.num_hidden_layers = o.shape.num_hidden_layers;
  c.num_attention_heads = o.shape.num_attention_heads;
  c.num_key_value_heads = o.shape.num_key_value_heads;
  c.head_dim = o.shape.hidden_size / o.shape.num_attention_heads;
  c.max_position_embeddings = o.shape.max_position_embeddings;
  c.rope_theta = o.shape.rope_theta;
  c.tie_word_embeddings = true;
  c.torch_dtype = dtype_name(o.dtype);
  c.eos_token_ids = {im_end};
  const auto init_dir = o.output / ".random-init";
  fs::remove_all(init_dir, ec);
  if (auto ok = model::write_random_checkpoint(init_dir, c, o.training.seed); !ok)
    return ok.error();

  // -- 4: training --------------------------------------------------------------------------------
  auto trainer = full_finetune::create(init_dir, o.training);
  if (!trainer)
    return trainer.error();
  r.parameters = (*trainer)->parameter_count();
  auto before = (*trainer)->loss(examples);
  if (!before)
    return before.error();
  r.initial_loss = *before;
  const auto start = std::chrono::steady_clock::now();
  if (auto ok = (*trainer)->train(examples, progress); !ok)
    return ok.error();
  r.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto after = (*trainer)->loss(examples);
  if (!after)
    return after.error();
  r.final_loss = *after;

  // -- 5: output ----------------------------------------------------------------------------------
  if (auto ok = (*trainer)->save(o.output / "model.safetensors", o.dtype); !ok)
    return ok.error();
  trainer->reset();
  fs::remove_all(init_dir, ec);
  if (auto ok = write_text(o.output / "generation_config.json",
                           generation_config_json(im_end, endoftext));
      !ok)
    return ok.error();
  if (auto ok = write_text(o.output / "config.json", model::render_model_config(c) + "\n"); !ok)
    return ok.error();

  json_writer w;
  w.begin_object();
  w.field("command", o.command_line);
  w.field("seed", o.training.seed);
  w.key("inputs").begin_object();
  w.field("problems_root", o.problems_root);
  std::string all_problems;
  for (auto& p : *problems)
    all_problems += p.id + "\n" + p.reference_source + "\n";
  w.field("problems_sha256", io::sha256_hex(all_problems));
  w.field("problems", static_cast<uint64_t>(problems->size()));
  w.field("solutions", o.solutions_path);
  auto solutions_hash = io::sha256_file(o.solutions_path);
  w.field("solutions_sha256", solutions_hash ? *solutions_hash : std::string());
  w.field("examples", static_cast<uint64_t>(solutions->size()));
  w.field("config", o.config_path);
  auto config_hash = o.config_path.empty() ? caf::expected<std::string>(std::string())
                                           : io::sha256_file(o.config_path);
  w.field("config_sha256", config_hash ? *config_hash : std::string());
  w.field("backend", to_string(o.backend));
  w.field("precision", to_string(o.precision));
  w.end_object();
  w.key("tokenizer").begin_object();
  w.field("vocab_size", r.vocab_size);
  w.field("merges", static_cast<uint64_t>(vocabulary->merges.size()));
  w.field("longest_prompt_tokens", static_cast<uint64_t>(r.longest_prompt));
  w.field("longest_completion_tokens", static_cast<uint64_t>(r.longest_completion));
  w.end_object();
  w.key("training").begin_object();
  w.field("parameters", r.parameters);
  w.field("epochs", o.training.epochs);
  w.field("batch_sequences", o.training.batch_sequences);
  w.field("lr", o.training.lr);
  w.field("min_lr_ratio", o.training.min_lr_ratio);
  w.field("warmup_steps", o.training.warmup_steps);
  w.field("weight_decay", o.training.weight_decay);
  w.field("clip_norm", o.training.clip_norm);
  w.field("initial_loss", r.initial_loss);
  w.field("final_loss", r.final_loss);
  w.field("weights_dtype", dtype_name(o.dtype));
  w.end_object();
  w.end_object();
  // No timings here: the file is part of what a re-run reproduces byte for byte.
  if (auto ok = write_text(o.output / "warmstart.json", w.str() + "\n"); !ok)
    return ok.error();
  return r;
}

} // namespace kbrl::warmstart
