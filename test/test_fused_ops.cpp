// Tests of the fused inference path (runtime/model/fused_ops.hpp, runtime/model/cuda/): each
// fused operation against run_layer()'s libtorch composition, written out again here, and the
// whole model's logits with the fused path on and off.
//
// Everywhere (CPU): the dispatch falls back to the composition (equal to it), fuse_rows() leaves
// views that rows_of() recognises and the weights' bytes unchanged, fused_projection() equals
// the separate layers with biases and LoRA terms, and a model forced onto the fused path
// (inference_path::fused: fused GEMMs, pending residual, per-op fallbacks) decodes the logits and
// fills the kv cache as run_layer() does, for qwen2 (biases), qwen3 (q/k norm) and llama, with
// and without an adapter, with batch > 1 and positions that differ per row.
// On a machine with CUDA (the GPU machine: ctest -R fused_ops): each kernel in float32 (tight)
// and bfloat16 / float16 (stated tolerances) on odd shapes, GQA and per-row positions, and the
// automatic path (fused under InferenceMode) against unfused decoding.

#include <boost/test/unit_test.hpp>

#include "model_fixture.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/decode_linear.hpp"
#include "runtime/model/fused_ops.hpp"
#include "runtime/model/kv_cache.hpp"
#include "runtime/model/logprob_gradient.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/rotary.hpp"
#include "runtime/model/token_logprobs.hpp"
#include "runtime/model/train_ops.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <cmath>

using namespace kbrl::model;
using kbrl::test::check_close;
using kbrl::test::max_abs_diff;
using kbrl::test::temp_dir;
using kbrl::test::tiny_transformer;

namespace {

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, const at::TensorOptions& o) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen, at::TensorOptions(at::kFloat)).to(o);
}

/// RMSNorm weights near 1, as trained models have them.
at::Tensor norm_weight(int64_t dim, uint64_t seed, const at::TensorOptions& o) {
  return (randn({dim}, seed, at::TensorOptions(at::kFloat)) * 0.2 + 1.0).to(o);
}

/// Exactly equal (same shape, every element), naming `what`.
void check_equal(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  BOOST_REQUIRE_MESSAGE(a.sizes() == b.sizes(), what << ": shapes " << a.sizes() << " and "
                                                     << b.sizes());
  BOOST_CHECK_MESSAGE(at::equal(a.cpu(), b.cpu()),
                      what << ": differ, max |difference| " << max_abs_diff(a, b));
}

/// |a - b| <= rel * max|b| (+ a tiny floor for all-zero references).
void check_relative(const at::Tensor& a, const at::Tensor& b, double rel, const std::string& what) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-6);
  check_close(a, b, rel * scale, what + " (scale " + std::to_string(scale) + ")");
}

/// run_layer()'s RoPE and cache write, written out: views of the projection, per-head RMSNorm
/// (q_norm defined), apply_rotary, scatter_ into the cache at the positions.
attention_inputs reference_rope(const at::Tensor& qkv, const qkv_layout& l,
                                const rotary_embedding& rot, const at::Tensor& q_norm,
                                const at::Tensor& k_norm, double eps, const at::Tensor& positions,
                                const at::Tensor& cache_k, const at::Tensor& cache_v) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), d = l.head_dim;
  auto q = qkv.narrow(-1, 0, l.heads * d).reshape({batch, seq, l.heads, d});
  auto k = qkv.narrow(-1, l.heads * d, l.kv_heads * d).reshape({batch, seq, l.kv_heads, d});
  auto v = qkv.narrow(-1, (l.heads + l.kv_heads) * d, l.kv_heads * d)
             .reshape({batch, seq, l.kv_heads, d});
  if (q_norm.defined()) {
    q = rms_norm(q, q_norm, eps);
    k = rms_norm(k, k_norm, eps);
  }
  q = apply_rotary(q.transpose(1, 2), rot);
  k = apply_rotary(k.transpose(1, 2), rot);
  v = v.transpose(1, 2);
  if (!cache_k.defined())
    return {q, k, v};
  const auto where =
    positions.reshape({batch, 1, seq, 1}).expand({batch, l.kv_heads, seq, d});
  cache_k.scatter_(2, where, k);
  cache_v.scatter_(2, where, v);
  return {q, cache_k, cache_v};
}

/// Positions [batch, seq] that differ per row: row b starts at 3 b + 1.
at::Tensor staggered_positions(int64_t batch, int64_t seq, const at::Device& device) {
  return (at::arange(seq, at::kLong).unsqueeze(0) + 3 * at::arange(batch, at::kLong).unsqueeze(1)
          + 1)
    .to(device);
}

/// A random LoRA adapter on every projection with non-zero B (so every slice gets a term).
lora_adapter full_adapter(const model_config& config, uint64_t seed) {
  lora_config lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = lora_module_names();
  return random_lora_adapter(config, lc, seed, /*std=*/0.05);
}

/// Prefill of three sequences of different lengths into slots 0..2, then `steps` decode steps of
/// all three together: the logits of every step, [steps + 1, 3, vocab] (the prefill's last
/// token's logits first), and the cache it leaves.
struct decode_run {
  at::Tensor logits;
  std::vector<at::Tensor> keys, values;
};

decode_run decode(const transformer& m, const at::TensorOptions& cache_options, int64_t steps) {
  const auto device = cache_options.device();
  const std::vector<int64_t> prompts{3, 7, 5};
  const int64_t slots = 3, max_len = 24;
  kv_cache cache(m.config(), slots, max_len, cache_options);
  std::vector<at::Tensor> rows;
  auto last = at::zeros({slots, m.config().vocab_size}, at::kFloat);
  for (int64_t s = 0; s < slots; ++s) {
    const auto ids = ((at::arange(prompts[s], at::kLong) * 37 + 11 * s + 5) % 250).unsqueeze(0);
    const auto pos = at::arange(prompts[s], at::kLong).unsqueeze(0);
    const auto hidden = m.forward(ids.to(device), pos.to(device),
                                  cache_mask(pos, prompts[s]).to(device), {&cache, s, prompts[s]});
    last[s].copy_(m.logits(hidden)[0][prompts[s] - 1].cpu().to(at::kFloat));
  }
  rows.push_back(last);
  for (int64_t t = 0; t < steps; ++t) {
    auto ids = at::zeros({slots, 1}, at::kLong), pos = at::zeros({slots, 1}, at::kLong);
    for (int64_t s = 0; s < slots; ++s) {
      ids[s][0] = (t * 53 + s * 29 + 3) % 250;
      pos[s][0] = prompts[s] + t;
    }
    const int64_t key_len = 16;
    const auto hidden = m.forward(ids.to(device), pos.to(device),
                                  cache_mask(pos, key_len).to(device), {&cache, 0, key_len});
    rows.push_back(m.logits(hidden).squeeze(1).cpu().to(at::kFloat));
  }
  decode_run out;
  out.logits = at::stack(rows);
  for (int64_t l = 0; l < cache.layers(); ++l) {
    out.keys.push_back(cache.keys(l).cpu().to(at::kFloat));
    out.values.push_back(cache.values(l).cpu().to(at::kFloat));
  }
  return out;
}

bool skip_without_cuda(const char* test) {
  if (at::hasCUDA() && fused_kernels_compiled_in())
    return false;
  BOOST_TEST_MESSAGE((at::hasCUDA() ? "fused kernels not compiled in" : "no CUDA device")
                     << ": " << test << " checks nothing here");
  return true;
}

/// A dtype and the tolerance of a fused kernel against the composition, relative to the
/// largest reference value: float32 agrees to float rounding of a reordered sum; bfloat16 and
/// float16 to one unit in the last place of the output (2^-8, 2^-11 relative), where the
/// reordered float32 sum tips a rounding.
struct precision {
  at::ScalarType dtype;
  double rel;
};
const std::vector<precision> kernel_precisions{
  {at::kFloat, 1e-6}, {at::kBFloat16, 1.0 / 128}, {at::kHalf, 1.0 / 1024}};

} // namespace

BOOST_AUTO_TEST_SUITE(fused_ops)

// ---- everywhere ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(on_the_cpu_every_op_is_the_composition) {
  BOOST_CHECK(!fused_kernel_applies(at::zeros({2, 3})));
  const auto o = at::TensorOptions(at::kFloat);
  const auto x = randn({2, 3, 24}, 1, o), delta = randn({2, 3, 24}, 2, o);
  const auto w = norm_weight(24, 3, o);
  auto both = add_rms_norm(x, delta, w, 1e-6);
  check_equal(both.residual, x + delta, "residual");
  check_equal(both.normed, rms_norm(x + delta, w, 1e-6), "normed");
  auto alone = add_rms_norm(x, at::Tensor{}, w, 1e-6);
  BOOST_CHECK(alone.residual.is_same(x));
  check_equal(alone.normed, rms_norm(x, w, 1e-6), "normed without delta");

  const auto gate_up = randn({3, 2, 10}, 4, o);
  check_equal(swiglu(gate_up),
              at::silu(gate_up.narrow(-1, 0, 5)) * gate_up.narrow(-1, 5, 5), "swiglu");
  BOOST_CHECK_THROW(swiglu(randn({2, 7}, 5, o)), c10::Error);

  // GQA 4 / 2, head_dim 8, batch 2, seq 3, per-row positions, q/k norm on and off.
  const qkv_layout l{4, 2, 8};
  const auto qkv = randn({2, 3, (4 + 2 * 2) * 8}, 6, o);
  const auto pos = staggered_positions(2, 3, at::kCPU);
  const auto rot = make_rotary_embedding(at::rand({4}), pos, at::kFloat);
  for (bool normed : {false, true}) {
    BOOST_TEST_CONTEXT((normed ? "q/k norm" : "no q/k norm")) {
      const auto qn = normed ? norm_weight(8, 7, o) : at::Tensor{};
      const auto kn = normed ? norm_weight(8, 8, o) : at::Tensor{};
      auto ck = randn({2, 2, 12, 8}, 9, o), cv = randn({2, 2, 12, 8}, 10, o);
      auto rk = ck.clone(), rv = cv.clone();
      const auto got = rope_qkv(qkv, l, rot, qn, kn, 1e-6, pos, ck, cv);
      const auto want = reference_rope(qkv, l, rot, qn, kn, 1e-6, pos, rk, rv);
      check_equal(got.q, want.q, "q");
      check_equal(ck, rk, "cached keys");
      check_equal(cv, rv, "cached values");
      BOOST_CHECK(got.keys.is_same(ck));
      const auto fresh = rope_qkv(qkv, l, rot, qn, kn, 1e-6, pos, {}, {});
      const auto fresh_want = reference_rope(qkv, l, rot, qn, kn, 1e-6, pos, {}, {});
      check_equal(fresh.keys, fresh_want.keys, "fresh keys");
      check_equal(fresh.values, fresh_want.values, "fresh values");
    }
  }
  BOOST_CHECK_THROW(rope_qkv(randn({2, 3, 50}, 11, o), l, rot, {}, {}, 1e-6, pos, {}, {}),
                    c10::Error);

  const auto lw = randn({6, 8}, 12, o), lb = randn({6}, 13, o), lx = randn({1, 1, 8}, 14, o);
  check_equal(decode_linear(lx, lw, lb), at::linear(lx, lw, lb), "decode_linear");
  const auto lgu = randn({1, 1, 16}, 15, o);
  check_equal(swiglu_linear(lgu, lw, {}), at::linear(swiglu(lgu), lw), "swiglu_linear");
  // one decode token's projection + RoPE as one kernel: not on the CPU (the caller runs both)
  linear_layer pq{randn({32, 8}, 16, o), {}}, pk{randn({16, 8}, 17, o), {}},
    pv{randn({16, 8}, 18, o), {}};
  const auto pw = fuse_rows({&pq.weight, &pk.weight, &pv.weight});
  const auto one = staggered_positions(1, 1, at::kCPU);
  auto ck = randn({1, 2, 12, 8}, 19, o), cv = randn({1, 2, 12, 8}, 20, o);
  BOOST_CHECK(!decode_rope_qkv(randn({1, 1, 8}, 21, o), pw, {}, {&pq, &pk, &pv}, l,
                               make_rotary_embedding(at::rand({4}), one, at::kFloat), one, ck, cv));
}

BOOST_AUTO_TEST_CASE(fused_rows_are_views_and_projections_equal_the_layers) {
  const auto o = at::TensorOptions(at::kFloat);
  linear_layer q{randn({8, 6}, 1, o), randn({8}, 2, o)}, k{randn({4, 6}, 3, o), randn({4}, 4, o)},
    v{randn({4, 6}, 5, o), randn({4}, 6, o)};
  const auto q_before = q.weight.clone(), v_bias_before = v.bias.clone();
  const auto w = fuse_rows({&q.weight, &k.weight, &v.weight});
  const auto b = fuse_rows({&q.bias, &k.bias, &v.bias});
  BOOST_CHECK_EQUAL(w.size(0), 16);
  check_equal(q.weight, q_before, "q weight after fusing");
  check_equal(v.bias, v_bias_before, "v bias after fusing");
  BOOST_CHECK(rows_of(w, {&q.weight, &k.weight, &v.weight}));
  BOOST_CHECK(rows_of(b, {&q.bias, &k.bias, &v.bias}));
  BOOST_CHECK(!rows_of(w, {&k.weight, &q.weight, &v.weight})); // order matters
  BOOST_CHECK(!rows_of(w, {&q.weight, &k.weight}));             // must cover it
  BOOST_CHECK(rows_of(at::Tensor{}, {&q.lora.a, &k.lora.a}));  // nothing, nothing
  BOOST_CHECK(!fuse_rows({&q.lora.a, &k.lora.a}).defined());

  const auto x = randn({2, 3, 6}, 7, o);
  const auto separate = [&] { return at::cat({q.forward(x), k.forward(x), v.forward(x)}, -1); };
  check_close(fused_projection(x, w, b, {&q, &k, &v}), separate(), 1e-5, "fused, no LoRA");
  // A LoRA term on k only: added onto k's slice alone.
  k.lora.a = randn({2, 6}, 8, o);
  k.lora.b = randn({4, 2}, 9, o);
  k.lora.scaling = 1.5;
  check_close(fused_projection(x, w, b, {&q, &k, &v}), separate(), 1e-5, "fused, LoRA on k");
  // A replaced weight breaks the aliasing: three GEMMs again, still right.
  v.weight = randn({4, 6}, 10, o);
  BOOST_CHECK(!rows_of(w, {&q.weight, &k.weight, &v.weight}));
  check_close(fused_projection(x, w, b, {&q, &k, &v}), separate(), 1e-5, "after a replacement");
}

BOOST_AUTO_TEST_CASE(the_fused_path_decodes_as_run_layer_does_on_the_cpu) {
  temp_dir dir;
  for (const auto& arch : {"qwen2", "qwen3", "llama"}) {
    BOOST_TEST_CONTEXT(arch) {
      const auto config = tiny_model_config(arch);
      auto plain = tiny_transformer(dir, config);
      auto m = tiny_transformer(dir, config, 7, {at::kCPU, at::kFloat, inference_path::fused});
      // The CPU model keeps the checkpoint's layout; the fused one stacks, with the same bytes.
      BOOST_CHECK(!plain.layers()[0].self_attn.qkv_weight.defined());
      const auto& a = m.layers()[1].self_attn;
      BOOST_CHECK(rows_of(a.qkv_weight, {&a.q_proj.weight, &a.k_proj.weight, &a.v_proj.weight}));
      BOOST_CHECK(rows_of(a.qkv_bias, {&a.q_proj.bias, &a.k_proj.bias, &a.v_proj.bias}));
      BOOST_CHECK_EQUAL(a.qkv_bias.defined(), config.qkv_bias());
      const auto& mlp = m.layers()[1].mlp;
      BOOST_CHECK(rows_of(mlp.gate_up_weight, {&mlp.gate_proj.weight, &mlp.up_proj.weight}));
      BOOST_CHECK_EQUAL(m.weight_bytes(), plain.weight_bytes());
      check_equal(a.k_proj.weight, plain.layers()[1].self_attn.k_proj.weight, "k_proj weight");

      // Which path runs when.
      BOOST_CHECK(!m.uses_fused_inference()); // autograd on
      {
        c10::InferenceMode guard;
        BOOST_CHECK(m.uses_fused_inference());
        BOOST_CHECK(!plain.uses_fused_inference()); // automatic on the CPU
      }
      at::NoGradGuard no_grad;
      BOOST_CHECK(m.uses_fused_inference());

      for (bool adapter : {false, true}) {
        BOOST_TEST_CONTEXT((adapter ? "with an adapter" : "base model")) {
          if (adapter) {
            const auto ad = full_adapter(config, 3);
            BOOST_REQUIRE(attach_lora_adapter(m, ad));
            BOOST_REQUIRE(attach_lora_adapter(plain, ad));
          }
          const auto fused = decode(m, at::kFloat, 4);
          m.set_inference_path(inference_path::unfused);
          BOOST_CHECK(!m.uses_fused_inference());
          const auto unfused = decode(m, at::kFloat, 4);
          const auto reference = decode(plain, at::kFloat, 4);
          m.set_inference_path(inference_path::fused);
          // Only the stacked GEMMs' summation order can differ: float32 rounding.
          check_close(fused.logits, reference.logits, 1e-5, "fused vs run_layer logits");
          check_close(unfused.logits, reference.logits, 1e-5, "unfused vs run_layer logits");
          for (std::size_t l = 0; l < fused.keys.size(); ++l) {
            check_close(fused.keys[l], reference.keys[l], 1e-5, "keys of layer " + std::to_string(l));
            check_close(fused.values[l], reference.values[l], 1e-5,
                        "values of layer " + std::to_string(l));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(lora_dropout_keeps_run_layer) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen2"), 7,
                            {at::kCPU, at::kFloat, inference_path::fused});
  auto ad = full_adapter(m.config(), 4);
  for (auto& [name, f] : ad.modules) {
    f.dropout = 0.1;
    f.dropout_generator = at::detail::createCPUGenerator(1);
  }
  BOOST_REQUIRE(attach_lora_adapter(m, ad));
  at::NoGradGuard no_grad;
  BOOST_CHECK(!m.uses_fused_inference());
}

// ---- on a GPU ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(add_rms_norm_kernel_matches_the_composition) {
  if (skip_without_cuda("add_rms_norm_kernel_matches_the_composition"))
    return;
  for (const auto& p : kernel_precisions)
    for (int64_t dim : {1, 5, 64, 1000, 1536, 4099})
      for (bool with_delta : {false, true}) {
        BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " dim " << dim
                                                  << (with_delta ? " + delta" : "")) {
          const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
          const auto x = randn({3, 7, dim}, dim, o) * 3;
          const auto delta = with_delta ? randn({3, 7, dim}, dim + 1, o) : at::Tensor{};
          const auto w = norm_weight(dim, dim + 2, o);
          const auto got = add_rms_norm(x, delta, w, 1e-6);
          const auto residual = with_delta ? x + delta : x;
          check_equal(got.residual, residual, "residual"); // one rounding, the same one
          check_relative(got.normed, rms_norm(residual, w, 1e-6), p.rel, "normed");
        }
      }
}

BOOST_AUTO_TEST_CASE(swiglu_kernel_matches_the_composition) {
  if (skip_without_cuda("swiglu_kernel_matches_the_composition"))
    return;
  for (const auto& p : kernel_precisions)
    for (int64_t width : {1, 7, 128, 8960}) {
      BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " width " << width) {
        const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
        const auto gate_up = randn({5, 3, 2 * width}, width, o) * 4;
        const auto want = at::silu(gate_up.narrow(-1, 0, width)) * gate_up.narrow(-1, width, width);
        check_relative(swiglu(gate_up), want, p.rel, "silu(gate) * up");
        // A non-contiguous input (a slice of a wider tensor) takes the same kernel.
        const auto wide = randn({5, 2 * width + 3}, width + 1, o);
        const auto sliced = wide.narrow(-1, 1, 2 * width);
        check_relative(swiglu(sliced),
                       at::silu(sliced.narrow(-1, 0, width)) * sliced.narrow(-1, width, width),
                       p.rel, "sliced input");
      }
    }
}

BOOST_AUTO_TEST_CASE(decode_linear_kernel_matches_the_operations) {
  if (skip_without_cuda("decode_linear_kernel_matches_the_operations"))
    return;
  struct shape {
    int64_t in, out;
    bool bias;
  };
  // Qwen2-1.5B's q|k|v (bias), o_proj, gate|up and down; a short row (one chunk a thread) with
  // a last block past out_features.
  const std::vector<shape> shapes{
    {1536, 2048, true}, {1536, 1536, false}, {1536, 17920, false}, {8960, 1536, false},
    {64, 13, true}};
  for (const auto& p : kernel_precisions) {
    if (p.dtype == at::kFloat)
      continue; // cuBLAS keeps float32
    const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
    for (const auto& sh : shapes)
      for (int64_t tokens : {1, 2}) { // 2: past the kernel's one token, the operations
        BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " in " << sh.in << " out " << sh.out
                                                  << " tokens " << tokens) {
          const auto w = randn({sh.out, sh.in}, sh.out, o) * 0.05;
          const auto b = sh.bias ? randn({sh.out}, sh.out + 1, o) : at::Tensor{};
          const auto b32 = b.defined() ? b.to(at::kFloat) : at::Tensor{};
          const auto w32 = w.to(at::kFloat);
          // float32 sums of the same values, rounded once: the kernel differs in their order
          auto want = [&](const at::Tensor& row) {
            return at::linear(row.to(at::kFloat), w32, b32).to(p.dtype);
          };
          auto check = [&](const at::Tensor& got, const at::Tensor& row, const char* what) {
            BOOST_TEST_CONTEXT(what) {
              check_relative(got, want(row), p.rel, "against float32 sums");
              if (tokens > 1)
                check_equal(got, at::linear(row, w, b), "past one token: at::linear itself");
            }
          };
          const auto x = randn({tokens, 1, sh.in}, sh.in + tokens, o) * 2;
          check(decode_linear(x, w, b), x, "plain");
          const auto gate_up = randn({tokens, 1, 2 * sh.in}, sh.in + 7, o) * 2;
          check(swiglu_linear(gate_up, w, b), swiglu(gate_up), "swiglu");
        }
      }
    // A view whose row is not 16-byte aligned goes to at::linear.
    const auto wide = randn({1, 1, 1537}, 1, o), w = randn({64, 1536}, 2, o);
    const auto x = wide.narrow(-1, 1, 1536);
    check_equal(decode_linear(x, w, {}), at::linear(x, w), "misaligned input");
  }
}

/// q|k|v layers of `l` over `hidden` features, stacked as the model stacks them (fuse_rows).
struct stacked_qkv {
  linear_layer q, k, v;
  at::Tensor weight, bias;
  std::vector<const linear_layer*> parts() const { return {&q, &k, &v}; }
};
stacked_qkv make_stacked_qkv(const qkv_layout& l, int64_t hidden, bool with_bias,
                             const at::TensorOptions& o) {
  stacked_qkv s;
  const int64_t n[3] = {l.heads * l.head_dim, l.kv_heads * l.head_dim, l.kv_heads * l.head_dim};
  linear_layer* layers[3] = {&s.q, &s.k, &s.v};
  for (int i = 0; i < 3; ++i) {
    layers[i]->weight = randn({n[i], hidden}, 61 + i, o) * 0.05;
    layers[i]->bias = with_bias ? randn({n[i]}, 64 + i, o) : at::Tensor{};
  }
  s.weight = fuse_rows({&s.q.weight, &s.k.weight, &s.v.weight});
  s.bias = fuse_rows({&s.q.bias, &s.k.bias, &s.v.bias});
  return s;
}

BOOST_AUTO_TEST_CASE(decode_rope_qkv_kernel_equals_the_projection_then_rope_qkv) {
  if (skip_without_cuda("decode_rope_qkv_kernel_equals_the_projection_then_rope_qkv"))
    return;
  struct shape {
    int64_t heads, kv_heads, head_dim, hidden;
    bool bias;
  };
  // Qwen2-1.5B's attention (bias), an MHA with head_dim 64 and no bias, head_dim 4 (one pair a
  // head a block)
  const std::vector<shape> shapes{{12, 2, 128, 1536, true}, {4, 4, 64, 256, false},
                                  {3, 1, 4, 64, true}};
  for (const auto& p : kernel_precisions) {
    if (p.dtype == at::kFloat)
      continue; // cuBLAS keeps float32, and so the two
    const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
    for (const auto& sh : shapes)
      for (int64_t position : {0, 37, 50}) { // 50: past the cache, neither is written
        BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " heads " << sh.heads << "/" << sh.kv_heads
                                                  << " dim " << sh.head_dim << " position "
                                                  << position) {
          const qkv_layout l{sh.heads, sh.kv_heads, sh.head_dim};
          const auto qkv = make_stacked_qkv(l, sh.hidden, sh.bias, o);
          const auto x = randn({1, 1, sh.hidden}, 71, o) * 2;
          const auto pos = at::full({1, 1}, position, at::TensorOptions(at::kLong)).to(at::kCUDA);
          const auto inv_freq =
            (at::rand({sh.head_dim / 2}, at::TensorOptions(at::kFloat)) * 0.5).to(at::kCUDA);
          const auto rot = make_rotary_embedding(inv_freq, pos, p.dtype);
          // slot 1 of 3, 40 positions: the kernel touches only its own slot and position
          const auto cache_k = randn({3, sh.kv_heads, 40, sh.head_dim}, 72, o);
          const auto cache_v = randn({3, sh.kv_heads, 40, sh.head_dim}, 73, o);
          const auto ref_k = cache_k.clone(), ref_v = cache_v.clone();
          const auto got = decode_rope_qkv(x, qkv.weight, qkv.bias, qkv.parts(), l, rot, pos,
                                           cache_k.narrow(0, 1, 1), cache_v.narrow(0, 1, 1));
          BOOST_REQUIRE(got.has_value());
          const auto want = rope_qkv(fused_projection(x, qkv.weight, qkv.bias, qkv.parts()), l,
                                     rot, {}, {}, 1e-6, pos, ref_k.narrow(0, 1, 1),
                                     ref_v.narrow(0, 1, 1));
          check_equal(got->q, want.q, "q");
          check_equal(cache_k, ref_k, "the whole key cache");
          check_equal(cache_v, ref_v, "the whole value cache");
          check_equal(got->keys, want.keys, "the keys handed to attention");
          BOOST_CHECK_EQUAL(got->keys.data_ptr(), cache_k.narrow(0, 1, 1).data_ptr());
        }
      }
    // Where it does not apply, nothing: two tokens, a LoRA term, float32.
    const qkv_layout l{4, 2, 16};
    auto qkv = make_stacked_qkv(l, 64, true, o);
    const auto pos = at::zeros({1, 1}, at::TensorOptions(at::kLong)).to(at::kCUDA);
    const auto rot = make_rotary_embedding(
      at::rand({8}, at::TensorOptions(at::kFloat)).to(at::kCUDA), pos, p.dtype);
    const auto ck = randn({1, 2, 8, 16}, 74, o), cv = randn({1, 2, 8, 16}, 75, o);
    BOOST_CHECK(!decode_rope_qkv(randn({1, 2, 64}, 76, o), qkv.weight, qkv.bias, qkv.parts(), l,
                                 rot, pos, ck, cv));
    qkv.k.lora.a = randn({2, 64}, 77, o);
    qkv.k.lora.b = randn({32, 2}, 78, o);
    BOOST_CHECK(!decode_rope_qkv(randn({1, 1, 64}, 79, o), qkv.weight, qkv.bias, qkv.parts(), l,
                                 rot, pos, ck, cv));
  }
}

BOOST_AUTO_TEST_CASE(decode_norm_folds_equal_the_norm_kernels) {
  if (skip_without_cuda("decode_norm_folds_equal_the_norm_kernels"))
    return;
  // The decode step's residual adds and norms folded into its GEMVs (decode_linear.hpp) give
  // the bits of add_rms_norm and the GEMV one after the other: Qwen2-1.5B's and 7B's widths.
  for (const auto& p : kernel_precisions) {
    if (p.dtype == at::kFloat)
      continue; // cuBLAS keeps float32: no folds
    const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
    for (const int64_t hidden : {1536, 3584}) {
      BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " hidden " << hidden) {
        const double eps = 1e-6;
        const auto residual = randn({1, 1, hidden}, 81, o) * 3;
        const auto norm = randn({hidden}, 82, o) * 0.5 + 1;
        const auto w = randn({2 * hidden, hidden}, 83, o) * 0.05;
        const auto bias = randn({2 * hidden}, 84, o);
        // the norm folded into the GEMV after it
        const auto normed = decode_linear_normed(residual, norm, eps, w, bias);
        BOOST_REQUIRE(normed.has_value());
        check_equal(*normed, decode_linear(add_rms_norm(residual, {}, norm, eps).normed, w, bias),
                    "normalised input");
        // and into the q|k|v GEMV with RoPE (Qwen2's 12/2 heads of 128 at 1536)
        const qkv_layout l{hidden / 128, 2, 128};
        const auto qkv = make_stacked_qkv(l, hidden, true, o);
        const auto pos = at::full({1, 1}, 5, at::TensorOptions(at::kLong)).to(at::kCUDA);
        const auto rot = make_rotary_embedding(
          (at::rand({64}, at::TensorOptions(at::kFloat)) * 0.5).to(at::kCUDA), pos, p.dtype);
        const auto ck = randn({1, 2, 8, 128}, 85, o), cv = randn({1, 2, 8, 128}, 86, o);
        const auto rk = ck.clone(), rv = cv.clone();
        const auto got = decode_rope_qkv(residual, qkv.weight, qkv.bias, qkv.parts(), l, rot, pos,
                                         ck, cv, norm, eps);
        BOOST_REQUIRE(got.has_value());
        const auto want = decode_rope_qkv(add_rms_norm(residual, {}, norm, eps).normed,
                                          qkv.weight, qkv.bias, qkv.parts(), l, rot, pos, rk, rv);
        BOOST_REQUIRE(want.has_value());
        check_equal(got->q, want->q, "q with the norm folded in");
        check_equal(ck, rk, "keys with the norm folded in");
        check_equal(cv, rv, "values with the norm folded in");
        // the residual add where the delta is made, plain and swiglu input
        const auto x = randn({1, 1, hidden}, 87, o);
        auto summed = residual.clone();
        BOOST_REQUIRE(decode_linear_add_to(summed, x, false, w.narrow(0, 0, hidden),
                                           bias.narrow(0, 0, hidden)));
        check_equal(summed,
                    add_rms_norm(residual, decode_linear(x, w.narrow(0, 0, hidden),
                                                         bias.narrow(0, 0, hidden)),
                                 norm, eps)
                      .residual,
                    "plain delta added");
        const auto gate_up = randn({1, 1, 2 * hidden}, 88, o);
        const auto down = randn({hidden, hidden}, 89, o) * 0.05;
        auto summed2 = residual.clone();
        BOOST_REQUIRE(decode_linear_add_to(summed2, gate_up, true, down, {}));
        check_equal(summed2,
                    add_rms_norm(residual, swiglu_linear(gate_up, down, {}), norm, eps).residual,
                    "swiglu delta added");
        // where it does not apply, nothing is done: two tokens, a residual of another width
        auto two_rows = randn({1, 2, hidden}, 90, o);
        const auto before = two_rows.clone();
        BOOST_CHECK(!decode_linear_add_to(two_rows, randn({1, 2, hidden}, 91, o), false,
                                          w.narrow(0, 0, hidden), {}));
        check_equal(two_rows, before, "untouched where it does not apply");
        BOOST_CHECK(!decode_linear_normed(randn({1, 2, hidden}, 92, o), norm, eps, w, bias));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rope_qkv_kernel_matches_the_composition) {
  if (skip_without_cuda("rope_qkv_kernel_matches_the_composition"))
    return;
  struct shape {
    int64_t batch, seq, heads, kv_heads, head_dim;
  };
  // GQA 12/2 at Qwen2-1.5B's head_dim, 3/1 with an odd number of pairs, MHA 4/4, decode (seq
  // 1) and prefill (seq 5), head_dim 2 (one pair: a block of one busy lane).
  const std::vector<shape> shapes{{3, 1, 12, 2, 128}, {2, 5, 3, 1, 80}, {1, 5, 4, 4, 64},
                                  {4, 1, 2, 1, 2},    {3, 4, 6, 2, 16}};
  for (const auto& p : kernel_precisions)
    for (const auto& s : shapes)
      for (bool normed : {false, true})
        for (bool cached : {false, true}) {
          BOOST_TEST_CONTEXT(c10::toString(p.dtype)
                             << " batch " << s.batch << " seq " << s.seq << " heads " << s.heads
                             << "/" << s.kv_heads << " dim " << s.head_dim
                             << (normed ? " q/k norm" : "") << (cached ? " cache" : "")) {
            const auto o = at::TensorOptions(at::kCUDA).dtype(p.dtype);
            const qkv_layout l{s.heads, s.kv_heads, s.head_dim};
            const auto qkv =
              randn({s.batch, s.seq, (s.heads + 2 * s.kv_heads) * s.head_dim}, s.head_dim, o);
            const auto pos = staggered_positions(s.batch, s.seq, at::kCUDA);
            const auto inv_freq =
              (at::rand({s.head_dim / 2}, at::TensorOptions(at::kFloat)) * 0.5).to(at::kCUDA);
            const auto rot = make_rotary_embedding(inv_freq, pos, p.dtype);
            const auto qn = normed ? norm_weight(s.head_dim, 1, o) : at::Tensor{};
            const auto kn = normed ? norm_weight(s.head_dim, 2, o) : at::Tensor{};
            const int64_t max_len = 3 * s.batch + s.seq + 2;
            // Two extra slots around the batch's: the kernel must touch only its own.
            const auto cache_k = randn({s.batch + 2, s.kv_heads, max_len, s.head_dim}, 3, o);
            const auto cache_v = randn({s.batch + 2, s.kv_heads, max_len, s.head_dim}, 4, o);
            const auto ref_k = cache_k.clone(), ref_v = cache_v.clone();
            const auto slot_k = cached ? cache_k.narrow(0, 1, s.batch) : at::Tensor{};
            const auto slot_v = cached ? cache_v.narrow(0, 1, s.batch) : at::Tensor{};
            const auto got = rope_qkv(qkv, l, rot, qn, kn, 1e-6, pos, slot_k, slot_v);
            const auto want = reference_rope(
              qkv, l, rot, qn, kn, 1e-6, pos, cached ? ref_k.narrow(0, 1, s.batch) : at::Tensor{},
              cached ? ref_v.narrow(0, 1, s.batch) : at::Tensor{});
            BOOST_CHECK(got.q.is_contiguous());
            if (normed) {
              check_relative(got.q, want.q, 2 * p.rel, "q");
              check_relative(got.keys, want.keys, 2 * p.rel, "keys");
            } else { // no reduction: the same roundings (addcmul's fused multiply-add aside)
              check_relative(got.q, want.q, p.rel, "q");
              check_relative(got.keys, want.keys, p.rel, "keys");
            }
            check_equal(got.values, want.values, "values");
            if (cached) {
              BOOST_CHECK(got.keys.is_same(slot_k));
              check_equal(cache_v, ref_v, "the whole value cache");
              check_equal(cache_k.narrow(0, 0, 1), ref_k.narrow(0, 0, 1), "slot before");
              check_equal(cache_k.narrow(0, s.batch + 1, 1), ref_k.narrow(0, s.batch + 1, 1),
                          "slot after");
            }
          }
        }
}

/// decode_attention() and grouped_attention() with cache_mask() on the same cache slots.
void check_decode_attention(const at::TensorOptions& o, double rel, int64_t batch, int64_t heads,
                            int64_t kv_heads, int64_t dim, int64_t key_len,
                            const std::vector<int64_t>& positions,
                            decode_attention_kind kind = decode_attention_kind::standard) {
  const auto cache_k = randn({batch + 2, kv_heads, key_len + 5, dim}, 21, o);
  const auto cache_v = randn({batch + 2, kv_heads, key_len + 5, dim}, 22, o);
  const auto keys = cache_k.narrow(0, 1, batch).narrow(2, 0, key_len);
  const auto values = cache_v.narrow(0, 1, batch).narrow(2, 0, key_len);
  const auto q = randn({batch, heads, 1, dim}, 23, o) * 2;
  const auto pos = at::tensor(positions, at::kLong).view({batch, 1}).to(o.device());
  const auto mask = cache_mask(pos, key_len);
  const auto got = decode_attention(q, keys, values, pos, mask, kind);
  const auto want = grouped_attention(q, keys, values, mask);
  BOOST_REQUIRE(got.sizes() == want.sizes());
  check_relative(got, want, rel, "attention output");
}

BOOST_AUTO_TEST_CASE(decode_attention_on_the_cpu_is_the_masked_composition) {
  const auto o = at::TensorOptions(at::kFloat);
  check_decode_attention(o, 0.0, 2, 6, 2, 16, 20, {19, 3});
}

struct decode_shape {
  int64_t batch, heads, kv_heads, dim, key_len;
  std::vector<int64_t> positions;
};

/// check_decode_attention() on CUDA for every kernel dtype and shape, with `kind`.
void check_decode_attention_on_cuda(const std::vector<decode_shape>& shapes,
                                    decode_attention_kind kind) {
  for (const auto& p : kernel_precisions)
    for (const auto& s : shapes) {
      BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " batch " << s.batch << " heads " << s.heads
                                                << "/" << s.kv_heads << " dim " << s.dim
                                                << " keys " << s.key_len) {
        // float32 softmax here, the dtype's in the reference: a few units in the last place.
        const double rel = p.dtype == at::kFloat ? 1e-5 : 4 * p.rel;
        check_decode_attention(at::TensorOptions(at::kCUDA).dtype(p.dtype), rel, s.batch,
                               s.heads, s.kv_heads, s.dim, s.key_len, s.positions, kind);
      }
    }
}

BOOST_AUTO_TEST_CASE(decode_attention_kernel_matches_the_composition) {
  if (skip_without_cuda("decode_attention_kernel_matches_the_composition"))
    return;
  // The per-head kernel (kind grouped at batch 1): Qwen2-1.5B's heads at a 768-position bucket
  // (several splits, the last partly used, or only the first), MHA, one split, head_dim 256
  // (two rounds of loads in float32), position 0, the last, a split boundary. Several
  // sequences (the grouped kernel) are the next test's.
  check_decode_attention_on_cuda({{1, 12, 2, 128, 768, {300}}, {1, 12, 2, 128, 768, {0}},
                                  {1, 12, 2, 128, 768, {767}}, {1, 4, 4, 64, 100, {99}},
                                  {1, 8, 1, 256, 129, {128}}, {1, 6, 3, 16, 384, {127}}},
                                 decode_attention_kind::grouped);
}

BOOST_AUTO_TEST_CASE(grouped_decode_attention_kernel_matches_the_composition) {
  if (skip_without_cuda("grouped_decode_attention_kernel_matches_the_composition"))
    return;
  // Several sequences at different positions: Qwen2-1.5B's group of 6, Qwen2.5-7B's 7, 8 (the
  // most), MHA, head_dim 256; 64 sequences of 5000 keys get splits of several chunks (the split
  // length follows the device's SM count).
  std::vector<int64_t> spread(64);
  for (int64_t b = 0; b < 64; ++b)
    spread[b] = (b * 797) % 5000;
  spread[0] = 4999;
  check_decode_attention_on_cuda({{3, 12, 2, 128, 768, {767, 0, 300}},
                                  {5, 28, 4, 128, 1024, {1023, 1, 640, 128, 129}},
                                  {2, 16, 2, 256, 129, {128, 3}},
                                  {4, 4, 4, 64, 100, {99, 0, 50, 200}},
                                  {64, 12, 2, 128, 5000, spread}},
                                 decode_attention_kind::grouped);
}

BOOST_AUTO_TEST_CASE(tensor_core_decode_attention_kernel_matches_the_composition) {
  if (skip_without_cuda("tensor_core_decode_attention_kernel_matches_the_composition"))
    return;
  // The default kind at batch 1 and above: Qwen2-1.5B's group of 6, Qwen2.5-7B's 7, 8 (the
  // most), MHA, head_dim 64 and 128; positions 0, the last and between; 64 sequences of 5000
  // keys in splits of several rounds. float32 and head_dim 256 take the other paths (the
  // per-head kernel at batch 1, else the composition).
  std::vector<int64_t> spread(64);
  for (int64_t b = 0; b < 64; ++b)
    spread[b] = (b * 797) % 5000;
  spread[0] = 4999;
  check_decode_attention_on_cuda({{1, 12, 2, 128, 768, {300}},
                                  {1, 12, 2, 128, 768, {0}},
                                  {3, 12, 2, 128, 768, {767, 0, 300}},
                                  {5, 28, 4, 128, 1024, {1023, 1, 640, 128, 129}},
                                  {2, 16, 2, 128, 129, {128, 3}},
                                  {4, 4, 4, 64, 100, {99, 0, 50, 200}},
                                  {3, 14, 2, 64, 2000, {1999, 63, 64}},
                                  {2, 16, 2, 256, 129, {128, 3}},
                                  {64, 12, 2, 128, 5000, spread}},
                                 decode_attention_kind::standard);
}

BOOST_AUTO_TEST_CASE(fused_decoding_on_cuda_equals_unfused) {
  if (skip_without_cuda("fused_decoding_on_cuda_equals_unfused"))
    return;
  temp_dir dir;
  struct tolerance {
    at::ScalarType dtype;
    double rel; ///< on the logits, relative to the largest
  };
  // bfloat16: the stacked GEMMs and the RMSNorm sums round differently and the differences
  // travel through two layers; 5 % of the logits' range, as transformer's bf16-vs-fp32 test.
  for (const auto& t : {tolerance{at::kFloat, 1e-4}, tolerance{at::kBFloat16, 0.05}})
    for (const auto& arch : {"qwen2", "qwen3", "llama"}) {
      BOOST_TEST_CONTEXT(arch << " " << c10::toString(t.dtype)) {
        auto m = tiny_transformer(dir, tiny_model_config(arch), 7, {at::kCUDA, t.dtype});
        const auto& a = m.layers()[0].self_attn;
        BOOST_CHECK(rows_of(a.qkv_weight, {&a.q_proj.weight, &a.k_proj.weight, &a.v_proj.weight}));
        c10::InferenceMode guard;
        BOOST_CHECK(m.uses_fused_inference());
        for (bool adapter : {false, true}) {
          BOOST_TEST_CONTEXT((adapter ? "with an adapter" : "base model")) {
            if (adapter) {
              auto ad = full_adapter(m.config(), 5);
              for (auto& [name, f] : ad.modules) {
                f.a = f.a.to(at::kCUDA, t.dtype);
                f.b = f.b.to(at::kCUDA, t.dtype);
              }
              BOOST_REQUIRE(attach_lora_adapter(m, ad));
            }
            const auto o = at::TensorOptions(at::kCUDA).dtype(t.dtype);
            const auto fused = decode(m, o, 5);
            m.set_inference_path(inference_path::unfused);
            const auto unfused = decode(m, o, 5);
            m.set_inference_path(inference_path::automatic);
            check_relative(fused.logits, unfused.logits, t.rel, "logits");
            for (std::size_t l = 0; l < fused.keys.size(); ++l) {
              check_relative(fused.keys[l], unfused.keys[l], t.rel, "keys " + std::to_string(l));
              check_relative(fused.values[l], unfused.values[l], t.rel,
                             "values " + std::to_string(l));
            }
            if (t.dtype == at::kFloat) { // the same greedy tokens at every step
              check_equal(fused.logits.argmax(-1), unfused.logits.argmax(-1), "greedy tokens");
            }
          }
        }
      }
    }
}

/// train_rms_norm() and train_swiglu() with `fused` against the compositions they replace:
/// their results, and the gradients of x (RMSNorm, frozen weight) and of gate and up (SwiGLU)
/// for the same upstream gradient.
void check_train_ops(const at::TensorOptions& o, double rel, std::vector<int64_t> shape) {
  const int64_t dim = shape.back();
  const auto x0 = randn(shape, 51, o) * 3, w = norm_weight(dim, 52, o);
  const auto gy = randn(shape, 53, o);
  auto run_norm = [&](bool fused) {
    auto x = x0.clone().requires_grad_(true);
    auto y = train_rms_norm(x, w, 1e-6, fused);
    y.backward(gy);
    return std::make_pair(y.detach(), x.grad());
  };
  const auto [y_fused, gx_fused] = run_norm(true);
  const auto [y_ref, gx_ref] = run_norm(false);
  check_relative(y_fused, y_ref, rel, "rms_norm forward");
  check_relative(gx_fused, gx_ref, 4 * rel, "rms_norm grad x");

  const auto g0 = randn(shape, 54, o) * 3, u0 = randn(shape, 55, o);
  auto run_swiglu = [&](bool fused) {
    auto g = g0.clone().requires_grad_(true), u = u0.clone().requires_grad_(true);
    auto y = train_swiglu(g, u, fused);
    y.backward(gy);
    return std::make_tuple(y.detach(), g.grad(), u.grad());
  };
  const auto [s_fused, gg_fused, gu_fused] = run_swiglu(true);
  const auto [s_ref, gg_ref, gu_ref] = run_swiglu(false);
  check_relative(s_fused, s_ref, rel, "swiglu forward");
  check_relative(gg_fused, gg_ref, 4 * rel, "swiglu grad gate");
  check_relative(gu_fused, gu_ref, 4 * rel, "swiglu grad up");

  // The stacked gate|up of train_stacked_projection, its gradient one tensor.
  const auto gate_up0 = at::cat({g0, u0}, -1);
  auto run_stacked = [&](bool fused) {
    auto gate_up = gate_up0.clone().requires_grad_(true);
    auto y = train_swiglu_stacked(gate_up, fused);
    y.backward(gy);
    return std::make_pair(y.detach(), gate_up.grad());
  };
  const auto [st_fused, gst_fused] = run_stacked(true);
  const auto [st_ref, gst_ref] = run_stacked(false);
  check_relative(st_fused, s_ref, rel, "stacked swiglu forward");
  check_relative(st_ref, s_ref, 0.0, "stacked swiglu composition");
  check_relative(gst_fused, gst_ref, 4 * rel, "stacked swiglu grad");
  check_relative(gst_ref, at::cat({gg_ref, gu_ref}, -1), 0.0, "stacked swiglu composition grad");
}

/// train_rotary() with `fused` against apply_rotary() on run_layer's transposed view: the
/// result and the gradient of x.
void check_train_rotary(const at::TensorOptions& o, double rel, int64_t batch, int64_t heads,
                        int64_t seq, int64_t dim) {
  // x as run_layer's q of the stacked q|k|v projection: a column slice of wider rows.
  const auto x0 = randn({batch, seq, heads * dim + 2 * dim}, 56, o)
                    .narrow(-1, 0, heads * dim)
                    .view({batch, seq, heads, dim});
  const auto positions = at::arange(seq, at::kLong).repeat({batch, 1}).to(o.device()) + 3;
  const auto inv_freq = at::pow(10000.0, at::arange(0, dim, 2, at::kLong).to(at::kFloat) / dim)
                          .reciprocal();
  const auto rot = make_rotary_embedding(inv_freq, positions, o.dtype().toScalarType());
  const auto gy = randn({batch, heads, seq, dim}, 57, o);
  auto run = [&](bool fused) {
    auto x = x0.detach().requires_grad_(true); // still the slice's strides
    auto y = train_rotary(x.transpose(1, 2), rot, fused);
    y.backward(gy);
    return std::make_pair(y.detach(), x.grad());
  };
  const auto [y_fused, gx_fused] = run(true);
  const auto [y_ref, gx_ref] = run(false);
  check_relative(y_fused, y_ref, rel, "rotary forward");
  check_relative(gx_fused, gx_ref, 2 * rel, "rotary grad x");
  if (o.device().is_cuda()) // the kernel keeps [batch, seq, heads, dim] in memory, dense
    BOOST_CHECK_MESSAGE(y_fused.transpose(1, 2).is_contiguous(),
                        "rotary output strides " << y_fused.strides());
}

BOOST_AUTO_TEST_CASE(train_ops_on_the_cpu_are_the_compositions) {
  // fused asked for, but no kernel on the CPU: the compositions themselves, bit for bit
  check_train_ops(at::TensorOptions(at::kFloat), 0.0, {3, 5, 64});
  check_train_rotary(at::TensorOptions(at::kFloat), 0.0, 2, 3, 5, 16);
}

BOOST_AUTO_TEST_CASE(train_kernels_match_the_compositions_forward_and_backward) {
  if (skip_without_cuda("train_kernels_match_the_compositions_forward_and_backward"))
    return;
  // a layer's hidden rows (Qwen2-1.5B's width), per-head rows (q_norm's), an odd width
  for (const auto& p : kernel_precisions)
    for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 7, 1536}, {2, 7, 12, 128},
                                                               {3, 33}}) {
      BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " shape " << at::IntArrayRef(shape)) {
        // float32 sums in another order than libtorch's: a few units in the last place
        const double rel = p.dtype == at::kFloat ? 1e-5 : 2 * p.rel;
        check_train_ops(at::TensorOptions(at::kCUDA).dtype(p.dtype), rel, shape);
      }
    }
  for (const auto& p : kernel_precisions) {
    BOOST_TEST_CONTEXT(c10::toString(p.dtype) << " rotary") {
      // the same roundings as the composition (rope_qkv_kernel's): one unit in the last place
      const double rel = p.dtype == at::kFloat ? 1e-6 : p.rel;
      check_train_rotary(at::TensorOptions(at::kCUDA).dtype(p.dtype), rel, 2, 12, 9, 128);
    }
  }
}

/// fused_logprobs_and_gradient() against token_logprobs() through autograd: the log-probs and
/// each position's gradient with respect to its hidden row (a tiny model's 64-wide hidden states
/// and its vocabulary), at temperature 1 and 0.7.
void check_logprob_gradient(transformer& m, double rel_logprob, double rel_grad) {
  const auto o = at::TensorOptions(m.options().device).dtype(m.options().dtype);
  const auto hidden0 = randn({2, 5, m.config().hidden_size}, 81, o);
  auto gen = at::detail::createCPUGenerator(82);
  const auto targets = at::randint(m.config().vocab_size, {2, 5}, gen, at::TensorOptions(at::kLong))
                         .to(o.device());
  for (double t : {1.0, 0.7}) {
    BOOST_TEST_CONTEXT("temperature " << t) {
      const auto fused = fused_logprobs_and_gradient(m, hidden0, targets, t);
      BOOST_REQUIRE(fused);
      auto hidden = hidden0.clone().requires_grad_(true);
      const auto want = token_logprobs(m, hidden, targets, t, 5);
      want.sum().backward(); // position s's row depends on hidden[s] alone
      check_relative(fused->logprobs, want.detach(), rel_logprob, "log-probabilities");
      check_relative(fused->grad_hidden, hidden.grad(), rel_grad, "gradient of hidden");
    }
  }
}

BOOST_AUTO_TEST_CASE(logprob_gradient_on_the_cpu_is_left_to_the_composition) {
  temp_dir dir;
  const auto m = tiny_transformer(dir, tiny_model_config("qwen2"));
  BOOST_CHECK(!fused_logprobs_and_gradient(m, at::zeros({1, 2, m.config().hidden_size}),
                                           at::zeros({1, 2}, at::kLong), 1.0));
}

BOOST_AUTO_TEST_CASE(logprob_gradient_kernel_matches_the_composition) {
  if (skip_without_cuda("logprob_gradient_kernel_matches_the_composition"))
    return;
  temp_dir dir;
  for (const auto& p : kernel_precisions) {
    BOOST_TEST_CONTEXT(c10::toString(p.dtype)) {
      auto m = tiny_transformer(dir, tiny_model_config("qwen2"), 7, {at::kCUDA, p.dtype});
      // log-probs: float32 sums in another order; gradients: one rounding to the dtype, then
      // the same GEMM
      check_logprob_gradient(m, 1e-5, p.dtype == at::kFloat ? 1e-5 : 4 * p.rel);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
