// kbrl-model: check a checkpoint before a run.
//
//   kbrl-model inspect PATH|ID                      architecture, parameters, dtypes, tokenizer
//   kbrl-model tokenize PATH|ID "text" [--json]     token ids, one per line
//   kbrl-model generate PATH|ID --prompt "..." [--adapter DIR] [--greedy] [--raw]
//
// PATH is a model directory in Hugging Face layout; ID a hub id (Org/Name[@revision]),
// downloaded into the Hugging Face cache (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE apply).

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/hub/resolve_model.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_files.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/chat_format.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <map>

using namespace kbrl;

namespace {

int fail(const std::string& what, const caf::error& err) {
  std::fprintf(stderr, "kbrl-model: %s: %s\n", what.c_str(), describe(err).c_str());
  return 1;
}

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

int inspect(const std::filesystem::path& dir) {
  auto files = model::find_model_files(dir);
  if (!files)
    return fail(dir.string(), files.error());
  auto config = model::load_model_config(files->config);
  if (!config)
    return fail(files->config.string(), config.error());
  auto ckpt = model::safetensors_checkpoint::open_dir(dir);
  if (!ckpt)
    return fail(dir.string(), ckpt.error());
  uint64_t params = 0;
  std::map<std::string, uint64_t> by_dtype;
  for (auto& name : ckpt->names()) {
    auto* e = ckpt->find(name);
    params += e->numel();
    by_dtype[model::to_string(e->dtype)] += e->numel();
  }
  auto& c = *config;
  std::printf("model        %s\n", dir.c_str());
  std::printf("architecture %s: %ld layers, hidden %ld, intermediate %ld, heads %ld (kv %ld, "
              "head_dim %ld), vocab %ld\n",
              c.model_type.c_str(), (long)c.num_hidden_layers, (long)c.hidden_size,
              (long)c.intermediate_size, (long)c.num_attention_heads,
              (long)c.num_key_value_heads, (long)c.head_dim, (long)c.vocab_size);
  std::printf("rope         theta %g%s, max positions %ld\n", c.rope_theta,
              c.rope_scaling ? ", llama3 scaling" : "", (long)c.max_position_embeddings);
  std::printf("embeddings   %s\n", c.tie_word_embeddings ? "tied" : "untied");
  std::printf("parameters   %s in %zu tensors, %zu file(s)\n", human_count(params).c_str(),
              ckpt->names().size(), ckpt->files().size());
  for (auto& [dtype, n] : by_dtype)
    std::printf("  %-6s     %s\n", dtype.c_str(), human_count(n).c_str());
  // Everything is printed; the exit status says whether the folder can be used (1: it cannot).
  bool problems = false;
  if (auto ok = model::check_weights(c, *ckpt); !ok) {
    std::printf("weights      PROBLEMS:\n%s\n", describe(ok.error()).c_str());
    problems = true;
  } else {
    std::printf("weights      every tensor the config needs is there with its shape\n");
  }
  auto verdict = [&] {
    if (problems)
      std::fprintf(stderr, "kbrl-model inspect: %s cannot be used as it is (problems above)\n",
                   dir.c_str());
    return problems ? 1 : 0;
  };
  if (!files->tokenizer) {
    std::printf("tokenizer    none (tokenizer.json missing)\n");
    return verdict();
  }
  auto tok = tok::tokenizer::load(dir);
  if (!tok)
    return fail("tokenizer", tok.error());
  std::printf("tokenizer    %d tokens (%zu added), eos %s, bos %s\n", tok->vocab_size(),
              tok->added_tokens().size(), tok->eos_token().value_or("-").c_str(),
              tok->bos_token().value_or("-").c_str());
  if (tok->vocab_size() > c.vocab_size) {
    std::printf("             PROBLEM: the tokenizer has %d ids, the model's vocabulary only %ld: "
                "they do not belong together (prompts with the higher ids cannot be read)\n",
                tok->vocab_size(), (long)c.vocab_size);
    problems = true;
  }
  auto chat = tok::chat_format::for_tokenizer(*tok);
  std::printf("chat format  %s\n", chat ? chat->name().c_str() : describe(chat.error()).c_str());
  return verdict();
}

int tokenize(const std::filesystem::path& dir, const std::string& text, bool json) {
  auto tok = tok::tokenizer::load(dir);
  if (!tok)
    return fail("tokenizer", tok.error());
  auto ids = tok->encode(text);
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i)
      std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
  } else {
    for (auto id : ids)
      std::printf("%d\n", id);
  }
  return 0;
}

struct generate_args {
  std::string prompt, adapter, device = "cpu", dtype = "fp32", system;
  bool greedy = false, raw = false;
  int max_new = 256;
  double temperature = 0.7, top_p = 0.95;
  int top_k = 0;
  uint64_t seed = 0;
};

int generate(const std::filesystem::path& dir, const generate_args& a) {
  auto tok = tok::tokenizer::load(dir);
  if (!tok)
    return fail("tokenizer", tok.error());
  model::transformer_options opts;
  opts.device = at::Device(a.device);
  opts.dtype = a.dtype == "bf16" ? at::kBFloat16 : a.dtype == "fp16" ? at::kHalf : at::kFloat;
  auto t0 = std::chrono::steady_clock::now();
  auto model = model::transformer::load(dir, opts);
  if (!model)
    return fail(dir.string(), model.error());
  std::unique_ptr<model::lora_adapter> adapter;
  if (!a.adapter.empty()) {
    auto loaded = model::load_lora_adapter(
      a.adapter, model->config(), at::TensorOptions().device(opts.device).dtype(opts.dtype));
    if (!loaded)
      return fail(a.adapter, loaded.error());
    adapter = std::make_unique<model::lora_adapter>(std::move(*loaded));
  }
  auto load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string text = a.prompt;
  if (!a.raw) {
    auto chat = tok::chat_format::for_tokenizer(*tok);
    if (!chat)
      return fail("chat format (use --raw to send the prompt as it is)", chat.error());
    std::vector<tok::chat_message> msgs;
    if (!a.system.empty())
      msgs.push_back({"system", a.system, std::nullopt});
    msgs.push_back({"user", a.prompt, std::nullopt});
    auto rendered = chat->render(msgs, true);
    if (!rendered)
      return fail("chat format", rendered.error());
    text = *rendered;
  }
  generation_request req;
  req.id = 1;
  req.prompt_tokens = tok->encode(text, false);
  req.params.max_new_tokens = a.max_new;
  req.params.temperature = a.greedy ? 0 : a.temperature;
  req.params.top_p = a.top_p;
  req.params.top_k = a.top_k;
  req.params.seed = a.seed;
  model::generation_engine_options eo;
  eo.slots = 1;
  eo.max_sequence_length = static_cast<int64_t>(req.prompt_tokens.size()) + a.max_new + 1;
  auto engine = model::generation_engine::create(*model, *tok, eo);
  if (!engine)
    return fail("generation engine", engine.error());
  if (adapter)
    if (auto ok = engine->set_adapter(adapter.get(), 1); !ok)
      return fail(a.adapter, ok.error());
  auto t1 = std::chrono::steady_clock::now();
  auto res = engine->generate({req}).front();
  auto gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  if (res.finish == finish_reason::error) {
    std::fprintf(stderr, "kbrl-model: generation failed: %s\n", res.error.c_str());
    return 1;
  }
  std::printf("%s\n", res.completion_text.c_str());
  std::fflush(stdout); // the completion before the statistics on stderr
  std::fprintf(stderr,
               "[%zu prompt tokens, %zu new tokens (%s) in %.2f s = %.1f tokens/s; model loaded "
               "in %.1f s]\n",
               req.prompt_tokens.size(), res.completion_tokens.size(), to_string(res.finish),
               gen_s, res.completion_tokens.size() / std::max(gen_s, 1e-9), load_s);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-model: inspect, tokenize with and generate from a model checkpoint"};
  app.require_subcommand(1);
  std::string model_ref;
  auto* ins = app.add_subcommand("inspect", "Architecture, parameters, dtypes, tokenizer, chat format");
  ins->add_option("model", model_ref, "Model directory or Hugging Face id")->required();
  auto* tkz = app.add_subcommand("tokenize", "Token ids of a text, one per line");
  std::string text;
  bool json = false;
  tkz->add_option("model", model_ref, "Model directory or Hugging Face id")->required();
  tkz->add_option("text", text, "Text to encode")->required();
  tkz->add_flag("--json", json, "One JSON array instead of one id per line");
  auto* gen = app.add_subcommand("generate", "Generate a completion (chat-formatted unless --raw)");
  generate_args g;
  gen->add_option("model", model_ref, "Model directory or Hugging Face id")->required();
  gen->add_option("--prompt", g.prompt, "The user message (or the raw prompt with --raw)")->required();
  gen->add_option("--system", g.system, "A system message");
  gen->add_option("--adapter", g.adapter, "PEFT LoRA adapter directory");
  gen->add_flag("--greedy", g.greedy, "Always take the most likely token");
  gen->add_flag("--raw", g.raw, "Send the prompt without the chat format");
  gen->add_option("--max-new-tokens", g.max_new, "Tokens to generate at most")->capture_default_str();
  gen->add_option("--temperature", g.temperature)->capture_default_str();
  gen->add_option("--top-p", g.top_p)->capture_default_str();
  gen->add_option("--top-k", g.top_k, "0: off")->capture_default_str();
  gen->add_option("--seed", g.seed)->capture_default_str();
  gen->add_option("--device", g.device, "cpu, cuda, cuda:1, ...")->capture_default_str();
  gen->add_option("--dtype", g.dtype)->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
    ->capture_default_str();
  kbrl::config::add_version_flag(app, "kbrl-model");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  auto dir = hub::resolve_model(model_ref, hub::hub_options_from_environment());
  if (!dir)
    return fail(model_ref, dir.error());
  try {
    if (*ins)
      return inspect(*dir);
    if (*tkz)
      return tokenize(*dir, text, json);
    return generate(*dir, g);
  } catch (const c10::Error& e) { // from libtorch: no such device, out of memory, ...
    std::fprintf(stderr, "kbrl-model: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kbrl-model: %s\n", e.what());
    return 1;
  }
}
