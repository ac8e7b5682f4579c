#include "runtime/model/random_checkpoint.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::model {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i, n);
  return buf;
}

caf::expected<void> write_text(const fs::path& path, const std::string& text) {
  return io::write_file_atomically(path, {text});
}

std::string render_generation_config(const model_config& c) {
  json_writer w;
  w.begin_object();
  if (c.bos_token_id)
    w.field("bos_token_id", *c.bos_token_id);
  if (!c.eos_token_ids.empty()) {
    w.key("eos_token_id").begin_array();
    for (auto id : c.eos_token_ids)
      w.value(id);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

} // namespace

caf::expected<void> write_random_checkpoint(const fs::path& dir, const model_config& config,
                                            uint64_t seed, st_dtype dtype,
                                            uint64_t max_shard_bytes) {
  if (!is_floating(dtype))
    return make_error(errc::invalid_argument, std::string("random checkpoints are floating "
                                                          "point; cannot write dtype ")
                                                + to_string(dtype));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(errc::io_failure, "cannot create " + dir.string() + ": " + ec.message());

  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<std::pair<std::string, at::Tensor>> weights;
  for (const auto& spec : expected_weights(config)) {
    auto t = at::normal(0.0, 1.0, spec.shape, gen, at::TensorOptions().dtype(at::kFloat));
    if (ends_with(spec.name, "norm.weight"))
      t = t.mul_(0.1).add_(1.0);
    else
      t = t.mul_(0.02);
    weights.emplace_back(spec.name, t.to(to_scalar_type(dtype)));
  }

  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (max_shard_bytes == 0) {
    if (auto ok = write_safetensors(dir / safetensors_single_name, weights, metadata); !ok)
      return ok.error();
  } else {
    // Pack in order; a shard closes when the next tensor would make it too large.
    std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards(1);
    uint64_t shard_bytes = 0, total_bytes = 0;
    for (auto& w : weights) {
      const uint64_t bytes = w.second.numel() * w.second.element_size();
      if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
        shards.emplace_back();
        shard_bytes = 0;
      }
      shard_bytes += bytes;
      total_bytes += bytes;
      shards.back().push_back(std::move(w));
    }
    json_writer index;
    index.begin_object().key("metadata").begin_object().field("total_size", total_bytes);
    index.end_object().key("weight_map").begin_object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const auto name = shard_name(i + 1, shards.size());
      for (const auto& w : shards[i])
        index.field(w.first, name);
      if (auto ok = write_safetensors(dir / name, shards[i], metadata); !ok)
        return ok.error();
    }
    index.end_object().end_object();
    if (auto ok = write_text(dir / safetensors_index_name, index.str()); !ok)
      return ok.error();
  }
  if (auto ok = write_text(dir / "generation_config.json", render_generation_config(config)); !ok)
    return ok.error();
  // config.json last: a directory with a config is a complete one.
  return write_text(dir / "config.json", render_model_config(config));
}

model_config tiny_model_config(const std::string& model_type) {
  model_config c;
  c.model_type = model_type;
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 512;
  c.torch_dtype = "float32";
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  if (model_type == "llama") {
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.rope_scaling = llama3_rope_scaling{/*factor=*/32.0, /*low_freq_factor=*/1.0,
                                         /*high_freq_factor=*/4.0,
                                         /*original_max_position_embeddings=*/128};
    c.eos_token_ids = {2, 3};
  } else {
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;
  }
  return c;
}

} // namespace kbrl::model
