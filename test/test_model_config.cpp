// Tests of model directories: config.json of published models (Qwen2.5-Coder, Qwen3, Llama 3.2)
// read to the right fields, refusals named with the supported alternatives, generation_config,
// the weight names a config implies, random checkpoints, and checking a checkpoint against its
// config.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_files.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace kbrl::model;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const fs::path data_dir = fs::path(KBRL_TEST_DATA) / "model";

model_config load(const std::string& model) {
  auto c = load_model_config(data_dir / model / "config.json");
  BOOST_REQUIRE_MESSAGE(c, why(c));
  return *c;
}

generation_config load_generation(const std::string& model) {
  auto g = load_generation_config(data_dir / model / "generation_config.json");
  BOOST_REQUIRE_MESSAGE(g, why(g));
  return *g;
}

/// The error text of a config.json that must be refused.
std::string refusal(const std::string& json) {
  auto c = parse_model_config(json, "dir/config.json");
  BOOST_REQUIRE_MESSAGE(!c, "accepted: " + json);
  BOOST_CHECK_EQUAL(c.error().code(), static_cast<uint8_t>(kbrl::errc::invalid_config));
  return kbrl::describe(c.error());
}

/// A minimal valid llama config.json with the `extra` keys added (callers never repeat a key
/// of the minimal set).
std::string llama_with(const std::string& extra) {
  return "{" + extra + (extra.empty() ? "" : ",")
         + R"("model_type":"llama","vocab_size":100,"hidden_size":64,"intermediate_size":128,)"
           R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256})";
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

BOOST_AUTO_TEST_SUITE(model_config)

BOOST_AUTO_TEST_CASE(qwen2_5_coder_1_5b_instruct) {
  const auto c = load("qwen2.5-coder-1.5b-instruct");
  BOOST_CHECK_EQUAL(c.model_type, "qwen2");
  BOOST_CHECK_EQUAL(c.vocab_size, 151936);
  BOOST_CHECK_EQUAL(c.hidden_size, 1536);
  BOOST_CHECK_EQUAL(c.intermediate_size, 8960);
  BOOST_CHECK_EQUAL(c.num_hidden_layers, 28);
  BOOST_CHECK_EQUAL(c.num_attention_heads, 12);
  BOOST_CHECK_EQUAL(c.num_key_value_heads, 2);
  BOOST_CHECK_EQUAL(c.head_dim, 128); // not in the file: 1536 / 12
  BOOST_CHECK_EQUAL(c.rms_norm_eps, 1e-6);
  BOOST_CHECK_EQUAL(c.rope_theta, 1e6);
  BOOST_CHECK_EQUAL(c.max_position_embeddings, 32768);
  BOOST_CHECK(c.tie_word_embeddings);
  BOOST_CHECK_EQUAL(c.torch_dtype, "bfloat16");
  BOOST_CHECK(!c.rope_scaling);
  BOOST_CHECK(c.bos_token_id == int64_t{151643});
  BOOST_CHECK(c.eos_token_ids == std::vector<int64_t>{151645});
  BOOST_CHECK(c.qkv_bias());
  BOOST_CHECK(!c.o_proj_bias());
  BOOST_CHECK(!c.qk_norm());

  const auto g = load_generation("qwen2.5-coder-1.5b-instruct");
  BOOST_CHECK(g.eos_token_ids == (std::vector<int64_t>{151645, 151643}));
  BOOST_CHECK(g.pad_token_id == int64_t{151643});
  BOOST_CHECK(g.temperature == 0.7);
  BOOST_CHECK(g.top_p == 0.8);
  BOOST_CHECK(g.top_k == int64_t{20});
  BOOST_CHECK(g.repetition_penalty == 1.1);
  BOOST_CHECK(g.do_sample == true);
  BOOST_CHECK(!g.max_new_tokens);
}

BOOST_AUTO_TEST_CASE(qwen3_0_6b) {
  const auto c = load("qwen3-0.6b");
  BOOST_CHECK_EQUAL(c.model_type, "qwen3");
  BOOST_CHECK_EQUAL(c.hidden_size, 1024);
  BOOST_CHECK_EQUAL(c.num_attention_heads, 16);
  BOOST_CHECK_EQUAL(c.num_key_value_heads, 8);
  BOOST_CHECK_EQUAL(c.head_dim, 128); // explicit, and not hidden / heads (64)
  BOOST_CHECK_EQUAL(c.intermediate_size, 3072);
  BOOST_CHECK_EQUAL(c.num_hidden_layers, 28);
  BOOST_CHECK_EQUAL(c.rope_theta, 1e6); // written as an integer
  BOOST_CHECK_EQUAL(c.max_position_embeddings, 40960);
  BOOST_CHECK(!c.attention_bias);
  BOOST_CHECK(c.qk_norm());
  BOOST_CHECK(!c.qkv_bias());
  BOOST_CHECK(!c.o_proj_bias());
  const auto g = load_generation("qwen3-0.6b");
  BOOST_CHECK(g.temperature == 0.6);
  BOOST_CHECK(g.top_p == 0.95);
  BOOST_CHECK(g.top_k == int64_t{20});
}

BOOST_AUTO_TEST_CASE(llama_3_2_1b_and_its_instruct_variant) {
  const auto c = load("llama-3.2-1b");
  BOOST_CHECK_EQUAL(c.model_type, "llama");
  BOOST_CHECK_EQUAL(c.vocab_size, 128256);
  BOOST_CHECK_EQUAL(c.hidden_size, 2048);
  BOOST_CHECK_EQUAL(c.intermediate_size, 8192);
  BOOST_CHECK_EQUAL(c.num_hidden_layers, 16);
  BOOST_CHECK_EQUAL(c.num_attention_heads, 32);
  BOOST_CHECK_EQUAL(c.num_key_value_heads, 8);
  BOOST_CHECK_EQUAL(c.head_dim, 64);
  BOOST_CHECK_EQUAL(c.rms_norm_eps, 1e-5);
  BOOST_CHECK_EQUAL(c.rope_theta, 500000.0);
  BOOST_CHECK_EQUAL(c.max_position_embeddings, 131072);
  BOOST_CHECK(c.tie_word_embeddings);
  BOOST_CHECK(!c.mlp_bias && !c.attention_bias && !c.qkv_bias() && !c.qk_norm());
  BOOST_REQUIRE(c.rope_scaling);
  BOOST_CHECK_EQUAL(c.rope_scaling->factor, 32.0);
  BOOST_CHECK_EQUAL(c.rope_scaling->low_freq_factor, 1.0);
  BOOST_CHECK_EQUAL(c.rope_scaling->high_freq_factor, 4.0);
  BOOST_CHECK_EQUAL(c.rope_scaling->original_max_position_embeddings, 8192);
  BOOST_CHECK(c.bos_token_id == int64_t{128000});
  BOOST_CHECK(c.eos_token_ids == std::vector<int64_t>{128001});
  BOOST_CHECK(load_generation("llama-3.2-1b").eos_token_ids == std::vector<int64_t>{128001});

  const auto instruct = load("llama-3.2-1b-instruct");
  BOOST_CHECK(instruct.eos_token_ids == (std::vector<int64_t>{128001, 128008, 128009}));
  BOOST_CHECK(load_generation("llama-3.2-1b-instruct").eos_token_ids
              == (std::vector<int64_t>{128001, 128008, 128009}));
}

BOOST_AUTO_TEST_CASE(defaults_and_the_old_rope_scaling_key) {
  auto c = parse_model_config(llama_with(R"("rope_scaling":{"type":"llama3","factor":8,)"
                                         R"("low_freq_factor":1,"high_freq_factor":4,)"
                                         R"("original_max_position_embeddings":8192})"),
                              "config.json");
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_CHECK_EQUAL(c->num_key_value_heads, 4); // = heads
  BOOST_CHECK_EQUAL(c->head_dim, 16);           // = hidden / heads
  BOOST_CHECK_EQUAL(c->rms_norm_eps, 1e-6);
  BOOST_CHECK_EQUAL(c->rope_theta, 10000.0);
  BOOST_CHECK(!c->tie_word_embeddings);
  BOOST_CHECK(c->eos_token_ids.empty());
  BOOST_CHECK(!c->bos_token_id);
  BOOST_REQUIRE(c->rope_scaling);
  BOOST_CHECK_EQUAL(c->rope_scaling->factor, 8.0);
  auto plain = parse_model_config(llama_with(R"("rope_scaling":{"rope_type":"default"},)"
                                             R"("dtype":"float16","eos_token_id":null)"),
                                  "config.json");
  BOOST_REQUIRE_MESSAGE(plain, why(plain));
  BOOST_CHECK(!plain->rope_scaling);
  BOOST_CHECK_EQUAL(plain->torch_dtype, "float16");
  // Newer files put rope_theta and the scaling together under rope_parameters.
  auto parameters = parse_model_config(
    llama_with(R"("rope_parameters":{"rope_theta":500000.0,"rope_type":"llama3","factor":32,)"
               R"("low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192})"),
    "config.json");
  BOOST_REQUIRE_MESSAGE(parameters, why(parameters));
  BOOST_CHECK_EQUAL(parameters->rope_theta, 500000.0);
  BOOST_REQUIRE(parameters->rope_scaling);
  BOOST_CHECK_EQUAL(parameters->rope_scaling->factor, 32.0);
  auto yarn = parse_model_config(
    llama_with(R"("rope_parameters":{"rope_theta":10000,"rope_type":"yarn","factor":4})"), "c.json");
  BOOST_REQUIRE(!yarn);
  BOOST_CHECK(contains(kbrl::describe(yarn.error()), "rope_parameters.rope_type: RoPE scaling 'yarn'"));
}

BOOST_AUTO_TEST_CASE(unsupported_architectures_and_rope_scalings_are_refused_by_name) {
  auto text = refusal(R"({"model_type":"mistral","vocab_size":10})");
  BOOST_CHECK_MESSAGE(contains(text, "dir/config.json: model_type: model type 'mistral' is not "
                                     "supported (kbrl runs qwen2, qwen3, llama)"),
                      text);
  for (const std::string type : {"yarn", "dynamic", "linear"}) {
    text = refusal(llama_with(R"("rope_scaling":{"rope_type":")" + type + R"(","factor":4})"));
    BOOST_CHECK_MESSAGE(contains(text, "rope_scaling.rope_type: RoPE scaling '" + type
                                         + "' is not supported (kbrl runs default, llama3)"),
                        text);
  }
  text = refusal(llama_with(R"("rope_scaling":{"type":"yarn","factor":4})"));
  BOOST_CHECK(contains(text, "rope_scaling.type: RoPE scaling 'yarn'"));
  text = refusal(llama_with(R"("hidden_act":"gelu")"));
  BOOST_CHECK(contains(text, "hidden_act: activation 'gelu' is not supported"));
  text = refusal(llama_with(R"("use_sliding_window":true)"));
  BOOST_CHECK(contains(text, "use_sliding_window: sliding-window attention is not supported"));
  text = refusal(R"({"vocab_size":10})");
  BOOST_CHECK(contains(text, "model_type: required key is missing"));
}

BOOST_AUTO_TEST_CASE(every_problem_is_listed_with_its_key) {
  const auto text = refusal(
    R"({"model_type":"qwen2","vocab_size":"many","hidden_size":-64,"num_hidden_layers":2.5,)"
    R"("num_attention_heads":6,"num_key_value_heads":4,"max_position_embeddings":128,)"
    R"("intermediate_size":128,"rms_norm_eps":0,"tie_word_embeddings":"yes",)"
    R"("eos_token_id":[1,"two"],"rope_scaling":{"rope_type":"llama3","factor":8}})");
  for (const std::string expected :
       {"dir/config.json: vocab_size: expected an integer, got \"many\"",
        "hidden_size: expected an integer > 0, got -64",
        "num_hidden_layers: expected an integer, got 2.5",
        "num_key_value_heads: expected a divisor of num_attention_heads (6), got 4",
        "rms_norm_eps: expected a number > 0, got 0",
        "tie_word_embeddings: expected true or false, got \"yes\"",
        "eos_token_id: expected a token id (integer >= 0) or a list of them",
        "rope_scaling.low_freq_factor: required key is missing",
        "rope_scaling.original_max_position_embeddings: required key is missing"})
    BOOST_CHECK_MESSAGE(contains(text, expected), "missing '" + expected + "' in:\n" + text);

  auto odd = refusal(llama_with(R"("head_dim":15)"));
  BOOST_CHECK(contains(odd, "head_dim: expected an even number"));
  auto indivisible = refusal(R"({"model_type":"llama","vocab_size":100,"hidden_size":65,)"
                             R"("intermediate_size":128,"num_hidden_layers":2,)"
                             R"("num_attention_heads":4,"max_position_embeddings":256})");
  BOOST_CHECK(contains(indivisible, "head_dim: missing, and hidden_size (65) is not a multiple"));
  BOOST_CHECK(contains(refusal("[1]"), "dir/config.json: expected a JSON object"));
  BOOST_CHECK(contains(refusal("{"), "dir/config.json: not valid JSON"));
  auto none = load_model_config(data_dir / "absent" / "config.json");
  BOOST_REQUIRE(!none);
  BOOST_CHECK_EQUAL(none.error().code(), static_cast<uint8_t>(kbrl::errc::io_failure));
}

BOOST_AUTO_TEST_CASE(generation_config_values_are_checked) {
  auto g = parse_generation_config(R"({"temperature":-1,"top_p":1.5,"top_k":-3,"eos_token_id":"x"})",
                                   "gen.json");
  BOOST_REQUIRE(!g);
  const auto text = kbrl::describe(g.error());
  BOOST_CHECK(contains(text, "gen.json: temperature: expected a number >= 0, got -1"));
  BOOST_CHECK(contains(text, "top_p: expected a number in (0, 1], got 1.5"));
  BOOST_CHECK(contains(text, "top_k: expected an integer >= 0, got -3"));
  BOOST_CHECK(contains(text, "eos_token_id: expected a token id"));
  auto empty = parse_generation_config("{}", "gen.json");
  BOOST_REQUIRE(empty);
  BOOST_CHECK(!empty->temperature && !empty->top_p && !empty->top_k && empty->eos_token_ids.empty());
}

BOOST_AUTO_TEST_CASE(render_and_parse_round_trip) {
  for (const std::string type : {"qwen2", "qwen3", "llama"}) {
    auto c = tiny_model_config(type);
    c.attention_bias = type == "qwen3";
    c.mlp_bias = type == "llama";
    auto back = parse_model_config(render_model_config(c), "rendered");
    BOOST_REQUIRE_MESSAGE(back, why(back));
    BOOST_CHECK_MESSAGE(*back == c, type << " changed in the round trip:\n"
                                         << render_model_config(c) << "\n"
                                         << render_model_config(*back));
  }
  const auto real = load("llama-3.2-1b-instruct");
  auto back = parse_model_config(render_model_config(real), "rendered");
  BOOST_REQUIRE(back);
  BOOST_CHECK(*back == real);
}

BOOST_AUTO_TEST_CASE(expected_weight_names_and_shapes) {
  auto find = [](const std::vector<weight_spec>& specs, const std::string& name) {
    for (const auto& s : specs)
      if (s.name == name)
        return s.shape;
    return std::vector<int64_t>{-1};
  };
  using shape = std::vector<int64_t>;
  // Qwen2.5-Coder-1.5B: 12 tensors per layer (3 biases), embedding and final norm, tied head.
  const auto qwen2 = expected_weights(load("qwen2.5-coder-1.5b-instruct"));
  BOOST_CHECK_EQUAL(qwen2.size(), 28u * 12 + 2);
  BOOST_CHECK(find(qwen2, "model.embed_tokens.weight") == (shape{151936, 1536}));
  BOOST_CHECK(find(qwen2, "model.layers.27.self_attn.q_proj.weight") == (shape{1536, 1536}));
  BOOST_CHECK(find(qwen2, "model.layers.0.self_attn.k_proj.weight") == (shape{256, 1536}));
  BOOST_CHECK(find(qwen2, "model.layers.0.self_attn.v_proj.bias") == (shape{256}));
  BOOST_CHECK(find(qwen2, "model.layers.0.self_attn.o_proj.bias") == (shape{-1}));
  BOOST_CHECK(find(qwen2, "model.layers.0.mlp.down_proj.weight") == (shape{1536, 8960}));
  BOOST_CHECK(find(qwen2, "lm_head.weight") == (shape{-1}));
  BOOST_CHECK_EQUAL(qwen2.front().name, "model.embed_tokens.weight");
  BOOST_CHECK_EQUAL(qwen2.back().name, "model.norm.weight");

  // Qwen3-0.6B: q is wider than the residual stream (16 x 128 > 1024); q/k norms per head.
  const auto qwen3 = expected_weights(load("qwen3-0.6b"));
  BOOST_CHECK_EQUAL(qwen3.size(), 28u * 11 + 2);
  BOOST_CHECK(find(qwen3, "model.layers.3.self_attn.q_proj.weight") == (shape{2048, 1024}));
  BOOST_CHECK(find(qwen3, "model.layers.3.self_attn.o_proj.weight") == (shape{1024, 2048}));
  BOOST_CHECK(find(qwen3, "model.layers.3.self_attn.q_norm.weight") == (shape{128}));
  BOOST_CHECK(find(qwen3, "model.layers.3.self_attn.k_norm.weight") == (shape{128}));
  BOOST_CHECK(find(qwen3, "model.layers.3.self_attn.q_proj.bias") == (shape{-1}));

  // An untied llama has lm_head; mlp_bias adds three biases per layer.
  auto llama = tiny_model_config("llama");
  llama.tie_word_embeddings = false;
  llama.mlp_bias = true;
  llama.attention_bias = true;
  const auto specs = expected_weights(llama);
  BOOST_CHECK_EQUAL(specs.size(), 2u * (9 + 7) + 3);
  BOOST_CHECK(find(specs, "lm_head.weight") == (shape{256, 64}));
  BOOST_CHECK(find(specs, "model.layers.1.mlp.up_proj.bias") == (shape{128}));
  BOOST_CHECK(find(specs, "model.layers.1.self_attn.o_proj.bias") == (shape{64}));
}

BOOST_AUTO_TEST_CASE(random_checkpoints_load_and_match_their_config) {
  temp_dir dir;
  for (const std::string type : {"qwen2", "qwen3", "llama"}) {
    for (auto dtype : {st_dtype::f32, st_dtype::bf16, st_dtype::f16}) {
      const auto model_dir = dir.path / (type + "-" + to_string(dtype));
      const auto config = tiny_model_config(type);
      auto written = write_random_checkpoint(model_dir, config, /*seed=*/42, dtype);
      BOOST_REQUIRE_MESSAGE(written, why(written));

      auto files = find_model_files(model_dir);
      BOOST_REQUIRE_MESSAGE(files, why(files));
      BOOST_CHECK(files->generation_config.has_value());
      BOOST_CHECK(!files->tokenizer.has_value());
      BOOST_CHECK(files->weight_files == std::vector<fs::path>{model_dir / "model.safetensors"});
      auto loaded = load_model_config(files->config);
      BOOST_REQUIRE_MESSAGE(loaded, why(loaded));
      BOOST_CHECK(*loaded == config);
      auto gen = load_generation_config(*files->generation_config);
      BOOST_REQUIRE(gen);
      BOOST_CHECK(gen->eos_token_ids == config.eos_token_ids);

      auto ckpt = safetensors_checkpoint::open_dir(model_dir);
      BOOST_REQUIRE_MESSAGE(ckpt, why(ckpt));
      auto fits = check_weights(config, *ckpt);
      BOOST_CHECK_MESSAGE(fits, why(fits));
      BOOST_CHECK_EQUAL(ckpt->names().size(), expected_weights(config).size());
      BOOST_CHECK(ckpt->find("model.norm.weight")->dtype == dtype);
      BOOST_CHECK_EQUAL(ckpt->files().front().metadata().at("format"), "pt");
      // Norms near 1, matrices near 0 with std 0.02 (8192 draws: within 10%).
      auto norm = ckpt->tensor("model.norm.weight")->to(at::kFloat);
      BOOST_CHECK_CLOSE(norm.mean().item<double>(), 1.0, /*percent=*/10);
      auto gate = ckpt->tensor("model.layers.0.mlp.gate_proj.weight")->to(at::kFloat);
      BOOST_CHECK_CLOSE(gate.std().item<double>(), 0.02, /*percent=*/10);
      BOOST_CHECK_SMALL(gate.mean().item<double>(), 0.002);
    }
  }
}

BOOST_AUTO_TEST_CASE(random_checkpoints_are_deterministic_in_the_seed) {
  temp_dir dir;
  const auto config = tiny_model_config("qwen3");
  BOOST_REQUIRE(write_random_checkpoint(dir.path / "a", config, /*seed=*/5));
  BOOST_REQUIRE(write_random_checkpoint(dir.path / "b", config, /*seed=*/5));
  BOOST_REQUIRE(write_random_checkpoint(dir.path / "c", config, /*seed=*/6));
  const auto a = read_bytes(dir.path / "a" / "model.safetensors");
  BOOST_CHECK(a == read_bytes(dir.path / "b" / "model.safetensors"));
  BOOST_CHECK(a != read_bytes(dir.path / "c" / "model.safetensors"));
  auto refused = write_random_checkpoint(dir.path / "d", config, 1, st_dtype::i32);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK(contains(kbrl::describe(refused.error()), "I32"));
}

BOOST_AUTO_TEST_CASE(check_weights_names_each_problem) {
  temp_dir dir;
  const auto config = tiny_model_config("qwen2");
  // A checkpoint with one tensor missing, one of the wrong shape, one of an integer dtype.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& spec : expected_weights(config)) {
    if (spec.name == "model.layers.1.self_attn.k_proj.bias")
      continue;
    auto t = at::zeros(spec.shape);
    if (spec.name == "model.layers.0.mlp.up_proj.weight")
      t = at::zeros({64, 128});
    if (spec.name == "model.norm.weight")
      t = at::zeros(spec.shape, at::kInt);
    tensors.emplace_back(spec.name, t);
  }
  const auto path = dir.path / "model.safetensors";
  BOOST_REQUIRE(write_safetensors(path, tensors));
  auto ckpt = safetensors_checkpoint::open_file(path);
  BOOST_REQUIRE(ckpt);
  auto fits = check_weights(config, *ckpt);
  BOOST_REQUIRE(!fits);
  const auto text = kbrl::describe(fits.error());
  BOOST_CHECK_MESSAGE(contains(text, path.string() + " does not match its config (qwen2, 2 layers"),
                      text);
  BOOST_CHECK(contains(text, "missing tensor 'model.layers.1.self_attn.k_proj.bias' (expected "
                             "shape [32])"));
  BOOST_CHECK(contains(text, "tensor 'model.layers.0.mlp.up_proj.weight' in model.safetensors "
                             "has shape [64, 128], expected [128, 64]"));
  BOOST_CHECK(contains(text, "tensor 'model.norm.weight' in model.safetensors has dtype I32"));

  // An empty checkpoint: the list is cut after 20 lines.
  const auto empty = dir.path / "empty.safetensors";
  BOOST_REQUIRE(write_safetensors(empty, {{"unrelated", at::zeros({1})}}));
  auto none = check_weights(config, *safetensors_checkpoint::open_file(empty));
  BOOST_REQUIRE(!none);
  BOOST_CHECK(contains(kbrl::describe(none.error()), "... and "));
}

BOOST_AUTO_TEST_CASE(model_directories_name_what_they_lack) {
  temp_dir dir;
  const auto model_dir = dir.path / "m";
  BOOST_REQUIRE(write_random_checkpoint(model_dir, tiny_model_config("llama"), /*seed=*/3,
                                        st_dtype::f32, /*max_shard_bytes=*/60000));
  auto files = find_model_files(model_dir);
  BOOST_REQUIRE_MESSAGE(files, why(files));
  BOOST_CHECK(files->weights_index == model_dir / safetensors_index_name);
  BOOST_CHECK_GT(files->weight_files.size(), 1u);
  auto ckpt = safetensors_checkpoint::open_dir(model_dir);
  BOOST_REQUIRE(ckpt);
  BOOST_CHECK(check_weights(tiny_model_config("llama"), *ckpt));

  const auto lost = files->weight_files.back();
  fs::remove(lost);
  fs::remove(model_dir / "config.json");
  BOOST_CHECK(missing_model_files(model_dir)
              == (std::vector<std::string>{"config.json", lost.filename().string()}));
  auto incomplete = find_model_files(model_dir);
  BOOST_REQUIRE(!incomplete);
  BOOST_CHECK(contains(kbrl::describe(incomplete.error()), lost.filename().string()));
  auto absent = find_model_files(dir.path / "nothing");
  BOOST_REQUIRE(!absent);
  BOOST_CHECK(contains(kbrl::describe(absent.error()), "does not exist"));
  BOOST_CHECK(missing_model_files(dir.path)
              == (std::vector<std::string>{"config.json", "model.safetensors"}));
}

BOOST_AUTO_TEST_SUITE_END()
