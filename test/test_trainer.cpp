// Over 800 lines: one case per property of the trainer, sharing the tiny-model fixtures.
// The LoRA trainer on tiny models on the CPU: the adapter starts as the base model, gradients
// equal central finite differences of the loss in float64 (every loss, both aggregations, with
// micro-batches, chunked logits and checkpointed layers), gradient checkpointing and chunking
// change nothing, AdamW / schedule / clipping follow PyTorch's formulas, checkpoints resume
// bit-identically and survive a crash mid-write, and a few dozen policy-gradient steps with
// samples drawn by the generation engine raise a reward.

#include "model_fixture.hpp"
#include "training_samples.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/token_logprobs.hpp"
#include "runtime/rl/advantages.hpp"
#include "runtime/train/checkpoint.hpp"
#include "runtime/train/chunked_logprobs.hpp"
#include "runtime/train/layer_checkpoint.hpp"
#include "runtime/train/learner_core.hpp"
#include "runtime/train/trainer.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <fstream>

using namespace kbrl;
using kbrl::test::temp_dir;
using kbrl::test::tiny_transformer;
using kbrl::test::why;
namespace fs = std::filesystem;

namespace {

model::transformer tiny(const temp_dir& dir, at::ScalarType dtype = at::kFloat,
                        const std::string& arch = "qwen2") {
  model::transformer_options o;
  o.dtype = dtype;
  return tiny_transformer(dir, model::tiny_model_config(arch), /*seed=*/7, o);
}

/// Samples with random tokens; sampler logprobs near the tiny models' ~ -log(256).
std::vector<train::training_sample> random_samples(uint64_t seed, int count,
                                                   int64_t vocab = 256) {
  return test::random_training_samples(seed, count, /*prompt_spread=*/4,
                                       /*completion_spread=*/5, vocab);
}

/// Small random factors (B non-zero), so that every factor has a gradient.
void randomise(train::lora_trainer& t, uint64_t seed, double scale = 0.05) {
  auto gen = at::detail::createCPUGenerator(seed);
  t.set_parameters(at::randn({t.lora().size()}, gen, at::TensorOptions().dtype(at::kDouble))
                     .mul(scale)
                     .to(t.parameters().scalar_type()));
}

train::trainer_options small_options() {
  train::trainer_options o;
  o.lora_r = 4;
  o.lora_alpha = 8;
  o.adamw.lr = 1e-2;
  o.micro_batch_tokens = 64;
  o.logprob_chunk = 4;
  return o;
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

/// The peak resident memory since the last reset_peak_memory(), from /proc/self/status.
int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoll(line.substr(6)) * 1024;
  return 0;
}

/// Resets the peak (writing 5 to clear_refs resets VmHWM to the current resident size).
void reset_peak_memory() { std::ofstream("/proc/self/clear_refs") << "5"; }

} // namespace

BOOST_AUTO_TEST_SUITE(trainer)

BOOST_AUTO_TEST_CASE(a_fresh_adapter_computes_the_base_model) {
  temp_dir dir;
  auto base = tiny(dir);
  auto adapted = tiny(dir);
  auto t = train::lora_trainer::create(adapted, small_options());
  BOOST_REQUIRE_MESSAGE(t, why(t));
  // PEFT's initialisation: A uniform within +-1/sqrt(in), B zero.
  const auto& slots = (*t)->lora().slots();
  BOOST_REQUIRE_EQUAL(slots.size(), 14u); // 7 modules x 2 layers
  for (const auto& s : slots) {
    BOOST_CHECK_EQUAL(max_abs(s.b), 0.0);
    BOOST_CHECK_GT(max_abs(s.a), 0.0);
    BOOST_CHECK_LE(max_abs(s.a), 1.0 / std::sqrt(static_cast<double>(s.in_features)));
  }
  auto ids = at::randint(256, {2, 9}, at::detail::createCPUGenerator(3));
  auto positions = at::arange(9).unsqueeze(0).expand({2, 9});
  auto mask = model::causal_mask(at::ones({2, 9}, at::kBool));
  at::NoGradGuard no_grad;
  auto a = base.logits(base.forward(ids, positions, mask));
  auto b = adapted.logits(adapted.forward(ids, positions, mask));
  BOOST_CHECK(at::equal(a, b)); // bit-identical: the LoRA term is exactly zero
  // With B non-zero the adapter changes the output.
  randomise(**t, 11);
  auto c = adapted.logits(adapted.forward(ids, positions, mask));
  BOOST_CHECK_GT(max_abs(c - a), 1e-4);
}

BOOST_AUTO_TEST_CASE(gradients_live_in_one_flat_bucket) {
  temp_dir dir;
  auto m = tiny(dir);
  auto t = train::lora_trainer::create(m, small_options());
  BOOST_REQUIRE_MESSAGE(t, why(t));
  randomise(**t, 5);
  auto samples = random_samples(1, 3);
  auto stats = (*t)->compute_gradients(samples);
  BOOST_REQUIRE_MESSAGE(stats, why(stats));
  const auto& bucket = (*t)->gradients();
  BOOST_CHECK_GT(max_abs(bucket), 0.0);
  // Every factor's .grad is a view into the bucket at its slot's offset.
  const auto* base = static_cast<const char*>(bucket.data_ptr());
  for (const auto& s : (*t)->lora().slots()) {
    BOOST_CHECK(s.a.grad().data_ptr()
                == base + s.a_offset * static_cast<int64_t>(bucket.element_size()));
    BOOST_CHECK(s.b.grad().data_ptr()
                == base + s.b_offset * static_cast<int64_t>(bucket.element_size()));
  }
  // A second computation starts from zero: same gradient again, not twice it.
  const auto first = bucket.clone();
  BOOST_REQUIRE((*t)->compute_gradients(samples));
  BOOST_CHECK(at::allclose(first, (*t)->gradients(), /*rtol=*/1e-6, /*atol=*/1e-9));
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_in_float64) {
  temp_dir dir;
  struct variant {
    const char* name;
    rl::policy_loss_kind loss;
    rl::loss_aggregation aggregation;
    double kl;
    bool checkpointing;
    int64_t micro_batch_tokens;
  };
  const variant variants[] = {
    {"pg, token, one micro-batch", rl::policy_loss_kind::policy_gradient,
     rl::loss_aggregation::token, 0.0, false, 1000},
    {"ppo, sequence, kl, micro-batches, checkpointing", rl::policy_loss_kind::ppo_clip,
     rl::loss_aggregation::sequence, 0.1, true, 12},
    {"sft, token, checkpointing", rl::policy_loss_kind::supervised, rl::loss_aggregation::token,
     0.0, true, 20},
  };
  auto m = tiny(dir, at::kDouble, "llama"); // llama: untied lm_head, biases-free, llama3 RoPE
  for (const auto& v : variants) {
    BOOST_TEST_CONTEXT(v.name) {
      auto o = small_options();
      o.param_dtype = train::factor_dtype::float64;
      o.loss.kind = v.loss;
      o.loss.kl_coef = v.kl;
      o.aggregation = v.aggregation;
      o.gradient_checkpointing = v.checkpointing;
      o.micro_batch_tokens = v.micro_batch_tokens;
      o.logprob_chunk = 3;
      o.temperature = 0.8;
      auto t = train::lora_trainer::create(m, o);
      BOOST_REQUIRE_MESSAGE(t, why(t));
      randomise(**t, 9);
      auto samples = random_samples(2, 4);
      auto stats = (*t)->compute_gradients(samples);
      BOOST_REQUIRE_MESSAGE(stats, why(stats));
      if (v.micro_batch_tokens < 100)
        BOOST_CHECK_GT(stats->micro_batches, 1);
      const auto grad = (*t)->gradients().clone();
      const auto p0 = (*t)->parameters().clone();
      auto loss0 = (*t)->loss(samples);
      BOOST_REQUIRE_MESSAGE(loss0, why(loss0));
      BOOST_CHECK_CLOSE(*loss0, stats->loss, 1e-9);
      auto gen = at::detail::createCPUGenerator(17);
      const double h = 1e-5;
      for (int k = 0; k < 3; ++k) {
        auto d = at::randn(p0.sizes(), gen, at::TensorOptions().dtype(at::kDouble));
        d /= d.norm();
        (*t)->set_parameters(p0 + h * d);
        const double plus = *(*t)->loss(samples);
        (*t)->set_parameters(p0 - h * d);
        const double minus = *(*t)->loss(samples);
        const double fd = (plus - minus) / (2 * h);
        const double analytic = (grad * d).sum().item<double>();
        // Central differences in float64: error ~ h^2 * f''' / 6 + eps * |loss| / h, below
        // 1e-10 here, against directional derivatives of order 1e-3.
        BOOST_CHECK_MESSAGE(std::abs(fd - analytic) <= 1e-6 * std::abs(analytic) + 1e-11,
                            "direction " << k << ": finite difference " << fd << ", autograd "
                                         << analytic << ", difference " << fd - analytic);
      }
      (*t)->set_parameters(p0);
    }
  }
}

BOOST_AUTO_TEST_CASE(checkpointed_layers_give_the_same_gradients_with_dropout) {
  temp_dir dir;
  auto run = [&](bool checkpointing, double dropout) {
    auto m = tiny(dir);
    auto o = small_options();
    o.gradient_checkpointing = checkpointing;
    o.lora_dropout = dropout;
    o.seed = 3;
    auto t = train::lora_trainer::create(m, o);
    BOOST_REQUIRE_MESSAGE(t, why(t));
    randomise(**t, 4);
    auto stats = (*t)->compute_gradients(random_samples(3, 5));
    BOOST_REQUIRE_MESSAGE(stats, why(stats));
    return std::make_pair(stats->loss, (*t)->gradients().clone());
  };
  const auto [loss_plain, plain] = run(false, 0.1);
  const auto [loss_ckpt, ckpt] = run(true, 0.1);
  BOOST_CHECK_EQUAL(loss_plain, loss_ckpt);
  const double scale = max_abs(plain);
  BOOST_CHECK_GT(scale, 0.0);
  // Same operations on the same values; only the order of gradient accumulation may differ.
  BOOST_CHECK_MESSAGE(max_abs(plain - ckpt) <= 1e-6 * scale,
                      "checkpointing changed the gradient by " << max_abs(plain - ckpt));
  // And dropout is really on: without it the gradient differs.
  const auto [loss_none, none] = run(true, 0.0);
  BOOST_CHECK_GT(max_abs(none - plain), 1e-3 * scale);
  // The same seed draws the same masks.
  const auto [loss_again, again] = run(true, 0.1);
  BOOST_CHECK(at::equal(again, ckpt));
}

BOOST_AUTO_TEST_CASE(a_checkpointed_layer_keeps_only_its_input_and_recomputes) {
  temp_dir dir;
  auto m = tiny(dir);
  auto t = train::lora_trainer::create(m, small_options());
  BOOST_REQUIRE(t);
  randomise(**t, 12);
  auto gen = at::detail::createCPUGenerator(13);
  auto hidden = at::randn({2, 5, 64}, gen);
  auto positions = at::arange(5).unsqueeze(0).expand({2, 5});
  auto mask = model::causal_mask(at::ones({2, 5}, at::kBool));
  auto rotary = m.rotary(positions);
  auto h1 = hidden.clone().requires_grad_(true), h2 = hidden.clone().requires_grad_(true);
  auto plain = m.run_layer(1, h1, rotary, positions, mask);
  auto ckpt = train::checkpointed_layer(m, 1, h2, rotary, positions, mask);
  BOOST_CHECK(at::equal(plain, ckpt));
  // One custom node stands for the whole layer (its activations are not in the graph).
  BOOST_REQUIRE(ckpt.grad_fn());
  BOOST_CHECK_MESSAGE(ckpt.grad_fn()->name().find("layer_function") != std::string::npos,
                      ckpt.grad_fn()->name());
  const auto& a = (*t)->lora().slots()[7].a; // layer 1's q_proj
  auto g1 = torch::autograd::grad({plain.sum()}, {h1, a});
  auto g2 = torch::autograd::grad({ckpt.sum()}, {h2, a});
  BOOST_CHECK(at::equal(g1[0], g2[0]));
  BOOST_CHECK(at::equal(g1[1], g2[1]));
  BOOST_CHECK_GT(max_abs(g1[1]), 0.0);
  // Without autograd it is the plain layer.
  at::NoGradGuard no_grad;
  BOOST_CHECK(!train::checkpointed_layer(m, 1, hidden, rotary, positions, mask).grad_fn());
}

BOOST_AUTO_TEST_CASE(chunked_logprobs_equal_the_direct_computation) {
  temp_dir dir;
  auto m = tiny(dir);
  auto gen = at::detail::createCPUGenerator(8);
  auto hidden = at::randn({2, 7, 64}, gen);
  auto targets = at::randint(256, {2, 7}, gen);
  auto weights = at::randn({2, 7}, gen);
  auto h1 = hidden.clone().requires_grad_(true);
  auto h2 = hidden.clone().requires_grad_(true);
  auto direct = model::token_logprobs(m, h1, targets, 0.7, /*chunk=*/100);
  auto chunked = train::chunked_token_logprobs(m, h2, targets, 0.7, /*chunk=*/3);
  BOOST_CHECK(at::allclose(direct, chunked, 0, 1e-6));
  auto g1 = torch::autograd::grad({(direct * weights).sum()}, {h1})[0];
  auto g2 = torch::autograd::grad({(chunked * weights).sum()}, {h2})[0];
  BOOST_CHECK_MESSAGE(at::allclose(g1, g2, 1e-5, 1e-6),
                      "max difference " << max_abs(g1 - g2));
}

BOOST_AUTO_TEST_CASE(micro_batches_accumulate_the_gradient_of_the_whole_step) {
  temp_dir dir;
  auto grad_with = [&](int64_t micro_batch_tokens, rl::loss_aggregation aggregation) {
    auto m = tiny(dir);
    auto o = small_options();
    o.micro_batch_tokens = micro_batch_tokens;
    o.aggregation = aggregation;
    auto t = train::lora_trainer::create(m, o);
    BOOST_REQUIRE(t);
    randomise(**t, 6);
    auto stats = (*t)->compute_gradients(random_samples(4, 6));
    BOOST_REQUIRE_MESSAGE(stats, why(stats));
    return std::make_pair(stats->micro_batches, (*t)->gradients().clone());
  };
  for (auto aggregation : {rl::loss_aggregation::token, rl::loss_aggregation::sequence}) {
    const auto [one, whole] = grad_with(1000, aggregation);
    const auto [many, parts] = grad_with(1, aggregation); // every sample alone
    BOOST_CHECK_EQUAL(one, 1);
    BOOST_CHECK_EQUAL(many, 6);
    BOOST_CHECK_MESSAGE(max_abs(whole - parts) <= 1e-5 * max_abs(whole),
                        rl::to_string(aggregation) << ": difference " << max_abs(whole - parts));
  }
}

BOOST_AUTO_TEST_CASE(causal_attention_and_the_explicit_mask_train_alike) {
  // The trainer attends causally without a mask tensor; the explicit mask of causal_mask(valid)
  // (the older path) gives the same loss and gradient: the micro-batch below is right-padded
  // (lengths 3 to 9 in one pass), with and without checkpointing.
  temp_dir dir;
  for (bool checkpointing : {false, true}) {
    BOOST_TEST_CONTEXT("checkpointing " << checkpointing) {
      auto grad_with = [&](bool explicit_mask) {
        auto m = tiny(dir, at::kFloat, "qwen3");
        auto o = small_options();
        o.micro_batch_tokens = 1000;
        o.gradient_checkpointing = checkpointing;
        o.explicit_attention_mask = explicit_mask;
        auto t = train::lora_trainer::create(m, o);
        BOOST_REQUIRE(t);
        randomise(**t, 14);
        auto stats = (*t)->compute_gradients(random_samples(15, 6));
        BOOST_REQUIRE_MESSAGE(stats, why(stats));
        BOOST_CHECK_EQUAL(stats->micro_batches, 1);
        BOOST_CHECK_GT(stats->padded_tokens, stats->tokens); // there is padding
        return std::make_pair(stats->loss, (*t)->gradients().clone());
      };
      const auto [loss_mask, mask] = grad_with(true);
      const auto [loss_causal, causal] = grad_with(false);
      BOOST_CHECK_CLOSE(loss_causal, loss_mask, /*percent=*/1e-4);
      // float32 rounding of the attention's different operation order only.
      BOOST_CHECK_MESSAGE(max_abs(causal - mask) <= 1e-5 * max_abs(mask),
                          "difference " << max_abs(causal - mask) << " of " << max_abs(mask));
    }
  }
}

BOOST_AUTO_TEST_CASE(lora_in_bfloat16_follows_lora_in_float32) {
  // A bfloat16 base: learner.lora_compute_dtype = "base" (the factors cast to bfloat16 in each
  // forward) against "float32" (the activations widened, as PEFT does), both against the same
  // model in float32. The factors and their gradients are float32 either way.
  temp_dir dir;
  auto grad_with = [&](at::ScalarType model_dtype, train::lora_compute_dtype compute,
                       bool checkpointing, double dropout) {
    auto m = tiny(dir, model_dtype);
    auto o = small_options();
    o.lora_compute = compute;
    o.gradient_checkpointing = checkpointing;
    o.lora_dropout = dropout;
    o.seed = 3;
    auto t = train::lora_trainer::create(m, o);
    BOOST_REQUIRE(t);
    randomise(**t, 16, /*scale=*/0.2);
    auto stats = (*t)->compute_gradients(random_samples(17, 5));
    BOOST_REQUIRE_MESSAGE(stats, why(stats));
    BOOST_CHECK((*t)->gradients().scalar_type() == at::kFloat);
    return std::make_pair(stats->loss, (*t)->gradients().clone());
  };
  using train::lora_compute_dtype;
  const auto [loss_ref, ref] = grad_with(at::kFloat, lora_compute_dtype::base, false, 0.0);
  const auto [loss_wide, wide] = grad_with(at::kBFloat16, lora_compute_dtype::float32, false, 0.0);
  const auto [loss_base, base] = grad_with(at::kBFloat16, lora_compute_dtype::base, false, 0.0);
  auto relative = [&](const at::Tensor& g) { return ((g - ref).norm() / ref.norm()).item<double>(); };
  // bfloat16 keeps 8 bits (2^-9 relative per rounding). Seen here: the bfloat16 base with float32
  // LoRA is 2.3 % (norm-relative) off the float32 model's gradient, with bfloat16 LoRA 3.5 %;
  // twice that is the bound.
  BOOST_CHECK_MESSAGE(relative(wide) <= 0.05, "float32 LoRA on bf16: " << relative(wide));
  BOOST_CHECK_MESSAGE(relative(base) <= 0.07, "bf16 LoRA on bf16: " << relative(base));
  BOOST_CHECK_GT(max_abs(base - wide), 0.0); // another path really ran
  BOOST_CHECK_CLOSE(loss_base, loss_ref, /*percent=*/1.0);
  BOOST_CHECK_CLOSE(loss_wide, loss_ref, /*percent=*/1.0);
  // Checkpointing recomputes the same bfloat16 operations, dropout masks included.
  const auto [loss_plain, plain] = grad_with(at::kBFloat16, lora_compute_dtype::base, false, 0.1);
  const auto [loss_ckpt, ckpt] = grad_with(at::kBFloat16, lora_compute_dtype::base, true, 0.1);
  BOOST_CHECK_EQUAL(loss_plain, loss_ckpt);
  // The same operations in the same order (seen: identical); the bound allows for a different
  // order of gradient accumulation.
  BOOST_CHECK_MESSAGE(max_abs(plain - ckpt) <= 1e-6 * max_abs(plain),
                      "checkpointing changed the gradient by " << max_abs(plain - ckpt));
  BOOST_CHECK_GT(max_abs(plain - base), 1e-3 * max_abs(base)); // dropout is on

  BOOST_CHECK(train::parse_lora_compute_dtype("base") == lora_compute_dtype::base);
  BOOST_CHECK(train::parse_lora_compute_dtype("float32") == lora_compute_dtype::float32);
  auto bad = train::parse_lora_compute_dtype("bf16");
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_NE(why(bad).find("expected base or float32, got \"bf16\""), std::string::npos);
}

BOOST_AUTO_TEST_CASE(adamw_schedule_and_clipping_follow_pytorch) {
  // AdamW, two steps, against the formula written out in float64.
  train::adamw_options o;
  o.lr = 0.1;
  o.weight_decay = 0.01;
  auto p = at::tensor({1.0, -2.0, 3.0}, at::kDouble);
  train::adamw opt(p, o);
  std::vector<double> ref{1.0, -2.0, 3.0}, m(3, 0), v(3, 0);
  const std::vector<std::vector<double>> grads{{0.5, -1.0, 0.0}, {0.25, 2.0, -3.0}};
  for (std::size_t t = 1; t <= grads.size(); ++t) {
    auto g = at::tensor(grads[t - 1], at::kDouble);
    opt.step(p, g, o.lr);
    for (int i = 0; i < 3; ++i) {
      ref[i] *= 1 - o.lr * o.weight_decay;
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * grads[t - 1][i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * grads[t - 1][i] * grads[t - 1][i];
      const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
      ref[i] -= o.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
    }
  }
  for (int i = 0; i < 3; ++i)
    BOOST_CHECK_CLOSE(p[i].item<double>(), ref[i], 1e-10);
  BOOST_CHECK_EQUAL(opt.steps(), 2);

  train::lr_schedule s;
  s.kind = train::lr_schedule_kind::cosine;
  s.warmup_steps = 4;
  s.total_steps = 14;
  s.min_ratio = 0.1;
  BOOST_CHECK_CLOSE(s.factor(1), 0.25, 1e-12);
  BOOST_CHECK_CLOSE(s.factor(4), 1.0, 1e-12);
  BOOST_CHECK_CLOSE(s.factor(9), 0.55, 1e-12); // halfway: 0.1 + 0.9 * 0.5
  BOOST_CHECK_CLOSE(s.factor(14), 0.1, 1e-12);
  BOOST_CHECK_CLOSE(s.factor(100), 0.1, 1e-12);
  s.kind = train::lr_schedule_kind::constant;
  BOOST_CHECK_CLOSE(s.factor(2), 0.5, 1e-12);
  BOOST_CHECK_EQUAL(s.factor(50), 1.0);

  auto g = at::tensor({3.0, 4.0}, at::kDouble);
  BOOST_CHECK_CLOSE(train::clip_grad_norm(g, 1.0), 5.0, 1e-12);
  BOOST_CHECK_CLOSE(g[0].item<double>(), 3.0 / (5.0 + 1e-6), 1e-10);
  auto small = at::tensor({0.3, 0.4}, at::kDouble);
  train::clip_grad_norm(small, 1.0);
  BOOST_CHECK_EQUAL(small[1].item<double>(), 0.4); // below the limit: untouched

  train::lr_schedule bad;
  bad.kind = train::lr_schedule_kind::cosine;
  bad.warmup_steps = 10;
  bad.total_steps = 10;
  auto refused = train::check_optimizer_options(o, bad);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_NE(why(refused).find("total_steps"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_step_moves_the_parameters_and_reports_its_figures) {
  temp_dir dir;
  auto m = tiny(dir);
  auto o = small_options();
  o.schedule.warmup_steps = 2;
  auto t = train::lora_trainer::create(m, o);
  BOOST_REQUIRE(t);
  const auto before = (*t)->parameters().clone();
  auto samples = random_samples(5, 4);
  auto stats = (*t)->step(samples);
  BOOST_REQUIRE_MESSAGE(stats, why(stats));
  BOOST_CHECK_EQUAL(stats->step, 1);
  BOOST_CHECK_EQUAL((*t)->steps_done(), 1);
  BOOST_CHECK_CLOSE(stats->lr, 0.5e-2, 1e-9); // warm-up: 1/2 of 1e-2
  BOOST_CHECK_GT(stats->grad_norm, 0);
  BOOST_CHECK_EQUAL(stats->sequences, 4);
  BOOST_CHECK_GT(stats->completion_tokens, 0);
  BOOST_CHECK_GE(stats->padded_tokens, stats->tokens);
  BOOST_CHECK(!at::equal(before, (*t)->parameters()));
  // With B = 0 at the start only B moves in the first step (A's gradient is zero).
  for (const auto& s : (*t)->lora().slots())
    BOOST_CHECK_GT(max_abs(s.b), 0.0);
}

BOOST_AUTO_TEST_CASE(bad_samples_are_refused_before_any_work) {
  temp_dir dir;
  auto m = tiny(dir);
  auto t = train::lora_trainer::create(m, small_options());
  BOOST_REQUIRE(t);
  auto samples = random_samples(6, 3);
  samples[1].completion_tokens[0] = 300;
  samples[2].sampler_logprobs.pop_back();
  const auto before = (*t)->parameters().clone();
  auto stats = (*t)->step(samples);
  BOOST_REQUIRE(!stats);
  const auto text = why(stats);
  BOOST_CHECK_NE(text.find("sample 1: completion token[0] = 300 is outside the vocabulary"),
                 std::string::npos);
  BOOST_CHECK_NE(text.find("sample 2:"), std::string::npos);
  BOOST_CHECK(at::equal(before, (*t)->parameters()));
  BOOST_CHECK_EQUAL((*t)->steps_done(), 0);
  BOOST_CHECK(!(*t)->step({}));

  auto o = small_options();
  o.lora_dropout = 1.0;
  o.target_modules = {"lm_head"};
  auto refused = train::lora_trainer::create(m, o);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_NE(why(refused).find("lora_dropout"), std::string::npos);
  o.lora_dropout = 0;
  auto no_target = train::lora_trainer::create(m, o);
  BOOST_REQUIRE(!no_target);
  BOOST_CHECK_NE(why(no_target).find("name no layer"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(resuming_from_a_checkpoint_is_bit_identical) {
  temp_dir dir;
  auto o = small_options();
  o.lora_dropout = 0.1;
  o.adamw.weight_decay = 0.01;
  o.schedule.kind = train::lr_schedule_kind::cosine;
  o.schedule.warmup_steps = 2;
  o.schedule.total_steps = 8;
  o.loss.kl_coef = 0.05;
  o.seed = 21;
  std::vector<std::vector<train::training_sample>> batches;
  for (int i = 0; i < 5; ++i)
    batches.push_back(random_samples(100 + i, 4));
  const fs::path root = dir / "checkpoints";

  auto m1 = tiny(dir);
  auto t1 = train::lora_trainer::create(m1, o);
  BOOST_REQUIRE(t1);
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE((*t1)->step(batches[i]));
  train::data_cursor cursor;
  cursor.batches_trained = 3;
  cursor.last_batch_id = 42;
  cursor.policy_version = 3;
  auto saved = train::save_checkpoint(root, **t1, cursor);
  BOOST_REQUIRE_MESSAGE(saved, why(saved));
  BOOST_CHECK_EQUAL(saved->dir, "step-000003");
  for (int i = 3; i < 5; ++i)
    BOOST_REQUIRE((*t1)->step(batches[i]));

  auto m2 = tiny(dir);
  auto t2 = train::lora_trainer::create(m2, o);
  BOOST_REQUIRE(t2);
  auto latest = train::latest_checkpoint(root);
  BOOST_REQUIRE_MESSAGE(latest, why(latest));
  BOOST_REQUIRE(latest->has_value());
  auto restored = train::load_checkpoint(root / (*latest)->dir, **t2);
  BOOST_REQUIRE_MESSAGE(restored, why(restored));
  BOOST_CHECK_EQUAL(restored->batches_trained, 3u);
  BOOST_CHECK_EQUAL(restored->last_batch_id, 42u);
  BOOST_CHECK_EQUAL((*t2)->steps_done(), 3);
  for (int i = 3; i < 5; ++i)
    BOOST_REQUIRE((*t2)->step(batches[i]));
  BOOST_CHECK((*t1)->parameters().abs().sum().item<double>() > 0);
  BOOST_CHECK_MESSAGE(at::equal((*t1)->parameters(), (*t2)->parameters()),
                      "resumed parameters differ by "
                        << max_abs((*t1)->parameters() - (*t2)->parameters()));
  const auto s1 = (*t1)->state(), s2 = (*t2)->state();
  BOOST_CHECK(at::equal(s1.exp_avg, s2.exp_avg));
  BOOST_CHECK(at::equal(s1.exp_avg_sq, s2.exp_avg_sq));
  BOOST_CHECK(at::equal(s1.dropout_rng, s2.dropout_rng));

  // With the generator (dropout masks) at another point the result differs: the comparison
  // above could not pass by accident.
  auto m3 = tiny(dir);
  auto t3 = train::lora_trainer::create(m3, o);
  BOOST_REQUIRE(t3);
  BOOST_REQUIRE(train::load_checkpoint(root / "step-000003", **t3));
  auto s3 = (*t3)->state();
  s3.dropout_rng = s2.dropout_rng; // the generator at another point of the stream
  BOOST_REQUIRE((*t3)->restore(s3));
  for (int i = 3; i < 5; ++i)
    BOOST_REQUIRE((*t3)->step(batches[i]));
  BOOST_CHECK(!at::equal((*t1)->parameters(), (*t3)->parameters()));
}

BOOST_AUTO_TEST_CASE(a_crash_while_writing_leaves_the_previous_checkpoint_valid) {
  temp_dir dir;
  const fs::path root = dir / "checkpoints";
  auto m = tiny(dir);
  auto t = train::lora_trainer::create(m, small_options());
  BOOST_REQUIRE(t);
  BOOST_REQUIRE((*t)->step(random_samples(7, 2)));
  auto first = train::save_checkpoint(root, **t, {});
  BOOST_REQUIRE_MESSAGE(first, why(first));

  // What a crash can leave: a half-written temporary directory, a listed directory without its
  // state file (a disk that lost the rename's data), and a torn line at the end of the list.
  fs::create_directories(root / ".tmp-step-000002-999" / "adapter");
  std::ofstream(root / ".tmp-step-000002-999" / "optimizer.safetensors") << "\x10\x00";
  fs::create_directories(root / "step-000005" / "adapter");
  {
    std::ofstream list(root / "checkpoints.jsonl", std::ios::app);
    list << R"({"step": 5, "dir": "step-000005", "unix_ms": 1, "policy_version": 5, )"
            R"("cursor": {"batches_trained": 5, "last_batch_id": 5, "last_coordinator_step": 5, )"
            R"("policy_version": 5}})"
         << "\n"
         << R"({"step": 9, "dir": "step-0000)";
  }
  auto listed = train::list_checkpoints(root);
  BOOST_REQUIRE_MESSAGE(listed, why(listed));
  BOOST_CHECK_EQUAL(listed->size(), 2u);
  auto latest = train::latest_checkpoint(root);
  BOOST_REQUIRE_MESSAGE(latest, why(latest));
  BOOST_REQUIRE(latest->has_value());
  BOOST_CHECK_EQUAL((*latest)->dir, first->dir);
  auto m2 = tiny(dir);
  auto t2 = train::lora_trainer::create(m2, small_options());
  BOOST_REQUIRE(train::load_checkpoint(root / (*latest)->dir, **t2));
  BOOST_CHECK(at::equal((*t)->parameters(), (*t2)->parameters()));

  // The next save cleans up the temporary, ends the torn line and is listed after it.
  BOOST_REQUIRE((*t)->step(random_samples(8, 2)));
  auto second = train::save_checkpoint(root, **t, {});
  BOOST_REQUIRE_MESSAGE(second, why(second));
  BOOST_CHECK(!fs::exists(root / ".tmp-step-000002-999"));
  listed = train::list_checkpoints(root);
  BOOST_REQUIRE_MESSAGE(listed, why(listed));
  BOOST_REQUIRE_EQUAL(listed->size(), 3u);
  BOOST_CHECK_EQUAL(listed->back().dir, "step-000002");
  BOOST_CHECK_EQUAL((*train::latest_checkpoint(root))->dir, "step-000002");

  // A malformed line that is complete is an error, not silently skipped.
  {
    std::ofstream list(root / "checkpoints.jsonl", std::ios::app);
    list << R"({"step": -1, "dir": "x", "cursor": {}})" << "\n";
  }
  auto broken = train::list_checkpoints(root);
  BOOST_REQUIRE(!broken);
  BOOST_CHECK_NE(why(broken).find("checkpoints.jsonl:5: step"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(checkpoints_are_pruned_and_must_fit_the_learner) {
  temp_dir dir;
  const fs::path root = dir / "checkpoints";
  auto m = tiny(dir);
  auto t = train::lora_trainer::create(m, small_options());
  BOOST_REQUIRE(t);
  for (int i = 0; i < 4; ++i) {
    BOOST_REQUIRE((*t)->step(random_samples(30 + i, 2)));
    BOOST_REQUIRE(train::save_checkpoint(root, **t, {}, /*keep_last=*/2));
  }
  BOOST_CHECK(!fs::exists(root / "step-000001"));
  BOOST_CHECK(!fs::exists(root / "step-000002"));
  BOOST_CHECK(fs::exists(root / "step-000003"));
  BOOST_CHECK(fs::exists(root / "step-000004"));
  // The saved adapter is a PEFT adapter of the model.
  auto adapter = model::load_lora_adapter(root / "step-000004" / "adapter", m.config(),
                                          at::TensorOptions().dtype(at::kFloat));
  BOOST_REQUIRE_MESSAGE(adapter, why(adapter));
  BOOST_CHECK_EQUAL(adapter->modules.size(), 14u);

  auto o = small_options();
  o.lora_r = 8;
  auto m2 = tiny(dir);
  auto other = train::lora_trainer::create(m2, o);
  BOOST_REQUIRE(other);
  auto refused = train::load_checkpoint(root / "step-000004", **other);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_NE(why(refused).find("rank 4, this learner trains rank 8"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(policy_gradient_steps_raise_the_reward) {
  // The golden qwen2 model (weights with std 0.1, so logits spread) learns, through the whole
  // learner path (advantages, samples, trainer, adapter files), to write tokens of a target set;
  // the generation engine samples every batch from the adapter the learner just wrote.
  const fs::path golden = fs::path(KBRL_TEST_DATA) / "model" / "golden" / "qwen2";
  temp_dir dir;
  auto policy = model::transformer::load(golden);
  auto sampler_model = model::transformer::load(golden);
  BOOST_REQUIRE_MESSAGE(policy, why(policy));
  BOOST_REQUIRE_MESSAGE(sampler_model, why(sampler_model));
  model::generation_engine_options eo;
  eo.slots = 32;
  eo.max_sequence_length = 32;
  auto engine = model::generation_engine::create(*sampler_model, std::nullopt, eo);
  BOOST_REQUIRE_MESSAGE(engine, why(engine));

  train::learner_settings s;
  s.run_dir = dir.path.string();
  s.publish_bytes = false;
  s.checkpoint_every = 0;
  s.trainer.lora_r = 8;
  s.trainer.lora_alpha = 16;
  s.trainer.adamw.lr = 2e-2;
  s.trainer.loss.kind = rl::policy_loss_kind::ppo_clip;
  s.trainer.seed = 1;
  auto core = train::learner_core::start_with(
    std::make_unique<model::transformer>(std::move(*policy)), "golden-qwen2", s);
  BOOST_REQUIRE_MESSAGE(core, why(core));

  auto rewarded = [](int32_t token) { return token % 16 == 5; }; // 16 of 256 tokens
  const std::vector<std::vector<int32_t>> prompts{
    {10, 20, 30, 40}, {7, 77, 177, 17}, {200, 100, 50, 25}, {3, 1, 4, 1}};
  const int group = 8, steps = 30;
  std::vector<double> mean_reward;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    const auto& update = (*core)->latest();
    auto adapter = model::load_lora_adapter(update.adapter_dir, sampler_model->config(),
                                            at::TensorOptions().dtype(at::kFloat));
    BOOST_REQUIRE_MESSAGE(adapter, why(adapter));
    BOOST_REQUIRE(engine->set_adapter(&*adapter, update.version));
    std::vector<generation_request> requests;
    for (std::size_t p = 0; p < prompts.size(); ++p)
      for (int g = 0; g < group; ++g) {
        generation_request r;
        r.id = requests.size();
        r.prompt_tokens = prompts[p];
        r.params.max_new_tokens = 8;
        r.params.seed = static_cast<uint64_t>(step * 1000 + requests.size());
        r.params.stop_token_ids = {};
        requests.push_back(r);
      }
    auto results = engine->generate(requests);
    trajectory_batch batch;
    batch.id = static_cast<uint64_t>(step);
    double total = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& res = results[i];
      BOOST_REQUIRE(res.finish != finish_reason::error);
      int hits = 0;
      for (auto tok : res.completion_tokens)
        hits += rewarded(tok) ? 1 : 0;
      trajectory t;
      t.id = i;
      t.group_id = i / group;
      turn u;
      u.prompt_tokens = requests[i].prompt_tokens;
      u.completion_tokens = res.completion_tokens;
      u.logprobs = res.logprobs;
      u.policy_version = res.policy_version;
      u.score = res.completion_tokens.empty()
                  ? 0
                  : static_cast<double>(hits) / static_cast<double>(res.completion_tokens.size());
      total += u.score;
      t.turns.push_back(u);
      batch.trajectories.push_back(t);
    }
    mean_reward.push_back(total / static_cast<double>(results.size()));
    auto update2 = (*core)->train(batch);
    BOOST_REQUIRE_MESSAGE(update2, why(update2));
  }
  const double seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto mean_of = [&](int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i)
      s += mean_reward[i];
    return s / (to - from);
  };
  const double early = mean_of(0, 5), late = mean_of(steps - 5, steps);
  BOOST_TEST_MESSAGE("policy-gradient learning: mean reward " << early << " over the first 5 "
                     "steps, " << late << " over the last 5 (" << steps << " steps, " << seconds
                     << " s)");
  BOOST_CHECK_GT(late, early + 0.25);
  BOOST_CHECK_EQUAL((*core)->latest().version, static_cast<uint64_t>(steps));
}

BOOST_AUTO_TEST_SUITE_END()

// Measurements, in a suite of their own that is disabled: Boost.Test runs the disabled test
// cases of a suite that is selected by name (ctest's --run_test=trainer would run them).
BOOST_AUTO_TEST_SUITE(trainer_measurements, *boost::unit_test::disabled())

BOOST_AUTO_TEST_CASE(measure_a_step_of_a_small_model) {
  // Run with --run_test=trainer_measurements:
  // one training step of a model of 8 layers, hidden 512, vocabulary 32000 (about 60M
  // parameters) on the CPU in float32, on 4 sequences of 256 prompt + 768 completion tokens in
  // one micro-batch, with and without gradient checkpointing and chunked logits.
  temp_dir dir;
  auto c = model::tiny_model_config("qwen2");
  c.vocab_size = 32000;
  c.hidden_size = 512;
  c.intermediate_size = 1536;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  auto gen = at::detail::createCPUGenerator(1);
  std::vector<train::training_sample> samples(4);
  for (auto& s : samples) {
    auto ids = at::randint(32000, {1024}, gen);
    for (int64_t t = 0; t < 1024; ++t)
      (t < 256 ? s.prompt_tokens : s.completion_tokens)
        .push_back(static_cast<int32_t>(ids[t].item<int64_t>()));
    s.sampler_logprobs.assign(768, -10.4f);
    s.advantage = 1.0;
  }
  struct setup {
    const char* name;
    bool checkpointing;
    int64_t chunk;
  };
  for (const auto& v : {setup{"plain autograd, logits at once", false, 1 << 20},
                        setup{"checkpointed layers, logits in chunks of 256", true, 256}}) {
    auto m = tiny_transformer(dir, c);
    auto o = small_options();
    o.lora_r = 16;
    o.lora_alpha = 32;
    o.micro_batch_tokens = 4096;
    o.gradient_checkpointing = v.checkpointing;
    o.logprob_chunk = v.chunk;
    auto t = train::lora_trainer::create(m, o);
    BOOST_REQUIRE(t);
    BOOST_REQUIRE((*t)->step(samples)); // warm-up: allocator, thread pools
    reset_peak_memory();
    const int64_t before = peak_resident_bytes();
    auto stats = (*t)->step(samples);
    BOOST_REQUIRE_MESSAGE(stats, why(stats));
    const int64_t peak = peak_resident_bytes() - before;
    BOOST_TEST_MESSAGE("small qwen2 (60M), CPU float32, " << v.name << ": step of "
                       << stats->tokens << " tokens in " << stats->seconds << " s = "
                       << stats->tokens / stats->seconds << " tokens/s, peak memory +"
                       << peak / (1024 * 1024) << " MiB");
  }
}

BOOST_AUTO_TEST_SUITE_END()
