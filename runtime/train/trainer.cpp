#include "runtime/train/trainer.hpp"
#include "runtime/io/elapsed.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/sampling.hpp"
#include "runtime/model/token_logprobs.hpp"
#include "runtime/train/chunked_logprobs.hpp"
#include "runtime/train/layer_checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace kbrl::train {

namespace {

int64_t length_of(const training_sample& s) {
  return static_cast<int64_t>(s.prompt_tokens.size() + s.completion_tokens.size());
}

/// Re-attaches the trainer's factors when it goes out of scope.
class base_model_scope {
public:
  explicit base_model_scope(lora_parameters& p) : p_(p) { p_.detach_from_model(); }
  ~base_model_scope() { p_.attach_to_model(); }
  base_model_scope(const base_model_scope&) = delete;
  base_model_scope& operator=(const base_model_scope&) = delete;

private:
  lora_parameters& p_;
};

/// Switches LoRA dropout on while alive.
class dropout_scope {
public:
  dropout_scope(lora_parameters& p, double rate, const at::Generator& g) : p_(p) {
    p_.set_dropout(rate, g);
  }
  ~dropout_scope() { p_.set_dropout(0, at::Generator()); }
  dropout_scope(const dropout_scope&) = delete;
  dropout_scope& operator=(const dropout_scope&) = delete;

private:
  lora_parameters& p_;
};

} // namespace

/// One micro-batch: its samples and the tensors of its forward pass (on the model's device).
struct lora_trainer::micro_batch {
  std::vector<std::size_t> samples;
  int64_t longest = 0;
  at::Tensor ids, positions, valid; ///< [B, L]
  at::Tensor gather;                ///< [N] positions b * L + s that predict completion tokens
  at::Tensor targets;               ///< [N] the completion tokens
  at::Tensor sampler_logprobs;      ///< [N] (pg, ppo)
  at::Tensor advantages;            ///< [N]
  at::Tensor weights;               ///< [N]
};

at::ScalarType to_scalar_type(factor_dtype dtype) {
  return dtype == factor_dtype::float64 ? at::kDouble : at::kFloat;
}

lora_trainer::lora_trainer(model::transformer& model, trainer_options options,
                           lora_parameters params)
  : model_(&model),
    options_(std::move(options)),
    params_(std::move(params)),
    optimizer_(params_.values(), options_.adamw),
    dropout_generator_(model::make_generator(options_.seed + 1, model.options().device)) {
}

caf::expected<std::unique_ptr<lora_trainer>>
lora_trainer::create(model::transformer& model, const trainer_options& options,
                     const model::lora_adapter* initial) {
  if (auto ok = check_trainer_options(options); !ok)
    return ok.error();
  auto params = [&]() -> caf::expected<lora_parameters> {
    if (initial != nullptr)
      return lora_parameters::from_adapter(model, *initial, to_scalar_type(options.param_dtype));
    model::lora_config config;
    config.r = options.lora_r;
    config.lora_alpha = options.lora_alpha;
    config.use_rslora = options.use_rslora;
    config.target_modules = options.target_modules;
    return lora_parameters::create(model, config, options.seed,
                                   to_scalar_type(options.param_dtype));
  }();
  if (!params)
    return params.error();
  params->set_compute_in_input_dtype(options.lora_compute == lora_compute_dtype::base);
  auto opts = options;
  opts.lora_r = params->config().r;
  opts.lora_alpha = params->config().lora_alpha;
  opts.use_rslora = params->config().use_rslora;
  return std::unique_ptr<lora_trainer>(new lora_trainer(model, opts, std::move(*params)));
}

bool lora_trainer::needs_logprobs() const {
  return options_.loss.kind != rl::policy_loss_kind::supervised;
}

std::vector<lora_trainer::micro_batch>
lora_trainer::pack(const std::vector<training_sample>& samples,
                   const std::vector<std::size_t>& shard) const {
  std::vector<std::size_t> order;
  for (auto i : shard)
    if (!samples[i].completion_tokens.empty())
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return length_of(samples[a]) > length_of(samples[b]);
  });
  std::vector<micro_batch> out;
  for (auto i : order) {
    const int64_t n = length_of(samples[i]);
    if (out.empty()
        || static_cast<int64_t>(out.back().samples.size() + 1) * out.back().longest
             > options_.micro_batch_tokens) {
      out.emplace_back();
      out.back().longest = n;
    }
    out.back().samples.push_back(i);
  }
  return out;
}

at::Tensor lora_trainer::completion_logprobs(const micro_batch& mb, bool train) {
  auto& m = *model_;
  const int64_t batch = mb.ids.size(0), len = mb.ids.size(1);
  // Right padding only (run() packs so): causal attention needs no mask. The explicit mask,
  // when asked for, is folded for the head groups once here rather than in every layer.
  const auto mask = options_.explicit_attention_mask
                      ? model::fold_attention_mask(model::causal_mask(mb.valid),
                                                   m.config().num_attention_heads
                                                     / m.config().num_key_value_heads)
                      : at::Tensor();
  auto h = m.embed(mb.ids);
  const auto rotary = m.rotary(mb.positions);
  const int64_t layers = static_cast<int64_t>(m.layers().size());
  for (int64_t i = 0; i < layers; ++i)
    h = train && options_.gradient_checkpointing
          ? checkpointed_layer(m, i, h, rotary, mb.positions, mask)
          : m.run_layer(i, h, rotary, mb.positions, mask);
  h = m.final_norm(h);
  const auto rows = h.reshape({batch * len, h.size(-1)}).index_select(0, mb.gather).unsqueeze(0);
  const auto targets = mb.targets.unsqueeze(0);
  const auto lp = train ? chunked_token_logprobs(m, rows, targets, options_.temperature,
                                                 options_.logprob_chunk)
                        : model::token_logprobs(m, rows, targets, options_.temperature,
                                                options_.logprob_chunk);
  return lp.squeeze(0);
}

step_stats lora_trainer::run(const std::vector<training_sample>& samples,
                             const std::vector<std::size_t>& shard, bool train) {
  const auto device = model_->options().device;
  const auto wdtype = at::kDouble;
  std::vector<int64_t> lengths;
  std::vector<int64_t> first_weight; // per sample: index of its first token's weight
  int64_t total = 0;
  for (const auto& s : samples) {
    lengths.push_back(static_cast<int64_t>(s.completion_tokens.size()));
    first_weight.push_back(total);
    total += lengths.back();
  }
  // Over the whole step, also when this computes one replica's shard: the shards' losses and
  // gradients then add up to the step's.
  const auto weights = rl::aggregation_weights(lengths, options_.aggregation);

  step_stats stats;
  stats.sequences = static_cast<int64_t>(shard.size());
  for (auto i : shard) {
    stats.completion_tokens += lengths[i];
    stats.tokens += length_of(samples[i]);
  }

  const auto float_options = at::TensorOptions().dtype(at::kFloat);
  at::Tensor sum_loss, sum_policy, sum_kl, sum_clipped, sum_ratio, max_ratio;
  auto add = [](at::Tensor& acc, const at::Tensor& x) { acc = acc.defined() ? acc + x : x; };

  for (auto& mb : pack(samples, shard)) {
    const int64_t batch = static_cast<int64_t>(mb.samples.size()), len = mb.longest;
    std::vector<int64_t> ids(batch * len, 0), valid(batch * len, 0), gather, targets;
    std::vector<float> old_lp, adv;
    std::vector<double> w;
    for (int64_t b = 0; b < batch; ++b) {
      const auto& s = samples[mb.samples[b]];
      const int64_t p = static_cast<int64_t>(s.prompt_tokens.size());
      const int64_t c = static_cast<int64_t>(s.completion_tokens.size());
      for (int64_t t = 0; t < p; ++t)
        ids[b * len + t] = s.prompt_tokens[t];
      for (int64_t t = 0; t < c; ++t) {
        ids[b * len + p + t] = s.completion_tokens[t];
        gather.push_back(b * len + p + t - 1);
        targets.push_back(s.completion_tokens[t]);
        w.push_back(weights[first_weight[mb.samples[b]] + t]);
        adv.push_back(static_cast<float>(s.advantage));
        old_lp.push_back(s.sampler_logprobs.empty() ? 0.f : s.sampler_logprobs[t]);
      }
      std::fill(valid.begin() + b * len, valid.begin() + b * len + p + c, 1);
    }
    // from_blob() borrows the vector; clone() gives the tensor its own memory before it moves.
    auto longs = [&](std::vector<int64_t>& v, at::IntArrayRef shape) {
      return at::from_blob(v.data(), shape, at::kLong).clone().to(device);
    };
    mb.ids = longs(ids, {batch, len});
    mb.valid = longs(valid, {batch, len}).to(at::kBool);
    mb.positions = at::arange(len, at::TensorOptions().dtype(at::kLong).device(device))
                     .unsqueeze(0)
                     .expand({batch, len})
                     .contiguous();
    const int64_t n = static_cast<int64_t>(gather.size());
    mb.gather = longs(gather, {n});
    mb.targets = longs(targets, {n});
    mb.sampler_logprobs = at::from_blob(old_lp.data(), {n}, float_options).clone().to(device);
    mb.advantages = at::from_blob(adv.data(), {n}, float_options).clone().to(device);
    mb.weights = at::from_blob(w.data(), {n}, at::TensorOptions().dtype(wdtype)).clone().to(device);
    stats.padded_tokens += batch * len;
    ++stats.micro_batches;

    rl::token_inputs in;
    in.sampler_logprobs = mb.sampler_logprobs;
    in.advantages = mb.advantages;
    in.weights = mb.weights;
    if (options_.loss.kl_coef > 0) {
      at::NoGradGuard no_grad;
      base_model_scope base(params_);
      in.base_logprobs = completion_logprobs(mb, /*train=*/false);
    }
    rl::policy_loss_terms terms;
    if (train) {
      at::AutoGradMode grad_on(true);
      in.logprobs = completion_logprobs(mb, /*train=*/true);
      terms = rl::compute_policy_loss(in, options_.loss);
      terms.loss.backward();
    } else {
      at::NoGradGuard no_grad;
      in.logprobs = completion_logprobs(mb, /*train=*/false);
      terms = rl::compute_policy_loss(in, options_.loss);
    }
    add(sum_loss, terms.loss.detach());
    add(sum_policy, terms.policy);
    add(sum_kl, terms.kl);
    add(sum_clipped, terms.clipped);
    add(sum_ratio, terms.ratio);
    max_ratio = max_ratio.defined() ? at::maximum(max_ratio, terms.max_ratio) : terms.max_ratio;
  }
  if (sum_loss.defined()) {
    stats.loss = sum_loss.item<double>();
    stats.policy_loss = sum_policy.item<double>();
    stats.kl = sum_kl.item<double>();
    stats.clip_fraction = sum_clipped.item<double>();
    stats.mean_ratio = sum_ratio.item<double>();
    stats.max_ratio = max_ratio.item<double>();
  }
  return stats;
}

namespace {

std::vector<std::size_t> every_sample(const std::vector<training_sample>& samples) {
  std::vector<std::size_t> all(samples.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

} // namespace

caf::expected<step_stats>
lora_trainer::compute_gradients(const std::vector<training_sample>& samples) {
  return compute_shard_gradients(samples, every_sample(samples));
}

caf::expected<step_stats>
lora_trainer::compute_shard_gradients(const std::vector<training_sample>& samples,
                                      const std::vector<std::size_t>& shard) {
  if (auto ok = check_training_samples(samples, shard, model_->config().vocab_size,
                                       needs_logprobs());
      !ok)
    return ok.error();
  bool any_completion = false;
  for (const auto& s : samples)
    any_completion = any_completion || !s.completion_tokens.empty();
  if (!any_completion)
    return make_error(errc::invalid_argument,
                      "trainer: the batch has no completion tokens to train on");
  const auto start = std::chrono::steady_clock::now();
  params_.zero_grad();
  try {
    dropout_scope dropout(params_, options_.lora_dropout, dropout_generator_);
    auto stats = run(samples, shard, /*train=*/true);
    stats.grad_norm = params_.grads().norm(2).item<double>();
    stats.step = steps_done();
    stats.seconds = seconds_since(start);
    return stats;
  } catch (const std::exception& e) {
    params_.zero_grad();
    return make_error(errc::internal, std::string("trainer: the gradient computation failed: ")
                                        + e.what());
  }
}

caf::expected<step_stats> lora_trainer::step(const std::vector<training_sample>& samples) {
  if (samples.empty())
    return make_error(errc::invalid_argument, "trainer: empty batch");
  const auto start = std::chrono::steady_clock::now();
  auto stats = compute_gradients(samples);
  if (!stats)
    return stats.error();
  // A data-parallel step (data_parallel.hpp) all-reduces the bucket between these two calls.
  auto done = apply_gradients(std::move(*stats));
  if (done)
    done->seconds = seconds_since(start);
  return done;
}

caf::expected<step_stats> lora_trainer::apply_gradients(step_stats stats) {
  try {
    const double norm = clip_grad_norm(params_.grads(), options_.clip_norm);
    if (!std::isfinite(norm)) {
      params_.zero_grad();
      return make_error(errc::internal,
                        "trainer: the gradient norm is not finite (loss "
                          + std::to_string(stats.loss) + "); step skipped, parameters unchanged");
    }
    const double lr = next_lr();
    {
      at::NoGradGuard no_grad;
      optimizer_.step(params_.values(), params_.grads(), lr);
    }
    stats.grad_norm = norm;
    stats.lr = lr;
    stats.step = steps_done();
    return stats;
  } catch (const std::exception& e) {
    return make_error(errc::internal, std::string("trainer: the optimiser step failed: ")
                                        + e.what());
  }
}

caf::expected<double> lora_trainer::loss(const std::vector<training_sample>& samples) {
  if (auto ok = check_training_samples(samples, model_->config().vocab_size, needs_logprobs());
      !ok)
    return ok.error();
  try {
    return run(samples, every_sample(samples), /*train=*/false).loss;
  } catch (const std::exception& e) {
    return make_error(errc::internal, std::string("trainer: the loss computation failed: ")
                                        + e.what());
  }
}

void lora_trainer::set_parameters(const at::Tensor& flat) {
  TORCH_CHECK(flat.numel() == params_.size(), "set_parameters: expected ", params_.size(),
              " values, got ", flat.numel());
  at::NoGradGuard no_grad;
  params_.values().copy_(flat.reshape({-1}));
}

model::lora_adapter lora_trainer::adapter() const {
  auto a = params_.to_adapter();
  // PEFT's AutoPeftModel*.from_pretrained(adapter_dir) loads the base from this field.
  if (!options_.base_model.empty())
    a.config.base_model_name_or_path = options_.base_model;
  return a;
}

double lora_trainer::next_lr() const {
  return options_.adamw.lr * options_.schedule.factor(steps_done() + 1);
}

trainer_state lora_trainer::state() const {
  trainer_state s;
  s.step = steps_done();
  s.values = params_.values().detach().to(at::kCPU).clone();
  s.exp_avg = optimizer_.exp_avg().to(at::kCPU).clone();
  s.exp_avg_sq = optimizer_.exp_avg_sq().to(at::kCPU).clone();
  auto gen = dropout_generator_;
  std::lock_guard<std::mutex> lock(gen.mutex());
  s.dropout_rng = gen.get_state();
  return s;
}

caf::expected<void> lora_trainer::restore(const trainer_state& s) {
  const auto n = params_.size();
  if (!s.values.defined() || !s.exp_avg.defined() || !s.exp_avg_sq.defined()
      || s.values.numel() != n || s.exp_avg.numel() != n || s.exp_avg_sq.numel() != n)
    return make_error(errc::invalid_argument,
                      "trainer state: expected " + std::to_string(n)
                        + " values and moments for this adapter's layout, got "
                        + (s.values.defined() ? std::to_string(s.values.numel()) : "none"));
  if (s.step < 0)
    return make_error(errc::invalid_argument,
                      "trainer state: negative step " + std::to_string(s.step));
  try {
    const auto like = params_.values();
    {
      at::NoGradGuard no_grad;
      params_.values().copy_(s.values.reshape({-1}));
    }
    optimizer_.restore(s.step, s.exp_avg.reshape({-1}).to(like.options()),
                       s.exp_avg_sq.reshape({-1}).to(like.options()));
    if (s.dropout_rng.defined()) {
      auto gen = dropout_generator_;
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(s.dropout_rng);
    }
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument,
                      std::string("trainer state: cannot restore: ") + e.what());
  }
  return {};
}

} // namespace kbrl::train
