#include "runtime/model/lora_adapter.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/safetensors.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <regex>

namespace kbrl::model {

namespace fs = std::filesystem;

namespace {

std::string shown(simdjson::dom::element e) {
  std::string s = simdjson::minify(e);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

/// The value at `key`, or nullopt if absent or null (PEFT writes null for unset options).
std::optional<simdjson::dom::element> get(simdjson::dom::object obj, const char* key) {
  simdjson::dom::element e;
  if (obj[key].get(e) || e.is_null())
    return std::nullopt;
  return e;
}

/// True if `e` is an empty array or object (PEFT writes [] / {} for unused options).
bool empty_container(simdjson::dom::element e) {
  simdjson::dom::array a;
  if (!e.get(a))
    return a.size() == 0;
  simdjson::dom::object o;
  if (!e.get(o))
    return o.size() == 0;
  return false;
}

/// The layer index of a module name "model.layers.<n>.<rest>", or -1.
int64_t layer_of(const std::string& module) {
  static const std::regex layer_name(R"(model\.layers\.(0|[1-9][0-9]{0,8})\..*)");
  std::smatch m;
  if (!std::regex_match(module, m, layer_name))
    return -1;
  return std::stoll(m[1].str());
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Every LoRA-capable module of `config`, in network order.
std::vector<std::string> capable_modules(const model_config& config) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                             "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      out.push_back(layer + name);
  }
  return out;
}

const std::string peft_prefix = "base_model.model.";

std::string shape_of(const at::Tensor& t) {
  return shape_string(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
}

} // namespace

// ---- adapter_config.json -------------------------------------------------------------------------

double lora_config::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r))
                    : lora_alpha / static_cast<double>(r);
}

bool lora_config::targets(const std::string& module) const {
  bool match = false;
  if (!target_regex.empty()) {
    try {
      match = std::regex_match(module, std::regex(target_regex));
    } catch (const std::regex_error&) {
      match = false; // parse_lora_config refuses such patterns
    }
  } else {
    for (const auto& t : target_modules)
      if (module == t || ends_with(module, "." + t))
        match = true;
  }
  if (!match)
    return false;
  if (layers_to_transform) {
    const auto layer = layer_of(module);
    return std::find(layers_to_transform->begin(), layers_to_transform->end(), layer)
           != layers_to_transform->end();
  }
  return true;
}

caf::expected<lora_config> parse_lora_config(std::string_view json, const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return make_error(errc::invalid_config,
                      path + ": not valid JSON: " + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (doc.get(obj))
    return make_error(errc::invalid_config, path + ": expected a JSON object, got " + shown(doc));

  std::vector<std::string> problems, refused;
  auto problem = [&](const std::string& key, const std::string& what) {
    problems.push_back(path + ": " + key + ": " + what);
  };
  auto refuse = [&](const std::string& key, const std::string& what) {
    refused.push_back(path + ": " + key + ": " + what);
  };
  lora_config c;

  if (auto e = get(obj, "peft_type")) {
    std::string_view type;
    if (e->get(type) || type != "LORA")
      refuse("peft_type", "only LORA adapters are supported, got " + shown(*e));
  }
  if (auto e = get(obj, "r")) {
    if (!e->is_int64() || e->get(c.r) || c.r <= 0)
      problem("r", "expected an integer > 0, got " + shown(*e));
  } else {
    problem("r", "required key is missing: expected an integer > 0");
  }
  if (auto e = get(obj, "lora_alpha")) {
    if (!e->is_number() || e->get(c.lora_alpha) || !std::isfinite(c.lora_alpha)
        || c.lora_alpha <= 0)
      problem("lora_alpha", "expected a number > 0, got " + shown(*e));
  } else {
    problem("lora_alpha", "required key is missing: expected a number > 0");
  }
  if (auto e = get(obj, "target_modules")) {
    std::string_view one;
    simdjson::dom::array list;
    if (!e->get(one)) {
      c.target_regex = std::string(one);
      try {
        std::regex check(c.target_regex);
      } catch (const std::regex_error& err) {
        problem("target_modules", "not a valid regular expression: " + std::string(err.what()));
      }
      if (c.target_regex.empty())
        problem("target_modules", "expected a non-empty pattern or list of module names");
    } else if (!e->get(list) && list.size() > 0) {
      for (auto x : list) {
        std::string_view name;
        if (x.get(name) || name.empty()) {
          problem("target_modules", "expected module names (strings), got " + shown(*e));
          break;
        }
        c.target_modules.emplace_back(name);
      }
    } else {
      problem("target_modules", "expected a non-empty list of module names or a pattern, got "
                                  + shown(*e));
    }
  } else {
    problem("target_modules", "required key is missing: expected a list of module names");
  }
  if (auto e = get(obj, "use_rslora"))
    if (e->get(c.use_rslora))
      problem("use_rslora", "expected true or false, got " + shown(*e));
  if (auto e = get(obj, "layers_to_transform")) {
    int64_t one = 0;
    simdjson::dom::array list;
    std::vector<int64_t> layers;
    bool ok = true;
    if (e->is_int64() && !e->get(one)) {
      layers.push_back(one);
    } else if (!e->get(list)) {
      for (auto x : list) {
        int64_t i = 0;
        if (!x.is_int64() || x.get(i)) {
          ok = false;
          break;
        }
        layers.push_back(i);
      }
    } else {
      ok = false;
    }
    if (!ok || std::any_of(layers.begin(), layers.end(), [](int64_t i) { return i < 0; }))
      problem("layers_to_transform", "expected a layer index or a list of them, got " + shown(*e));
    else
      c.layers_to_transform = layers;
  }
  if (auto e = get(obj, "base_model_name_or_path")) {
    std::string_view name;
    if (!e->get(name))
      c.base_model_name_or_path = std::string(name);
  }

  // Features that change the computation: refused rather than ignored.
  auto flag_refused = [&](const char* key, const std::string& why) {
    if (auto e = get(obj, key)) {
      bool on = false;
      if (e->get(on))
        problem(key, "expected true or false, got " + shown(*e));
      else if (on)
        refuse(key, why);
    }
  };
  flag_refused("fan_in_fan_out", "transposed (Conv1D) weights are not supported (expected false)");
  flag_refused("use_dora", "DoRA adapters are not supported (expected false)");
  flag_refused("lora_bias", "LoRA biases are not supported (expected false)");
  if (auto e = get(obj, "bias")) {
    std::string_view bias;
    if (e->get(bias) || bias != "none")
      refuse("bias", "trained biases are not supported (expected \"none\"), got " + shown(*e));
  }
  for (const char* key : {"modules_to_save", "rank_pattern", "alpha_pattern", "layer_replication",
                          "target_parameters", "trainable_token_indices", "exclude_modules"})
    if (auto e = get(obj, key); e && !empty_container(*e))
      refuse(key, "not supported (expected null or empty), got " + shown(*e));

  if (!refused.empty())
    return make_error(errc::not_supported, join(refused, "\n"));
  if (!problems.empty())
    return make_error(errc::invalid_config, join(problems, "\n"));
  return c;
}

std::string render_lora_config(const lora_config& c) {
  json_writer w;
  w.begin_object();
  w.field("peft_type", "LORA");
  w.field("task_type", "CAUSAL_LM");
  w.field("base_model_name_or_path", c.base_model_name_or_path);
  w.field("r", c.r);
  w.field("lora_alpha", c.lora_alpha);
  w.field("lora_dropout", 0.0);
  w.key("target_modules");
  if (!c.target_regex.empty()) {
    w.value(c.target_regex);
  } else {
    w.begin_array();
    for (const auto& t : c.target_modules)
      w.value(t);
    w.end_array();
  }
  w.field("use_rslora", c.use_rslora);
  w.field("fan_in_fan_out", false);
  w.field("bias", "none");
  w.field("use_dora", false);
  w.field("inference_mode", true);
  w.key("modules_to_save").null();
  w.key("layers_to_transform");
  if (c.layers_to_transform) {
    w.begin_array();
    for (auto i : *c.layers_to_transform)
      w.value(i);
    w.end_array();
  } else {
    w.null();
  }
  w.key("rank_pattern").begin_object().end_object();
  w.key("alpha_pattern").begin_object().end_object();
  w.end_object();
  return w.str();
}

// ---- checking ------------------------------------------------------------------------------------

std::optional<std::pair<int64_t, int64_t>> lora_module_shape(const model_config& c,
                                                             const std::string& module) {
  const int64_t layer = layer_of(module);
  if (layer < 0 || layer >= c.num_hidden_layers)
    return std::nullopt;
  const std::string rest = module.substr(module.find('.', std::string("model.layers.").size()) + 1);
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  if (rest == "self_attn.q_proj") return std::make_pair(c.hidden_size, q);
  if (rest == "self_attn.k_proj") return std::make_pair(c.hidden_size, kv);
  if (rest == "self_attn.v_proj") return std::make_pair(c.hidden_size, kv);
  if (rest == "self_attn.o_proj") return std::make_pair(q, c.hidden_size);
  if (rest == "mlp.gate_proj") return std::make_pair(c.hidden_size, c.intermediate_size);
  if (rest == "mlp.up_proj") return std::make_pair(c.hidden_size, c.intermediate_size);
  if (rest == "mlp.down_proj") return std::make_pair(c.intermediate_size, c.hidden_size);
  return std::nullopt;
}

caf::expected<void> check_lora_adapter(const lora_adapter& adapter, const model_config& config) {
  std::vector<std::string> problems;
  const auto& lc = adapter.config;
  for (const auto& [module, f] : adapter.modules) {
    const auto shape = lora_module_shape(config, module);
    if (!shape) {
      problems.push_back(module + ": not a module LoRA can adapt in this " + config.model_type
                         + " model of " + std::to_string(config.num_hidden_layers)
                         + " layers (expected model.layers.<n>.self_attn.<q|k|v|o>_proj or "
                           "model.layers.<n>.mlp.<gate|up|down>_proj)");
      continue;
    }
    if (!lc.targets(module))
      problems.push_back(module + ": has LoRA factors but adapter_config.json does not target it");
    if (!f.defined()) {
      problems.push_back(module + ": needs both lora_A and lora_B");
      continue;
    }
    const auto [in, out] = *shape;
    if (f.a.dim() != 2 || f.a.size(0) != lc.r || f.a.size(1) != in)
      problems.push_back(module + ".lora_A: expected shape " + shape_string({lc.r, in})
                         + " (rank " + std::to_string(lc.r) + " from adapter_config.json), got "
                         + shape_of(f.a));
    if (f.b.dim() != 2 || f.b.size(0) != out || f.b.size(1) != lc.r)
      problems.push_back(module + ".lora_B: expected shape " + shape_string({out, lc.r})
                         + " (rank " + std::to_string(lc.r) + " from adapter_config.json), got "
                         + shape_of(f.b));
  }
  for (const auto& module : capable_modules(config))
    if (lc.targets(module) && adapter.modules.count(module) == 0)
      problems.push_back(module + ": targeted by adapter_config.json but has no LoRA factors");
  if (lc.target_regex.empty())
    for (const auto& t : lc.target_modules) {
      const auto all = capable_modules(config);
      const bool any = std::any_of(all.begin(), all.end(), [&](const std::string& m) {
        return m == t || ends_with(m, "." + t);
      });
      if (!any)
        problems.push_back("target module '" + t + "' names no layer LoRA can adapt here ("
                           + join(lora_module_names()) + ")");
    }
  if (!problems.empty())
    return make_error(errc::invalid_argument, join(problems, "\n"));
  return {};
}

// ---- files ---------------------------------------------------------------------------------------

caf::expected<lora_adapter> load_lora_adapter(const fs::path& dir, const model_config& config,
                                              const at::TensorOptions& options) {
  const auto config_path = dir / lora_config_name;
  auto text = io::read_text_file(config_path);
  if (!text)
    return text.error();
  auto lc = parse_lora_config(*text, config_path.string());
  if (!lc)
    return lc.error();
  const auto weights_path = dir / lora_weights_name;
  auto file = safetensors_file::open(weights_path);
  if (!file)
    return file.error();

  lora_adapter adapter;
  adapter.config = *lc;
  std::vector<std::string> problems;
  for (const auto& entry : file->entries()) {
    const auto& name = entry.name;
    std::string module, factor;
    for (const char* suffix : {".lora_A.weight", ".lora_B.weight"})
      if (ends_with(name, suffix) && name.compare(0, peft_prefix.size(), peft_prefix) == 0) {
        module = name.substr(peft_prefix.size(),
                             name.size() - peft_prefix.size() - std::string(suffix).size());
        factor = suffix;
      }
    if (module.empty()) {
      problems.push_back(weights_path.string() + ": " + name
                         + ": not a LoRA factor (expected base_model.model.<module>"
                           ".lora_A.weight or .lora_B.weight)");
      continue;
    }
    if (!is_floating(entry.dtype)) {
      problems.push_back(weights_path.string() + ": " + name + ": expected a floating-point "
                         "dtype, got " + to_string(entry.dtype));
      continue;
    }
    auto t = file->tensor(name, tensor_access::copy);
    if (!t)
      return t.error();
    auto& f = adapter.modules[module];
    (factor == ".lora_A.weight" ? f.a : f.b) = t->to(options);
    f.scaling = lc->scaling();
  }
  if (auto ok = check_lora_adapter(adapter, config); !ok)
    problems.push_back(describe(ok.error()));
  if (!problems.empty()) {
    // Name the file once on every line that does not already.
    for (auto& p : problems)
      if (p.find(weights_path.string()) == std::string::npos)
        p = weights_path.string() + ": " + p;
    return make_error(errc::invalid_argument, join(problems, "\n"));
  }
  return adapter;
}

caf::expected<void> write_lora_adapter(const fs::path& dir, const lora_adapter& adapter) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(errc::io_failure, "cannot create " + dir.string() + ": " + ec.message());
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [module, f] : adapter.modules) {
    tensors.emplace_back(peft_prefix + module + ".lora_A.weight", f.a.detach());
    tensors.emplace_back(peft_prefix + module + ".lora_B.weight", f.b.detach());
  }
  if (auto ok = write_safetensors(dir / lora_weights_name, tensors, {{"format", "pt"}}); !ok)
    return ok.error();
  // The config last: a directory with a config is a complete adapter.
  return io::write_file_atomically(dir / lora_config_name, {render_lora_config(adapter.config)});
}

caf::expected<void> attach_lora_adapter(transformer& model, const lora_adapter& adapter) {
  if (auto ok = check_lora_adapter(adapter, model.config()); !ok)
    return ok.error();
  std::vector<std::pair<linear_layer*, const lora_factors*>> plan;
  for (const auto& [module, f] : adapter.modules) {
    auto* layer = model.find_linear(module);
    if (layer == nullptr)
      return make_error(errc::internal, "attach_lora_adapter: checked module " + module
                                          + " is not in the model");
    if (f.a.device() != layer->weight.device())
      return make_error(errc::invalid_argument,
                        module + ": LoRA factors on " + f.a.device().str()
                          + ", the model on " + layer->weight.device().str());
    plan.emplace_back(layer, &f);
  }
  model.clear_lora();
  for (auto& [layer, f] : plan)
    layer->lora = *f;
  return {};
}

lora_adapter random_lora_adapter(const model_config& model, const lora_config& config,
                                 uint64_t seed, double std, bool zero_b) {
  auto gen = at::detail::createCPUGenerator(seed);
  lora_adapter adapter;
  adapter.config = config;
  for (const auto& module : capable_modules(model)) {
    if (!config.targets(module))
      continue;
    const auto [in, out] = *lora_module_shape(model, module);
    lora_factors f;
    f.a = at::normal(0.0, std, {config.r, in}, gen, at::TensorOptions().dtype(at::kFloat));
    f.b = zero_b ? at::zeros({out, config.r}, at::kFloat)
                 : at::normal(0.0, std, {out, config.r}, gen, at::TensorOptions().dtype(at::kFloat));
    f.scaling = config.scaling();
    adapter.modules.emplace(module, f);
  }
  return adapter;
}

} // namespace kbrl::model
