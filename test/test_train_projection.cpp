// Tests of the stacked training projections (runtime/model/train_projection.hpp): a model whose
// q|k|v and gate|up weights are stacked (laid out for the fused path) trains through one
// autograd node per projection group; its forward and every LoRA factor's gradient must equal
// those of the same model with separate weights (run_layer through linear_layer::forward), for
// qwen2 (biases), qwen3 (q/k norm) and llama, with factors in the model's dtype and with
// float32 factors cast to it (compute_in_input_dtype). On the CPU in float64, and on a GPU
// (ctest -R train_projection on the GPU machine) in float32 and bfloat16 with the fused kernels.

#include <boost/test/unit_test.hpp>

#include "model_fixture.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/fused_ops.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/train_projection.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>

using namespace kbrl::model;
using kbrl::test::check_close;
using kbrl::test::temp_dir;
using kbrl::test::tiny_transformer;

namespace {

/// A random adapter on every projection (non-zero B), its factors as `factor_dtype` leaves
/// that take gradients.
lora_adapter trainable_adapter(const model_config& config, at::ScalarType factor_dtype,
                               uint64_t seed) {
  lora_config lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = lora_module_names();
  auto ad = random_lora_adapter(config, lc, seed, /*std=*/0.05);
  for (auto& [name, f] : ad.modules) {
    f.a = f.a.to(factor_dtype).requires_grad_(true);
    f.b = f.b.to(factor_dtype).requires_grad_(true);
  }
  return ad;
}

struct training_pass {
  at::Tensor hidden;
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> grads; // module -> (dA, dB)
};

/// forward() with autograd over a batch of two rows, and the factors' gradients of a fixed
/// random projection of the hidden states.
training_pass train_once(transformer& m, lora_adapter& ad, bool compute_in_input_dtype) {
  BOOST_REQUIRE(attach_lora_adapter(m, ad));
  for (auto& [name, layer] : m.linear_layers())
    layer->lora.compute_in_input_dtype = compute_in_input_dtype;
  const auto device = m.options().device;
  auto gen = at::detail::createCPUGenerator(11);
  const auto ids = at::randint(m.config().vocab_size, {2, 6}, gen, at::TensorOptions(at::kLong))
                     .to(device);
  const auto positions = at::arange(6, at::kLong).repeat({2, 1}).to(device);
  const auto valid = at::ones({2, 6}, at::TensorOptions(at::kBool).device(device));
  const auto hidden = m.forward(ids, positions, causal_mask(valid));
  const auto probe = at::randn(hidden.sizes(), gen, at::TensorOptions(at::kDouble))
                       .to(device, hidden.scalar_type());
  (hidden * probe).sum().backward();
  training_pass out{hidden.detach(), {}};
  for (auto& [name, f] : ad.modules) {
    BOOST_REQUIRE_MESSAGE(f.a.grad().defined() && f.b.grad().defined(), name << ": no gradient");
    out.grads[name] = {f.a.grad().clone(), f.b.grad().clone()};
  }
  return out;
}

/// |a - b| <= rel * max|b|.
void check_relative(const at::Tensor& a, const at::Tensor& b, double rel, const std::string& what) {
  BOOST_CHECK_EQUAL(a.scalar_type(), b.scalar_type());
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  check_close(a, b, rel * scale, what);
}

} // namespace

BOOST_AUTO_TEST_SUITE(train_projection)

BOOST_AUTO_TEST_CASE(stacked_training_equals_separate_layers) {
  temp_dir dir;
  struct variant {
    const char* name;
    at::ScalarType factor_dtype;
    bool compute_in_input_dtype;
    double rel;
  };
  // float64 throughout: only the GEMMs' summation order differs. float32 factors cast to the
  // float64 model: their gradients are rounded to float32 at the end on both sides.
  const variant variants[] = {{"float64 factors", at::kDouble, false, 1e-10},
                              {"float32 factors cast to float64", at::kFloat, true, 1e-6}};
  for (const auto& arch : {"qwen2", "qwen3", "llama"})
    for (const auto& v : variants) {
      BOOST_TEST_CONTEXT(arch << ", " << v.name) {
        const auto config = tiny_model_config(arch);
        auto plain = tiny_transformer(dir, config, 7, {at::kCPU, at::kDouble});
        auto stacked = tiny_transformer(dir, config, 7,
                                        {at::kCPU, at::kDouble, inference_path::fused});
        auto ad_plain = trainable_adapter(config, v.factor_dtype, 3);
        auto ad_stacked = trainable_adapter(config, v.factor_dtype, 3);
        const auto want = train_once(plain, ad_plain, v.compute_in_input_dtype);
        const auto got = train_once(stacked, ad_stacked, v.compute_in_input_dtype);

        // The stacked model trains through the stacked node, the plain one cannot.
        const auto x = at::zeros({1, config.hidden_size}, at::kDouble);
        const auto& sa = stacked.layers()[0].self_attn;
        const auto& pa = plain.layers()[0].self_attn;
        BOOST_CHECK(stacked_projection_applies(x, sa.qkv_weight, sa.qkv_bias,
                                               {&sa.q_proj, &sa.k_proj, &sa.v_proj}));
        BOOST_CHECK(!stacked_projection_applies(x, pa.qkv_weight, pa.qkv_bias,
                                                {&pa.q_proj, &pa.k_proj, &pa.v_proj}));
        const auto& sm = stacked.layers()[0].mlp;
        BOOST_CHECK(stacked_projection_applies(x, sm.gate_up_weight, sm.gate_up_bias,
                                               {&sm.gate_proj, &sm.up_proj}));

        check_relative(got.hidden, want.hidden, 1e-10, "hidden states");
        for (const auto& [name, g] : want.grads) {
          check_relative(got.grads.at(name).first, g.first, v.rel, name + " lora_A grad");
          check_relative(got.grads.at(name).second, g.second, v.rel, name + " lora_B grad");
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(stacked_training_on_cuda_equals_separate_layers) {
  if (!at::hasCUDA()) {
    BOOST_TEST_MESSAGE("no CUDA device: stacked_training_on_cuda_equals_separate_layers checks "
                       "nothing here");
    return;
  }
  // A CUDA model is stacked (automatic path); one loaded with inference_path::unfused keeps
  // separate weights. Both run the fused RMSNorm / RoPE / SwiGLU kernels where compiled in.
  temp_dir dir;
  struct precision {
    at::ScalarType dtype;
    double rel;
  };
  // bfloat16: two GEMM orders, each rounding to 8 bits, through two layers and back
  for (const auto& p : {precision{at::kFloat, 1e-4}, precision{at::kBFloat16, 5e-2}})
    for (const auto& arch : {"qwen2", "qwen3"}) {
      BOOST_TEST_CONTEXT(arch << ", " << c10::toString(p.dtype)) {
        const auto config = tiny_model_config(arch);
        auto plain = tiny_transformer(dir, config, 7,
                                      {at::kCUDA, p.dtype, inference_path::unfused});
        auto stacked = tiny_transformer(dir, config, 7, {at::kCUDA, p.dtype});
        BOOST_REQUIRE(stacked.layers()[0].self_attn.qkv_weight.defined());
        BOOST_REQUIRE(!plain.layers()[0].self_attn.qkv_weight.defined());
        auto ad_plain = trainable_adapter(config, at::kFloat, 3);
        auto ad_stacked = trainable_adapter(config, at::kFloat, 3);
        for (auto* ad : {&ad_plain, &ad_stacked})
          for (auto& [name, f] : ad->modules) {
            f.a = f.a.detach().to(at::kCUDA).requires_grad_(true);
            f.b = f.b.detach().to(at::kCUDA).requires_grad_(true);
          }
        const auto want = train_once(plain, ad_plain, true);
        const auto got = train_once(stacked, ad_stacked, true);
        check_relative(got.hidden, want.hidden, p.rel, "hidden states");
        for (const auto& [name, g] : want.grads) {
          check_relative(got.grads.at(name).first, g.first, p.rel, name + " lora_A grad");
          check_relative(got.grads.at(name).second, g.second, p.rel, name + " lora_B grad");
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(parts_without_a_term_and_unused_outputs) {
  // q|k|v with a term on k only, v's output never used: v's columns get no gradient, k's
  // factors the same gradients as through k_proj.forward, and the input's gradient matches.
  const auto o = at::TensorOptions(at::kDouble);
  auto gen = at::detail::createCPUGenerator(5);
  auto rnd = [&](std::vector<int64_t> shape) { return at::randn(shape, gen, o); };
  linear_layer q{rnd({8, 6}), rnd({8})}, k{rnd({4, 6}), rnd({4})}, v{rnd({4, 6}), rnd({4})};
  auto w = fuse_rows({&q.weight, &k.weight, &v.weight});
  auto b = fuse_rows({&q.bias, &k.bias, &v.bias});
  const auto a0 = rnd({2, 6}), b0 = rnd({4, 2});
  const auto x0 = rnd({3, 5, 6});
  const auto gq = rnd({3, 5, 8}), gk = rnd({3, 5, 4});

  auto run = [&](bool fused) {
    k.lora.a = a0.clone().requires_grad_(true);
    k.lora.b = b0.clone().requires_grad_(true);
    k.lora.scaling = 1.5;
    auto x = x0.clone().requires_grad_(true);
    BOOST_CHECK_EQUAL(stacked_projection_applies(x, w, b, {&q, &k, &v}), true);
    const auto outs = train_projections(x, w, b, {&q, &k, &v}, fused);
    BOOST_REQUIRE_EQUAL(outs.size(), 3u);
    (outs[0] * gq).sum().add((outs[1] * gk).sum()).backward();
    return std::make_tuple(outs[0].detach(), outs[1].detach(), outs[2].detach(), x.grad(),
                           k.lora.a.grad(), k.lora.b.grad());
  };
  const auto [q1, k1, v1, gx1, ga1, gb1] = run(true);
  const auto [q0, k0, v0, gx0, ga0, gb0] = run(false);
  check_relative(q1, q0, 1e-12, "q");
  check_relative(k1, k0, 1e-12, "k");
  check_relative(v1, v0, 1e-12, "v");
  check_relative(gx1, gx0, 1e-12, "input gradient");
  check_relative(ga1, ga0, 1e-12, "k lora_A gradient");
  check_relative(gb1, gb0, 1e-12, "k lora_B gradient");

  // The stacked output: the three side by side.
  const auto stacked = train_stacked_projection(x0, w, b, {&q, &k, &v}, true);
  check_relative(stacked, at::cat({q0, k0, v0}, -1), 1e-12, "stacked output");

  // LoRA dropout, a float32 term on a float64 input (PEFT's way) or a weight that takes a
  // gradient: the separate layers run instead.
  k.lora.dropout = 0.1;
  k.lora.dropout_generator = at::detail::createCPUGenerator(1);
  BOOST_CHECK(!stacked_projection_applies(x0, w, b, {&q, &k, &v}));
  k.lora.dropout = 0;
  k.lora.a = a0.to(at::kFloat);
  k.lora.b = b0.to(at::kFloat);
  BOOST_CHECK(!stacked_projection_applies(x0, w, b, {&q, &k, &v}));
  k.lora.compute_in_input_dtype = true;
  BOOST_CHECK(stacked_projection_applies(x0, w, b, {&q, &k, &v}));
  BOOST_CHECK(!stacked_projection_applies(x0, w.detach().requires_grad_(true), b, {&q, &k, &v}));
  // One part is its own stack; another weight is not.
  BOOST_CHECK(stacked_projection_applies(x0, q.weight, q.bias, {&q}));
  BOOST_CHECK(!stacked_projection_applies(x0, k.weight, q.bias, {&q}));
}

BOOST_AUTO_TEST_SUITE_END()
