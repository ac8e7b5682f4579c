// Tests of the decode step's CUDA graphs (runtime/model/decode_graph.hpp) and of the eager
// decode pieces they rely on. Here (CPU): the key-length buckets, that graphs say why they are
// off and the engine decodes eagerly, the pre-folded attention mask. On a machine with CUDA
// (the GPU machine: tools/gpu_checks.sh OUT cuda): graphs on equal graphs off token for token
// (greedy and seeded sampling, fp32 and bf16, logprobs within 1e-5 / 1e-3), continuous batching
// with slot refills, adapters swapped between batches (copied in place or re-captured) exactly
// as in eager mode, and that the steps really came from graphs.

#include <boost/test/unit_test.hpp>

#include "model_fixture.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/decode_graph.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/sampling.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <map>

using namespace kbrl::model;
using kbrl::generation_request;
using kbrl::generation_result;
using kbrl::test::temp_dir;
using kbrl::test::tiny_transformer;
using kbrl::test::token_request;
using kbrl::test::why;

namespace {

std::vector<int32_t> prompt_of(int64_t length, int32_t salt) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back(static_cast<int32_t>((salt * 41 + i * 13 + 7) % 250 + 3)); // no id below 3
  return ids;
}

generation_engine make_engine(transformer& m, int64_t slots, bool graphs, int64_t max_len = 96) {
  generation_engine_options o;
  o.slots = slots;
  o.max_sequence_length = max_len;
  o.key_block = 16;
  o.name = graphs ? "graphs" : "eager";
  o.cuda_graphs = graphs;
  auto e = generation_engine::create(m, std::nullopt, o);
  BOOST_REQUIRE_MESSAGE(e, why(e));
  return std::move(*e);
}

/// `got` equals `want` token for token, log-probabilities within `tol`.
void check_same(const generation_result& got, const generation_result& want, float tol) {
  BOOST_TEST_CONTEXT("request " << want.id) {
    BOOST_CHECK_MESSAGE(got.error.empty(), got.error);
    BOOST_CHECK_MESSAGE(want.error.empty(), want.error);
    BOOST_CHECK_EQUAL_COLLECTIONS(got.completion_tokens.begin(), got.completion_tokens.end(),
                                  want.completion_tokens.begin(), want.completion_tokens.end());
    BOOST_CHECK(got.finish == want.finish);
    BOOST_REQUIRE_EQUAL(got.logprobs.size(), want.logprobs.size());
    for (std::size_t i = 0; i < got.logprobs.size(); ++i)
      BOOST_CHECK_SMALL(got.logprobs[i] - want.logprobs[i], tol);
  }
}

/// Every decode step of `e` came from a graph: a silent fallback to eager would make the
/// comparisons below compare eager with eager.
void check_all_from_graphs(const generation_engine& e) {
  BOOST_CHECK_MESSAGE(e.cuda_graphs_off_reason().empty(),
                      "CUDA graphs fell back to eager: " << e.cuda_graphs_off_reason());
  BOOST_CHECK_GT(e.stats().decode_steps, 0u);
  BOOST_CHECK_EQUAL(e.stats().graph_steps, e.stats().decode_steps);
  BOOST_CHECK_GT(e.stats().graph_captures, 0u);
}

bool skip_without_cuda(const char* test) {
  if (at::hasCUDA())
    return false;
  BOOST_TEST_MESSAGE("no CUDA device: " << test << " checks nothing here");
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(decode_graph)

// ---- everywhere --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(key_lengths_are_powers_of_two_and_their_midpoints) {
  using v = std::vector<int64_t>;
  BOOST_CHECK(decode_key_lengths(16, 96) == (v{16, 32, 48, 64, 96}));
  BOOST_CHECK(decode_key_lengths(16, 128) == (v{16, 32, 48, 64, 96, 128}));
  // The benchmark's cache: 512 prompt + 256 new + 1.
  BOOST_CHECK(decode_key_lengths(64, 769) == (v{64, 128, 192, 256, 384, 512, 768, 769}));
  BOOST_CHECK(decode_key_lengths(64, 64) == (v{64}));
  BOOST_CHECK(decode_key_lengths(64, 10) == (v{10}));
  const auto big = decode_key_lengths(64, int64_t{1} << 40);
  BOOST_CHECK_EQUAL(big.back(), int64_t{1} << 40);
  // Ascending, and above 2 key_block each at most 1.5x the one below it.
  BOOST_CHECK_EQUAL(big[1], 2 * big[0]);
  for (std::size_t i = 2; i < big.size(); ++i)
    BOOST_CHECK_MESSAGE(big[i] > big[i - 1] && 2 * big[i] <= 3 * big[i - 1],
                        big[i - 1] << " then " << big[i]);
  BOOST_CHECK_THROW(decode_key_lengths(0, 64), c10::Error);

  const v lengths{16, 32, 48, 64, 96};
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 1), 16);
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 16), 16);
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 17), 32);
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 49), 64);
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 96), 96);
  BOOST_CHECK_EQUAL(pick_key_length(lengths, 500), 96);
}

BOOST_AUTO_TEST_CASE(graphs_say_why_they_are_off_and_the_engine_decodes_eagerly) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen2"));
  kv_cache cache(m.config(), 2, 32, at::kFloat);
  kbrl::model::decode_graph g(m, cache, 16);
  BOOST_CHECK(!g.available());
  const auto& reason = g.unavailable_reason();
  BOOST_TEST_MESSAGE("decode graph on the CPU: " << reason);
  BOOST_CHECK(reason.find(cuda_graphs_compiled_in() ? "CUDA device" : "not compiled in")
              != std::string::npos);
  BOOST_CHECK(g.key_lengths() == (std::vector<int64_t>{16, 32}));
  BOOST_CHECK(!g.run(at::zeros({2, 2}, at::kLong), 3));
  BOOST_CHECK_EQUAL(g.captures(), 0u);

  // On the CPU the engine never builds graphs, whatever the option says: it decodes eagerly,
  // the same tokens with graphs asked for or not.
  std::vector<generation_request> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(token_request(i, prompt_of(5 + 7 * i, i), i == 1 ? 0.8 : 0.0, 10, 50 + i));
  auto asked = make_engine(m, 2, /*graphs=*/true);
  auto eager = make_engine(m, 2, /*graphs=*/false);
  const auto a = asked.generate(reqs), b = eager.generate(reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    check_same(a[i], b[i], /*tol=*/0.0f);
  BOOST_CHECK_EQUAL(asked.stats().graph_steps, 0u);
  BOOST_CHECK(asked.cuda_graphs_off_reason().empty());
}

BOOST_AUTO_TEST_CASE(a_mask_folded_once_gives_the_attention_of_one_folded_per_call) {
  c10::InferenceMode guard;
  auto gen = make_generator(3, at::kCPU);
  const int64_t batch = 2, heads = 6, kv_heads = 2, queries = 3, keys = 5, dim = 8;
  const auto q = at::randn({batch, heads, queries, dim}, gen);
  const auto k = at::randn({batch, kv_heads, keys, dim}, gen);
  const auto v = at::randn({batch, kv_heads, keys, dim}, gen);
  const auto positions = at::tensor({2, 3, 4, 0, 1, 2}, at::kLong).view({batch, queries});
  const auto mask = cache_mask(positions, keys);
  const auto folded = fold_attention_mask(mask, heads / kv_heads);
  BOOST_CHECK(folded.sizes() == at::IntArrayRef({batch, 1, 3 * queries, keys}));
  const auto once = grouped_attention(q, k, v, folded);
  const auto per_call = grouped_attention(q, k, v, mask);
  BOOST_CHECK(at::equal(once, per_call));
  // The reference: each query head against its key/value head, repeated as repeat_kv does.
  const auto k_rep = k.repeat_interleave(heads / kv_heads, 1);
  const auto v_rep = v.repeat_interleave(heads / kv_heads, 1);
  auto scores = at::matmul(q, k_rep.transpose(-1, -2)) / std::sqrt(double(dim));
  scores = scores.masked_fill(mask.logical_not(), -INFINITY);
  const auto want = at::matmul(at::softmax(scores, -1), v_rep);
  kbrl::test::check_close(once, want, /*atol=*/1e-5, "grouped attention");
  BOOST_CHECK(fold_attention_mask(mask, 1).is_same(mask));

  // The additive form the fused path hands every layer: 0 where attended, -inf elsewhere.
  const auto additive = additive_attention_mask(folded, at::kFloat);
  BOOST_CHECK(additive.scalar_type() == at::kFloat);
  BOOST_CHECK(additive.sizes() == folded.sizes());
  BOOST_CHECK(at::equal(additive.eq(0), folded));
  BOOST_CHECK(at::equal(at::isinf(additive), folded.logical_not()));
  BOOST_CHECK_THROW(additive_attention_mask(additive, at::kFloat), c10::Error);
  if (fused_attention_available()) // torch >= 2: the fused kernel takes either form alike
    BOOST_CHECK(at::equal(grouped_attention(q, k, v, additive), once));
}

// ---- on a GPU ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(graphs_on_equal_graphs_off) {
  if (skip_without_cuda("graphs_on_equal_graphs_off"))
    return;
  temp_dir dir;
  struct precision {
    at::ScalarType dtype;
    float tol; ///< on the log-probabilities
  };
  for (const auto& arch : {"qwen2", "qwen3", "llama"})
    for (const auto& p : {precision{at::kFloat, 1e-5f}, precision{at::kBFloat16, 1e-3f}}) {
      BOOST_TEST_CONTEXT(arch << " " << c10::toString(p.dtype)) {
        auto m = tiny_transformer(dir, tiny_model_config(arch), 7, {at::kCUDA, p.dtype});
        // Greedy and seeded sampled requests of different lengths: the sequences cross several
        // key-length buckets (16, 32, 48, 64, 96), each its own graph.
        std::vector<generation_request> reqs;
        for (int i = 0; i < 6; ++i) {
          auto r = token_request(i, prompt_of(3 + 9 * i, i), i % 2 ? 0.9 : 0.0, 20 + 5 * i, 300 + i);
          r.params.top_p = i % 3 == 1 ? 0.9 : 1.0;
          r.params.top_k = i == 3 ? 20 : 0;
          reqs.push_back(r);
        }
        auto on = make_engine(m, 4, true);
        auto off = make_engine(m, 4, false);
        const auto with_graphs = on.generate(reqs);
        const auto eager = off.generate(reqs);
        for (std::size_t i = 0; i < reqs.size(); ++i)
          check_same(with_graphs[i], eager[i], p.tol);
        check_all_from_graphs(on);
        BOOST_CHECK_EQUAL(off.stats().graph_steps, 0u);
        BOOST_CHECK_GE(on.stats().graph_captures, 3u); // buckets 16 .. 96 at least partly
        BOOST_TEST_MESSAGE(arch << " " << c10::toString(p.dtype) << ": "
                           << on.stats().decode_steps << " steps from "
                           << on.stats().graph_captures << " graphs");
        // A second run replays the graphs captured by the first: no new captures.
        const auto captured = on.stats().graph_captures;
        const auto again = on.generate(reqs);
        for (std::size_t i = 0; i < reqs.size(); ++i)
          check_same(again[i], eager[i], p.tol);
        BOOST_CHECK_EQUAL(on.stats().graph_captures, captured);
      }
    }
}

BOOST_AUTO_TEST_CASE(graphs_with_continuous_batching_and_slot_refills) {
  if (skip_without_cuda("graphs_with_continuous_batching_and_slot_refills"))
    return;
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("llama"), 7, {at::kCUDA, at::kFloat});
  // 9 requests through 3 slots: slots are refilled while others run, free slots ride along.
  std::vector<generation_request> reqs;
  for (int i = 0; i < 9; ++i) {
    auto r = token_request(100 + i, prompt_of(2 + (i * 5) % 11, i), i % 3 ? 0.7 : 0.0,
                     4 + (i * 7) % 13, 1000 + i);
    r.params.top_p = i % 2 ? 0.9 : 1.0;
    reqs.push_back(r);
  }
  auto engine = make_engine(m, 3, true);
  for (const auto& r : reqs)
    engine.submit(r);
  std::map<uint64_t, generation_result> got;
  bool refilled_while_running = false;
  while (!engine.idle()) {
    engine.step();
    for (auto& r : engine.take_results()) {
      if (engine.running() > 0 && engine.waiting() > 0)
        refilled_while_running = true;
      got[r.id] = std::move(r);
    }
  }
  BOOST_CHECK(refilled_while_running);
  check_all_from_graphs(engine);
  BOOST_REQUIRE_EQUAL(got.size(), reqs.size());
  // Each request alone in an eager one-slot engine: the same tokens.
  for (const auto& r : reqs) {
    auto alone = make_engine(m, 1, false);
    check_same(got.at(r.id), alone.generate({r}).at(0), /*tol=*/1e-5f);
  }
}

BOOST_AUTO_TEST_CASE(adapter_swaps_change_graphs_as_they_change_eager_decoding) {
  if (skip_without_cuda("adapter_swaps_change_graphs_as_they_change_eager_decoding"))
    return;
  temp_dir dir;
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    BOOST_TEST_CONTEXT(c10::toString(dtype)) {
      const float tol = dtype == at::kFloat ? 1e-5f : 1e-3f;
      auto m_graphs = tiny_transformer(dir, tiny_model_config("qwen2"), 7, {at::kCUDA, dtype});
      auto m_eager = tiny_transformer(dir, tiny_model_config("qwen2"), 7, {at::kCUDA, dtype});
      auto on = make_engine(m_graphs, 3, true);
      auto off = make_engine(m_eager, 3, false);
      std::vector<generation_request> reqs;
      for (int i = 0; i < 3; ++i)
        reqs.push_back(token_request(i, prompt_of(5 + 6 * i, i), i == 2 ? 0.8 : 0.0, 24, 9 + i));

      lora_config lc;
      lc.r = 8;
      lc.lora_alpha = 16;
      lc.target_modules = {"q_proj", "v_proj", "o_proj", "down_proj"};
      const auto on_device = [&](lora_adapter a) {
        for (auto& [module, f] : a.modules) {
          f.a = f.a.to(at::kCUDA, dtype);
          f.b = f.b.to(at::kCUDA, dtype);
        }
        return a;
      };
      const auto v1 = on_device(random_lora_adapter(m_graphs.config(), lc, 1, /*std=*/0.5));
      const auto v2 = on_device(random_lora_adapter(m_graphs.config(), lc, 2, /*std=*/0.5));
      auto wider = lc;
      wider.r = 4;
      wider.target_modules = {"k_proj", "up_proj"};
      const auto v3 = on_device(random_lora_adapter(m_graphs.config(), wider, 3, /*std=*/0.5));

      // base, v1 (first adapter: attach, re-capture), v2 (same shapes: copied in place),
      // v3 (other rank and targets: re-capture), none (re-capture), v2 again.
      const std::vector<const lora_adapter*> versions{nullptr, &v1, &v2, &v3, nullptr, &v2};
      std::vector<std::vector<int32_t>> first_tokens;
      for (std::size_t version = 0; version < versions.size(); ++version) {
        BOOST_TEST_CONTEXT("version " << version) {
          if (version > 0) {
            BOOST_REQUIRE(on.set_adapter(versions[version], version));
            BOOST_REQUIRE(off.set_adapter(versions[version], version));
          }
          const auto copies = on.stats().adapter_copies;
          const auto a = on.generate(reqs), b = off.generate(reqs);
          for (std::size_t i = 0; i < reqs.size(); ++i) {
            check_same(a[i], b[i], tol);
            BOOST_CHECK_EQUAL(a[i].policy_version, version);
          }
          first_tokens.push_back(a[0].completion_tokens);
          BOOST_CHECK_EQUAL(on.stats().adapter_copies, copies);
        }
      }
      check_all_from_graphs(on);
      BOOST_CHECK_EQUAL(on.stats().adapter_copies, 1u); // v2 after v1
      // The adapters change the output, and swapping back restores it.
      BOOST_CHECK(first_tokens[1] != first_tokens[0] || first_tokens[2] != first_tokens[0]);
      BOOST_CHECK(first_tokens[4] == first_tokens[0]);
      BOOST_CHECK(first_tokens[5] == first_tokens[2]);
      // The copy in place left the caller's adapters alone: v1 is still v1.
      const auto v1_again = on_device(random_lora_adapter(m_graphs.config(), lc, 1, 0.5));
      for (const auto& [module, f] : v1.modules)
        BOOST_CHECK(at::equal(f.a, v1_again.modules.at(module).a));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
