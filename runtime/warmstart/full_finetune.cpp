#include "runtime/warmstart/full_finetune.hpp"

#include "messages/errors.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <map>
#include <random>

namespace kbrl::warmstart {

namespace {

caf::expected<void> check_options(const finetune_options& o) {
  std::string bad;
  if (o.epochs <= 0)
    bad += " epochs must be > 0;";
  if (o.batch_sequences <= 0)
    bad += " batch_sequences must be > 0;";
  if (!(o.lr > 0))
    bad += " lr must be > 0;";
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1))
    bad += " min_lr_ratio must be in [0, 1];";
  if (o.warmup_steps < 0)
    bad += " warmup_steps must be >= 0;";
  if (!(o.weight_decay >= 0))
    bad += " weight_decay must be >= 0;";
  if (!(o.clip_norm >= 0))
    bad += " clip_norm must be >= 0;";
  if (!bad.empty())
    return make_error(errc::invalid_argument, "fine-tuning options:" + bad.substr(0, bad.size() - 1));
  return {};
}

/// The layers' weights by checkpoint name.
std::map<std::string, at::Tensor> layer_weights(const model::transformer& m) {
  std::map<std::string, at::Tensor> out;
  auto linear = [&out](const std::string& name, const model::linear_layer& l) {
    out[name + ".weight"] = l.weight;
    if (l.bias.defined())
      out[name + ".bias"] = l.bias;
  };
  for (size_t i = 0; i < m.layers().size(); ++i) {
    auto& d = m.layers()[i];
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    out[layer + "input_layernorm.weight"] = d.input_layernorm;
    linear(layer + "self_attn.q_proj", d.self_attn.q_proj);
    linear(layer + "self_attn.k_proj", d.self_attn.k_proj);
    linear(layer + "self_attn.v_proj", d.self_attn.v_proj);
    linear(layer + "self_attn.o_proj", d.self_attn.o_proj);
    if (d.self_attn.q_norm.defined()) {
      out[layer + "self_attn.q_norm.weight"] = d.self_attn.q_norm;
      out[layer + "self_attn.k_norm.weight"] = d.self_attn.k_norm;
    }
    out[layer + "post_attention_layernorm.weight"] = d.post_attention_layernorm;
    linear(layer + "mlp.gate_proj", d.mlp.gate_proj);
    linear(layer + "mlp.up_proj", d.mlp.up_proj);
    linear(layer + "mlp.down_proj", d.mlp.down_proj);
  }
  return out;
}

/// The order of examples in epoch `epoch`: Fisher-Yates with the generator's raw output
/// (std::shuffle's use of it is unspecified, so it could differ between standard libraries).
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(epoch));
  for (size_t i = n; i > 1; --i)
    std::swap(order[i - 1], order[rng() % i]);
  return order;
}

} // namespace

caf::expected<std::unique_ptr<full_finetune>> full_finetune::create(const std::filesystem::path& dir,
                                                                    const finetune_options& options) {
  if (auto ok = check_options(options); !ok)
    return ok.error();
  auto loaded = model::transformer::load(dir, {at::kCPU, at::kFloat});
  if (!loaded)
    return loaded.error();
  if (!loaded->config().tie_word_embeddings)
    return make_error(errc::invalid_argument,
                      dir.string() + ": the warm start trains models whose output head is tied "
                                     "to the embedding (tie_word_embeddings true)");
  auto checkpoint = model::safetensors_checkpoint::open_dir(dir);
  if (!checkpoint)
    return checkpoint.error();
  std::unique_ptr<full_finetune> t(new full_finetune(std::move(*loaded)));
  t->options_ = options;
  try {
    auto layers = layer_weights(t->model_);
    for (auto& spec : model::expected_weights(t->model_.config())) {
      at::Tensor w;
      if (auto it = layers.find(spec.name); it != layers.end()) {
        w = it->second;
      } else {
        auto read = checkpoint->tensor(spec.name, model::tensor_access::copy);
        if (!read)
          return read.error();
        w = read->to(at::kFloat);
        if (spec.name == "model.embed_tokens.weight")
          t->embed_ = w;
        else if (spec.name == "model.norm.weight")
          t->norm_ = w;
        else
          return make_error(errc::internal, "warm start: no trainable tensor for " + spec.name);
      }
      t->weights_.emplace_back(spec.name, w);
    }
    int64_t total = 0;
    for (auto& [name, w] : t->weights_)
      total += w.numel();
    t->flat_ = at::empty({total}, at::kFloat);
    t->grads_ = at::zeros({total}, at::kFloat);
    int64_t offset = 0;
    for (auto& [name, w] : t->weights_) {
      auto n = w.numel();
      auto slot = t->flat_.narrow(0, offset, n);
      slot.copy_(w.reshape({-1}));
      // The transformer keeps its handle; from now on that handle's data is the flat slice.
      w.set_data(slot.view(w.sizes()));
      w.requires_grad_(true);
      w.mutable_grad() = t->grads_.narrow(0, offset, n).view(w.sizes());
      offset += n;
    }
    train::adamw_options a;
    a.lr = options.lr;
    a.weight_decay = options.weight_decay;
    t->optimizer_ = train::adamw(t->flat_, a);
  } catch (const c10::Error& e) {
    return make_error(errc::internal, std::string("warm start: setting up the weights failed: ")
                                        + e.what_without_backtrace());
  }
  return t;
}

caf::expected<void> full_finetune::check(const std::vector<supervised_example>& examples) const {
  if (examples.empty())
    return make_error(errc::invalid_argument, "warm start: no examples to train on");
  const auto vocab = model_.config().vocab_size;
  for (size_t i = 0; i < examples.size(); ++i) {
    auto& e = examples[i];
    if (e.prompt_tokens.empty() || e.completion_tokens.empty())
      return make_error(errc::invalid_argument, "warm start: example " + std::to_string(i)
                                                  + " has an empty prompt or completion");
    for (auto* part : {&e.prompt_tokens, &e.completion_tokens})
      for (auto id : *part)
        if (id < 0 || id >= vocab)
          return make_error(errc::invalid_argument,
                            "warm start: example " + std::to_string(i) + " holds token "
                              + std::to_string(id) + ", outside the vocabulary of "
                              + std::to_string(vocab));
  }
  return {};
}

std::pair<at::Tensor, int64_t>
full_finetune::batch_loss(const std::vector<const supervised_example*>& batch) {
  const int64_t rows = static_cast<int64_t>(batch.size());
  int64_t width = 0;
  for (auto* e : batch)
    width = std::max<int64_t>(width, e->prompt_tokens.size() + e->completion_tokens.size());
  auto ids = at::zeros({rows, width}, at::kLong);
  auto valid = at::zeros({rows, width}, at::kBool);
  std::vector<int64_t> picked, targets; // flat positions predicting a completion token
  auto* id = ids.data_ptr<int64_t>();
  auto* ok = valid.data_ptr<bool>();
  for (int64_t b = 0; b < rows; ++b) {
    auto& e = *batch[b];
    std::vector<int32_t> seq(e.prompt_tokens);
    seq.insert(seq.end(), e.completion_tokens.begin(), e.completion_tokens.end());
    for (size_t t = 0; t < seq.size(); ++t) {
      id[b * width + t] = seq[t];
      ok[b * width + t] = true;
    }
    for (size_t t = e.prompt_tokens.size(); t < seq.size(); ++t) {
      picked.push_back(b * width + static_cast<int64_t>(t) - 1);
      targets.push_back(seq[t]);
    }
  }
  auto positions = at::arange(width, at::kLong).unsqueeze(0).expand({rows, width});
  auto mask = model::causal_mask(valid);
  auto h = at::embedding(embed_, ids);
  auto rotary = model_.rotary(positions);
  for (int64_t i = 0; i < model_.config().num_hidden_layers; ++i)
    h = model_.run_layer(i, h, rotary, positions, mask);
  h = model::rms_norm(h, norm_, model_.config().rms_norm_eps);
  auto rows_picked = h.reshape({rows * width, -1})
                       .index_select(0, at::tensor(picked, at::kLong));
  auto logits = at::linear(rows_picked, embed_);
  auto loss = at::cross_entropy_loss(logits, at::tensor(targets, at::kLong));
  return {loss, static_cast<int64_t>(targets.size())};
}

caf::expected<void>
full_finetune::train(const std::vector<supervised_example>& examples,
                     const std::function<void(const finetune_progress&)>& progress) {
  if (auto ok = check(examples); !ok)
    return ok;
  const auto n = static_cast<int64_t>(examples.size());
  const int64_t per_epoch = (n + options_.batch_sequences - 1) / options_.batch_sequences;
  train::lr_schedule schedule;
  schedule.kind = train::lr_schedule_kind::cosine;
  schedule.warmup_steps = options_.warmup_steps;
  schedule.total_steps = std::max(per_epoch * options_.epochs, options_.warmup_steps + 1);
  schedule.min_ratio = options_.min_lr_ratio;
  int64_t all_tokens = 0;
  for (auto& e : examples)
    all_tokens += static_cast<int64_t>(e.prompt_tokens.size() + e.completion_tokens.size());
  const auto start = std::chrono::steady_clock::now();
  finetune_progress p;
  p.epochs = options_.epochs;
  p.steps = per_epoch * options_.epochs;
  int64_t tokens_done = 0;
  try {
    for (int64_t epoch = 1; epoch <= options_.epochs; ++epoch) {
      auto order = epoch_order(examples.size(), options_.seed, epoch);
      double loss_sum = 0;
      int64_t loss_tokens = 0;
      for (int64_t first = 0; first < n; first += options_.batch_sequences) {
        std::vector<const supervised_example*> batch;
        int64_t batch_tokens = 0;
        for (int64_t i = first; i < std::min(n, first + options_.batch_sequences); ++i) {
          batch.push_back(&examples[order[i]]);
          batch_tokens += static_cast<int64_t>(batch.back()->prompt_tokens.size()
                                               + batch.back()->completion_tokens.size());
        }
        grads_.zero_();
        auto [loss, count] = batch_loss(batch);
        loss.backward();
        const double lr = options_.lr * schedule.factor(optimizer_.steps() + 1);
        {
          at::NoGradGuard no_grad;
          train::clip_grad_norm(grads_, options_.clip_norm);
          optimizer_.step(flat_, grads_, lr);
        }
        const double value = loss.item<double>();
        loss_sum += value * static_cast<double>(count);
        loss_tokens += count;
        tokens_done += batch_tokens;
        p.epoch = epoch;
        p.step = optimizer_.steps();
        p.loss = value;
        p.epoch_loss = loss_sum / static_cast<double>(loss_tokens);
        p.lr = lr;
        p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        p.tokens_per_s = p.elapsed_s > 0 ? static_cast<double>(tokens_done) / p.elapsed_s : 0;
        const double left = static_cast<double>(all_tokens) * static_cast<double>(options_.epochs)
                            - static_cast<double>(tokens_done);
        p.remaining_s = p.tokens_per_s > 0 ? left / p.tokens_per_s : 0;
        p.epoch_done = first + options_.batch_sequences >= n;
        if (progress)
          progress(p);
      }
    }
  } catch (const c10::Error& e) {
    return make_error(errc::internal,
                      std::string("warm start: a training step failed: ") + e.what_without_backtrace());
  }
  return {};
}

caf::expected<double> full_finetune::loss(const std::vector<supervised_example>& examples) {
  if (auto ok = check(examples); !ok)
    return ok.error();
  try {
    at::NoGradGuard no_grad;
    double sum = 0;
    int64_t tokens = 0;
    for (size_t first = 0; first < examples.size(); first += options_.batch_sequences) {
      std::vector<const supervised_example*> batch;
      for (size_t i = first; i < std::min(examples.size(), first + options_.batch_sequences); ++i)
        batch.push_back(&examples[i]);
      auto [loss, count] = batch_loss(batch);
      sum += loss.item<double>() * static_cast<double>(count);
      tokens += count;
    }
    return sum / static_cast<double>(tokens);
  } catch (const c10::Error& e) {
    return make_error(errc::internal,
                      std::string("warm start: computing the loss failed: ") + e.what_without_backtrace());
  }
}

caf::expected<void> full_finetune::save(const std::filesystem::path& path,
                                        model::st_dtype dtype) const {
  if (!model::is_floating(dtype))
    return make_error(errc::invalid_argument, std::string("warm start: weights are saved as a "
                                                          "floating type, not ")
                                                + model::to_string(dtype));
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  {
    at::NoGradGuard no_grad;
    for (auto& [name, w] : weights_)
      tensors.emplace_back(name, w.detach().to(model::to_scalar_type(dtype)).contiguous());
  }
  return model::write_safetensors(path, tensors, {{"format", "pt"}});
}

} // namespace kbrl::warmstart
