#include "runtime/model/model_config.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>

namespace kbrl::model {

namespace {

/// A JSON value as an error message shows it (shortened).
std::string shown(simdjson::dom::element e) {
  std::string s = simdjson::minify(e);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

bool contains(const std::vector<std::string>& items, const std::string& x) {
  return std::find(items.begin(), items.end(), x) != items.end();
}

/// Reads typed keys from one JSON object, recording every problem instead of stopping at the
/// first. A key whose value is null counts as absent, as Hugging Face's loaders treat it.
class json_fields {
public:
  json_fields(simdjson::dom::object obj, std::string path, std::string prefix = "")
    : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

  std::vector<std::string> problems;

  void problem(const std::string& key, const std::string& what) {
    problems.push_back(path_ + ": " + prefix_ + key + ": " + what);
  }

  /// The value at `key`, or nullopt if absent or null.
  std::optional<simdjson::dom::element> get(const char* key) const {
    simdjson::dom::element e;
    if (obj_[key].get(e) || e.is_null())
      return std::nullopt;
    return e;
  }

  bool has(const char* key) const { return get(key).has_value(); }

  std::optional<int64_t> integer(const char* key, bool required = false) {
    auto e = get(key);
    if (!e) {
      if (required)
        problem(key, "required key is missing: expected an integer");
      return std::nullopt;
    }
    int64_t v = 0;
    if (!e->is_int64() || e->get(v)) {
      problem(key, "expected an integer, got " + shown(*e));
      return std::nullopt;
    }
    return v;
  }

  /// An integer > 0 (or >= 0 if `allow_zero`) into `out`, if present.
  void count(const char* key, int64_t& out, bool required, bool allow_zero = false) {
    auto v = integer(key, required);
    if (!v)
      return;
    if (*v < (allow_zero ? 0 : 1)) {
      problem(key, std::string("expected an integer ") + (allow_zero ? ">= 0" : "> 0") + ", got "
                     + std::to_string(*v));
      return;
    }
    out = *v;
  }

  /// A number (integer or not) into `out`, if present; `ok` says whether the value is allowed
  /// and `expected` how an error describes the allowed values.
  template <class Pred>
  std::optional<double> number(const char* key, Pred ok, const std::string& expected,
                               bool required = false) {
    auto e = get(key);
    if (!e) {
      if (required)
        problem(key, "required key is missing: expected " + expected);
      return std::nullopt;
    }
    double v = 0;
    if (!e->is_number() || e->get(v) || !std::isfinite(v) || !ok(v)) {
      problem(key, "expected " + expected + ", got " + shown(*e));
      return std::nullopt;
    }
    return v;
  }

  std::optional<bool> boolean(const char* key) {
    auto e = get(key);
    if (!e)
      return std::nullopt;
    bool v = false;
    if (e->get(v)) {
      problem(key, "expected true or false, got " + shown(*e));
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::string> string(const char* key, bool required = false) {
    auto e = get(key);
    if (!e) {
      if (required)
        problem(key, "required key is missing: expected a string");
      return std::nullopt;
    }
    std::string_view v;
    if (e->get(v)) {
      problem(key, "expected a string, got " + shown(*e));
      return std::nullopt;
    }
    return std::string(v);
  }

  /// One token id or a list of them (eos_token_id); empty if absent.
  std::vector<int64_t> token_ids(const char* key) {
    auto e = get(key);
    if (!e)
      return {};
    const std::string expected = "expected a token id (integer >= 0) or a list of them, got ";
    int64_t one = 0;
    if (e->is_int64() && !e->get(one) && one >= 0)
      return {one};
    simdjson::dom::array array;
    if (e->get(array)) {
      problem(key, expected + shown(*e));
      return {};
    }
    std::vector<int64_t> out;
    for (auto x : array) {
      int64_t id = 0;
      if (!x.is_int64() || x.get(id) || id < 0) {
        problem(key, expected + shown(*e));
        return {};
      }
      out.push_back(id);
    }
    return out;
  }

  /// A token id (integer >= 0), if present.
  std::optional<int64_t> token_id(const char* key) {
    auto v = integer(key);
    if (v && *v < 0) {
      problem(key, "expected a token id (integer >= 0), got " + std::to_string(*v));
      return std::nullopt;
    }
    return v;
  }

private:
  simdjson::dom::object obj_;
  std::string path_;
  std::string prefix_;
};

caf::error config_error(const std::vector<std::string>& problems) {
  return make_error(errc::invalid_config, join(problems, "\n"));
}

/// Parses `json` as a JSON object; on failure the error names `path`.
caf::expected<simdjson::dom::object> parse_object(simdjson::dom::parser& parser,
                                                  std::string_view json, const std::string& path) {
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return make_error(errc::invalid_config,
                      path + ": not valid JSON: " + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (doc.get(obj))
    return make_error(errc::invalid_config, path + ": expected a JSON object, got " + shown(doc));
  return obj;
}

/// rope_scaling (or, in files of newer transformers, rope_parameters, which also holds
/// rope_theta): nullopt for none; problems recorded in `fields` under the key's name.
std::optional<llama3_rope_scaling> read_rope_scaling(json_fields& fields, const std::string& path,
                                                     double& rope_theta) {
  const char* key = fields.has("rope_scaling") || !fields.has("rope_parameters") ? "rope_scaling"
                                                                                 : "rope_parameters";
  auto e = fields.get(key);
  if (!e)
    return std::nullopt;
  simdjson::dom::object obj;
  if (e->get(obj)) {
    fields.problem(key, "expected an object or null, got " + shown(*e));
    return std::nullopt;
  }
  json_fields scaling(obj, path, std::string(key) + ".");
  if (std::string(key) == "rope_parameters" && !fields.has("rope_theta"))
    if (auto v = scaling.number("rope_theta", [](double v) { return v > 0; }, "a number > 0"))
      rope_theta = *v;
  // Newer files say rope_type, older ones type; both mean the same.
  const char* type_key = scaling.has("rope_type") ? "rope_type" : "type";
  auto type = scaling.string(type_key, /*required=*/true);
  std::optional<llama3_rope_scaling> out;
  if (type && *type == "llama3") {
    llama3_rope_scaling s;
    auto positive = [](double v) { return v > 0; };
    if (auto v = scaling.number("factor", positive, "a number > 0", true))
      s.factor = *v;
    if (auto v = scaling.number("low_freq_factor", positive, "a number > 0", true))
      s.low_freq_factor = *v;
    if (auto v = scaling.number("high_freq_factor", positive, "a number > 0", true))
      s.high_freq_factor = *v;
    scaling.count("original_max_position_embeddings", s.original_max_position_embeddings, true);
    if (s.high_freq_factor <= s.low_freq_factor)
      scaling.problem("high_freq_factor", "expected a number > low_freq_factor ("
                                            + std::to_string(s.low_freq_factor) + "), got "
                                            + std::to_string(s.high_freq_factor));
    out = s;
  } else if (type && *type != "default") {
    scaling.problem(type_key, "RoPE scaling '" + *type + "' is not supported (kbrl runs "
                                + join(supported_rope_scaling_types()) + ")");
  }
  fields.problems.insert(fields.problems.end(), scaling.problems.begin(), scaling.problems.end());
  return out;
}

} // namespace

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types{"qwen2", "qwen3", "llama"};
  return types;
}

const std::vector<std::string>& supported_rope_scaling_types() {
  static const std::vector<std::string> types{"default", "llama3"};
  return types;
}

bool model_config::qkv_bias() const { return model_type == "qwen2" || attention_bias; }

bool model_config::o_proj_bias() const { return model_type != "qwen2" && attention_bias; }

bool model_config::qk_norm() const { return model_type == "qwen3"; }

caf::expected<model_config> parse_model_config(std::string_view json, const std::string& path) {
  simdjson::dom::parser parser;
  auto obj = parse_object(parser, json, path);
  if (!obj)
    return obj.error();
  json_fields f(*obj, path);
  model_config c;

  auto type = f.string("model_type", /*required=*/true);
  if (type && !contains(supported_model_types(), *type)) {
    f.problem("model_type", "model type '" + *type + "' is not supported (kbrl runs "
                              + join(supported_model_types()) + ")");
    return config_error(f.problems); // nothing else can be judged for an unknown architecture
  }
  if (type)
    c.model_type = *type;

  f.count("vocab_size", c.vocab_size, true);
  f.count("hidden_size", c.hidden_size, true);
  f.count("intermediate_size", c.intermediate_size, true);
  f.count("num_hidden_layers", c.num_hidden_layers, true);
  f.count("num_attention_heads", c.num_attention_heads, true);
  c.num_key_value_heads = c.num_attention_heads;
  f.count("num_key_value_heads", c.num_key_value_heads, false);
  if (c.num_attention_heads > 0 && c.num_key_value_heads > 0
      && c.num_attention_heads % c.num_key_value_heads != 0)
    f.problem("num_key_value_heads",
              "expected a divisor of num_attention_heads (" + std::to_string(c.num_attention_heads)
                + "), got " + std::to_string(c.num_key_value_heads));
  if (f.has("head_dim")) {
    f.count("head_dim", c.head_dim, false);
  } else if (c.hidden_size > 0 && c.num_attention_heads > 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      f.problem("head_dim", "missing, and hidden_size (" + std::to_string(c.hidden_size)
                              + ") is not a multiple of num_attention_heads ("
                              + std::to_string(c.num_attention_heads) + ")");
    else
      c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    f.problem("head_dim", "expected an even number (RoPE rotates pairs), got "
                            + std::to_string(c.head_dim));

  auto positive = [](double v) { return v > 0; };
  if (auto v = f.number("rms_norm_eps", positive, "a number > 0"))
    c.rms_norm_eps = *v;
  if (auto v = f.number("rope_theta", positive, "a number > 0"))
    c.rope_theta = *v;
  f.count("max_position_embeddings", c.max_position_embeddings, true);
  if (auto v = f.boolean("tie_word_embeddings"))
    c.tie_word_embeddings = *v;
  if (auto v = f.boolean("attention_bias"))
    c.attention_bias = *v;
  if (auto v = f.boolean("mlp_bias"))
    c.mlp_bias = *v;
  if (auto v = f.string(f.has("torch_dtype") ? "torch_dtype" : "dtype"))
    c.torch_dtype = *v;
  c.rope_scaling = read_rope_scaling(f, path, c.rope_theta);
  c.bos_token_id = f.token_id("bos_token_id");
  c.eos_token_ids = f.token_ids("eos_token_id");

  // Variants of these architectures that compute something else: refused, not run wrongly.
  if (auto act = f.string("hidden_act"); act && *act != "silu")
    f.problem("hidden_act", "activation '" + *act + "' is not supported (kbrl runs silu)");
  if (auto sliding = f.boolean("use_sliding_window"); sliding && *sliding)
    f.problem("use_sliding_window", "sliding-window attention is not supported (expected false)");
  if (auto tp = f.integer("pretraining_tp"); tp && *tp != 1)
    f.problem("pretraining_tp", "expected 1 (split projections are not supported), got "
                                  + std::to_string(*tp));

  if (!f.problems.empty())
    return config_error(f.problems);
  return c;
}

caf::expected<model_config> load_model_config(const std::filesystem::path& path) {
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  return parse_model_config(*text, path.string());
}

std::string render_model_config(const model_config& c) {
  const char* architecture = c.model_type == "qwen2"   ? "Qwen2ForCausalLM"
                             : c.model_type == "qwen3" ? "Qwen3ForCausalLM"
                                                       : "LlamaForCausalLM";
  json_writer w;
  w.begin_object();
  w.key("architectures").begin_array().value(architecture).end_array();
  w.field("model_type", c.model_type);
  w.field("vocab_size", c.vocab_size);
  w.field("hidden_size", c.hidden_size);
  w.field("intermediate_size", c.intermediate_size);
  w.field("num_hidden_layers", c.num_hidden_layers);
  w.field("num_attention_heads", c.num_attention_heads);
  w.field("num_key_value_heads", c.num_key_value_heads);
  w.field("head_dim", c.head_dim);
  w.field("hidden_act", "silu");
  w.field("rms_norm_eps", c.rms_norm_eps);
  w.field("rope_theta", c.rope_theta);
  w.field("max_position_embeddings", c.max_position_embeddings);
  w.field("tie_word_embeddings", c.tie_word_embeddings);
  if (c.model_type != "qwen2")
    w.field("attention_bias", c.attention_bias);
  if (c.model_type == "llama")
    w.field("mlp_bias", c.mlp_bias);
  if (!c.torch_dtype.empty())
    w.field("torch_dtype", c.torch_dtype);
  w.key("rope_scaling");
  if (c.rope_scaling) {
    w.begin_object()
      .field("rope_type", "llama3")
      .field("factor", c.rope_scaling->factor)
      .field("low_freq_factor", c.rope_scaling->low_freq_factor)
      .field("high_freq_factor", c.rope_scaling->high_freq_factor)
      .field("original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings)
      .end_object();
  } else {
    w.null();
  }
  if (c.bos_token_id)
    w.field("bos_token_id", *c.bos_token_id);
  if (c.eos_token_ids.size() == 1) {
    w.field("eos_token_id", c.eos_token_ids.front());
  } else if (!c.eos_token_ids.empty()) {
    w.key("eos_token_id").begin_array();
    for (auto id : c.eos_token_ids)
      w.value(id);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

namespace {

bool same_scaling(const std::optional<llama3_rope_scaling>& a,
                  const std::optional<llama3_rope_scaling>& b) {
  if (a.has_value() != b.has_value())
    return false;
  return !a
         || (a->factor == b->factor && a->low_freq_factor == b->low_freq_factor
             && a->high_freq_factor == b->high_freq_factor
             && a->original_max_position_embeddings == b->original_max_position_embeddings);
}

} // namespace

bool operator==(const model_config& a, const model_config& b) {
  return a.model_type == b.model_type && a.vocab_size == b.vocab_size
         && a.hidden_size == b.hidden_size && a.intermediate_size == b.intermediate_size
         && a.num_hidden_layers == b.num_hidden_layers
         && a.num_attention_heads == b.num_attention_heads
         && a.num_key_value_heads == b.num_key_value_heads && a.head_dim == b.head_dim
         && a.rms_norm_eps == b.rms_norm_eps && a.rope_theta == b.rope_theta
         && a.max_position_embeddings == b.max_position_embeddings
         && a.tie_word_embeddings == b.tie_word_embeddings && a.attention_bias == b.attention_bias
         && a.mlp_bias == b.mlp_bias && a.torch_dtype == b.torch_dtype
         && same_scaling(a.rope_scaling, b.rope_scaling) && a.bos_token_id == b.bos_token_id
         && a.eos_token_ids == b.eos_token_ids;
}

bool operator!=(const model_config& a, const model_config& b) { return !(a == b); }

// ---- generation_config.json ----------------------------------------------------------------------

caf::expected<generation_config> parse_generation_config(std::string_view json,
                                                         const std::string& path) {
  simdjson::dom::parser parser;
  auto obj = parse_object(parser, json, path);
  if (!obj)
    return obj.error();
  json_fields f(*obj, path);
  generation_config g;
  g.bos_token_id = f.token_id("bos_token_id");
  g.pad_token_id = f.token_id("pad_token_id");
  g.eos_token_ids = f.token_ids("eos_token_id");
  g.do_sample = f.boolean("do_sample");
  g.temperature = f.number("temperature", [](double v) { return v >= 0; }, "a number >= 0");
  g.top_p = f.number("top_p", [](double v) { return v > 0 && v <= 1; }, "a number in (0, 1]");
  if (auto k = f.integer("top_k"); k && *k < 0)
    f.problem("top_k", "expected an integer >= 0, got " + std::to_string(*k));
  else
    g.top_k = k;
  g.repetition_penalty =
    f.number("repetition_penalty", [](double v) { return v > 0; }, "a number > 0");
  if (auto n = f.integer("max_new_tokens"); n && *n <= 0)
    f.problem("max_new_tokens", "expected an integer > 0, got " + std::to_string(*n));
  else
    g.max_new_tokens = n;
  if (!f.problems.empty())
    return config_error(f.problems);
  return g;
}

caf::expected<generation_config> load_generation_config(const std::filesystem::path& path) {
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  return parse_generation_config(*text, path.string());
}

// ---- weight names --------------------------------------------------------------------------------

std::vector<weight_spec> expected_weights(const model_config& c) {
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  std::vector<weight_spec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    const std::string attn = layer + "self_attn.";
    const std::string mlp = layer + "mlp.";
    out.push_back({layer + "input_layernorm.weight", {c.hidden_size}});
    out.push_back({attn + "q_proj.weight", {q_width, c.hidden_size}});
    if (c.qkv_bias())
      out.push_back({attn + "q_proj.bias", {q_width}});
    out.push_back({attn + "k_proj.weight", {kv_width, c.hidden_size}});
    if (c.qkv_bias())
      out.push_back({attn + "k_proj.bias", {kv_width}});
    out.push_back({attn + "v_proj.weight", {kv_width, c.hidden_size}});
    if (c.qkv_bias())
      out.push_back({attn + "v_proj.bias", {kv_width}});
    out.push_back({attn + "o_proj.weight", {c.hidden_size, q_width}});
    if (c.o_proj_bias())
      out.push_back({attn + "o_proj.bias", {c.hidden_size}});
    if (c.qk_norm()) {
      out.push_back({attn + "q_norm.weight", {c.head_dim}});
      out.push_back({attn + "k_norm.weight", {c.head_dim}});
    }
    out.push_back({layer + "post_attention_layernorm.weight", {c.hidden_size}});
    out.push_back({mlp + "gate_proj.weight", {c.intermediate_size, c.hidden_size}});
    if (c.mlp_bias)
      out.push_back({mlp + "gate_proj.bias", {c.intermediate_size}});
    out.push_back({mlp + "up_proj.weight", {c.intermediate_size, c.hidden_size}});
    if (c.mlp_bias)
      out.push_back({mlp + "up_proj.bias", {c.intermediate_size}});
    out.push_back({mlp + "down_proj.weight", {c.hidden_size, c.intermediate_size}});
    if (c.mlp_bias)
      out.push_back({mlp + "down_proj.bias", {c.hidden_size}});
  }
  out.push_back({"model.norm.weight", {c.hidden_size}});
  if (!c.tie_word_embeddings)
    out.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  return out;
}

const std::vector<std::string>& lora_module_names() {
  static const std::vector<std::string> names{"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                              "gate_proj", "up_proj", "down_proj"};
  return names;
}

} // namespace kbrl::model
