#include "runtime/train/lora_parameters.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <utility>

namespace kbrl::train {

lora_parameters::lora_parameters(lora_parameters&& other) noexcept
  : model_(std::exchange(other.model_, nullptr)),
    config_(std::move(other.config_)),
    slots_(std::move(other.slots_)),
    values_(std::move(other.values_)),
    grads_(std::move(other.grads_)),
    dropout_(other.dropout_),
    generator_(std::move(other.generator_)),
    compute_in_input_dtype_(other.compute_in_input_dtype_),
    attached_(std::exchange(other.attached_, false)) {
}

lora_parameters& lora_parameters::operator=(lora_parameters&& other) noexcept {
  if (this != &other) {
    if (model_ != nullptr && attached_)
      detach_from_model();
    model_ = std::exchange(other.model_, nullptr);
    config_ = std::move(other.config_);
    slots_ = std::move(other.slots_);
    values_ = std::move(other.values_);
    grads_ = std::move(other.grads_);
    dropout_ = other.dropout_;
    generator_ = std::move(other.generator_);
    compute_in_input_dtype_ = other.compute_in_input_dtype_;
    attached_ = std::exchange(other.attached_, false);
  }
  return *this;
}

lora_parameters::~lora_parameters() {
  if (model_ != nullptr && attached_)
    detach_from_model();
}

caf::expected<lora_parameters> lora_parameters::layout(model::transformer& model,
                                                       const model::lora_config& config,
                                                       at::ScalarType dtype) {
  if (config.r < 1)
    return make_error(errc::invalid_argument,
                      "LoRA rank r must be >= 1, got " + std::to_string(config.r));
  if (!(config.lora_alpha > 0) || !std::isfinite(config.lora_alpha))
    return make_error(errc::invalid_argument,
                      "lora_alpha must be > 0, got " + std::to_string(config.lora_alpha));
  if (dtype != at::kFloat && dtype != at::kDouble)
    return make_error(errc::invalid_argument,
                      std::string("trainable LoRA factors are float32 (or float64 for gradient "
                                  "checks), not ")
                        + c10::toString(dtype));
  lora_parameters p;
  p.model_ = &model;
  p.config_ = config;
  int64_t offset = 0;
  for (auto& [module, layer] : model.linear_layers()) {
    if (!config.targets(module))
      continue;
    const auto shape = model::lora_module_shape(model.config(), module);
    if (!shape)
      continue;
    lora_slot s;
    s.module = module;
    s.in_features = shape->first;
    s.out_features = shape->second;
    s.a_offset = offset;
    offset += config.r * s.in_features;
    s.b_offset = offset;
    offset += s.out_features * config.r;
    s.layer = layer;
    p.slots_.push_back(std::move(s));
  }
  if (p.slots_.empty()) {
    const std::string targets =
      config.target_regex.empty() ? join(config.target_modules) : config.target_regex;
    return make_error(errc::invalid_argument,
                      "the LoRA target modules (" + targets + ") name no layer of this "
                        + model.config().model_type + " model (expected some of "
                        + join(model::lora_module_names()) + ")");
  }
  const auto options = at::TensorOptions().dtype(dtype).device(model.options().device);
  p.values_ = at::zeros({offset}, options);
  p.grads_ = at::zeros({offset}, options);
  p.bind_views();
  model.clear_lora();
  p.attach_to_model();
  return p;
}

void lora_parameters::bind_views() {
  const int64_t r = config_.r;
  for (auto& s : slots_) {
    // detach(): plain leaves sharing the storage, outside autograd's view tracking.
    s.a = values_.narrow(0, s.a_offset, r * s.in_features).view({r, s.in_features}).detach();
    s.b = values_.narrow(0, s.b_offset, s.out_features * r).view({s.out_features, r}).detach();
    s.a.requires_grad_(true);
    s.b.requires_grad_(true);
  }
  zero_grad();
}

caf::expected<lora_parameters> lora_parameters::create(model::transformer& model,
                                                       const model::lora_config& config,
                                                       uint64_t seed, at::ScalarType dtype) {
  auto p = layout(model, config, dtype);
  if (!p)
    return p.error();
  auto gen = at::detail::createCPUGenerator(seed);
  at::NoGradGuard no_grad;
  for (auto& s : p->slots_) {
    // kaiming_uniform_(a=sqrt(5)) on [r, in]: gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(s.in_features));
    auto a = at::empty({config.r, s.in_features}, at::kFloat).uniform_(-bound, bound, gen);
    s.a.copy_(a);
    s.b.zero_();
  }
  return p;
}

caf::expected<lora_parameters> lora_parameters::from_adapter(model::transformer& model,
                                                             const model::lora_adapter& adapter,
                                                             at::ScalarType dtype) {
  if (auto ok = model::check_lora_adapter(adapter, model.config()); !ok)
    return ok.error();
  auto p = layout(model, adapter.config, dtype);
  if (!p)
    return p.error();
  if (auto ok = p->load(adapter); !ok)
    return ok.error();
  return p;
}

std::vector<at::Tensor> lora_parameters::leaves() const {
  std::vector<at::Tensor> out;
  out.reserve(slots_.size() * 2);
  for (const auto& s : slots_) {
    out.push_back(s.a);
    out.push_back(s.b);
  }
  return out;
}

void lora_parameters::zero_grad() {
  at::NoGradGuard no_grad;
  grads_.zero_();
  auto point = [&](at::Tensor& leaf, int64_t offset) {
    const auto slice = grads_.narrow(0, offset, leaf.numel());
    if (!leaf.grad().defined() || leaf.grad().data_ptr() != slice.data_ptr())
      leaf.mutable_grad() = slice.view(leaf.sizes());
  };
  for (auto& s : slots_) {
    point(s.a, s.a_offset);
    point(s.b, s.b_offset);
  }
}

void lora_parameters::set_dropout(double p, const at::Generator& generator) {
  dropout_ = p;
  generator_ = generator;
  if (attached_)
    for (auto& s : slots_) {
      s.layer->lora.dropout = p;
      s.layer->lora.dropout_generator = generator;
    }
}

void lora_parameters::set_compute_in_input_dtype(bool on) {
  compute_in_input_dtype_ = on;
  if (attached_)
    for (auto& s : slots_)
      s.layer->lora.compute_in_input_dtype = on;
}

void lora_parameters::detach_from_model() {
  for (auto& s : slots_)
    s.layer->lora = {};
  attached_ = false;
}

void lora_parameters::attach_to_model() {
  const double scaling = config_.scaling();
  for (auto& s : slots_) {
    model::lora_factors f;
    f.a = s.a;
    f.b = s.b;
    f.scaling = scaling;
    f.dropout = dropout_;
    f.dropout_generator = generator_;
    f.compute_in_input_dtype = compute_in_input_dtype_;
    s.layer->lora = f;
  }
  attached_ = true;
}

model::lora_adapter lora_parameters::to_adapter() const {
  model::lora_adapter adapter;
  adapter.config = config_;
  for (const auto& s : slots_) {
    model::lora_factors f;
    f.a = s.a.detach().to(at::kCPU).clone();
    f.b = s.b.detach().to(at::kCPU).clone();
    f.scaling = config_.scaling();
    adapter.modules.emplace(s.module, f);
  }
  return adapter;
}

caf::expected<void> lora_parameters::load(const model::lora_adapter& adapter) {
  std::vector<std::string> problems;
  for (const auto& s : slots_) {
    auto it = adapter.modules.find(s.module);
    if (it == adapter.modules.end() || !it->second.defined()) {
      problems.push_back(s.module + ": no LoRA factors in the adapter");
      continue;
    }
    const auto& f = it->second;
    if (f.a.sizes() != s.a.sizes() || f.b.sizes() != s.b.sizes())
      problems.push_back(s.module + ": factors " + std::to_string(f.a.size(0)) + "x"
                         + std::to_string(f.a.dim() > 1 ? f.a.size(1) : 0) + " / "
                         + std::to_string(f.b.size(0)) + "x"
                         + std::to_string(f.b.dim() > 1 ? f.b.size(1) : 0) + ", expected "
                         + std::to_string(s.a.size(0)) + "x" + std::to_string(s.a.size(1))
                         + " / " + std::to_string(s.b.size(0)) + "x"
                         + std::to_string(s.b.size(1)));
  }
  for (const auto& [module, f] : adapter.modules) {
    bool known = false;
    for (const auto& s : slots_)
      known = known || s.module == module;
    if (!known)
      problems.push_back(module + ": in the adapter but not trained here");
  }
  if (!problems.empty())
    return make_error(errc::invalid_argument, join(problems, "\n"));
  at::NoGradGuard no_grad;
  for (auto& s : slots_) {
    const auto& f = adapter.modules.at(s.module);
    s.a.copy_(f.a);
    s.b.copy_(f.b);
  }
  return {};
}

} // namespace kbrl::train
