// Tests of sampling and the continuous-batching engine on tiny random checkpoints: the sampler
// draws from the distribution it states and returns the log-probabilities the header promises;
// a request's tokens do not depend on the requests batched with it (greedy and sampled, with
// slots refilled mid-run); stop tokens, the model's eos ids, stop strings (text cut before them),
// max_new_tokens and full cache slots end sequences; bad requests end with a named error while
// the rest are served; cancel; adapters swapped between batches; throughput on the CPU.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "model_fixture.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/sampling.hpp"
#include "runtime/model/token_logprobs.hpp"
#include "runtime/tokenizer/stream_decoder.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>

using namespace kbrl::model;
using kbrl::finish_reason;
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
    ids.push_back(static_cast<int32_t>((salt * 37 + i * 11 + 5) % 250 + 3)); // no id below 3
  return ids;
}

generation_engine make_engine(transformer& m, int64_t slots, int64_t max_len = 128,
                              std::optional<kbrl::tok::tokenizer> tok = std::nullopt) {
  generation_engine_options o;
  o.slots = slots;
  o.max_sequence_length = max_len;
  o.key_block = 16;
  o.name = "test-engine";
  auto e = generation_engine::create(m, std::move(tok), o);
  BOOST_REQUIRE_MESSAGE(e, why(e));
  return std::move(*e);
}

/// The result of each request run alone in a one-slot engine.
std::vector<generation_result> alone(transformer& m, const std::vector<generation_request>& reqs,
                                     int64_t max_len = 128) {
  std::vector<generation_result> out;
  for (const auto& r : reqs) {
    auto e = make_engine(m, 1, max_len);
    out.push_back(e.generate({r}).at(0));
  }
  return out;
}

/// Checks that `got` equals `want` token for token, with close log-probabilities.
void check_same(const generation_result& got, const generation_result& want) {
  BOOST_TEST_CONTEXT("request " << want.id) {
    BOOST_CHECK_EQUAL(got.id, want.id);
    BOOST_CHECK_MESSAGE(got.error.empty(), got.error);
    BOOST_CHECK_EQUAL_COLLECTIONS(got.completion_tokens.begin(), got.completion_tokens.end(),
                                  want.completion_tokens.begin(), want.completion_tokens.end());
    BOOST_CHECK(got.finish == want.finish);
    BOOST_REQUIRE_EQUAL(got.logprobs.size(), want.logprobs.size());
    for (std::size_t i = 0; i < got.logprobs.size(); ++i)
      BOOST_CHECK_SMALL(got.logprobs[i] - want.logprobs[i], /*tol=*/1e-4f);
  }
}

/// Logits of a whole sequence (prompt + completion) by one forward without cache, [seq, vocab].
at::Tensor sequence_logits(const transformer& m, const std::vector<int32_t>& prompt,
                           const std::vector<int32_t>& completion) {
  std::vector<int64_t> all(prompt.begin(), prompt.end());
  all.insert(all.end(), completion.begin(), completion.end());
  const auto ids = at::tensor(all, at::kLong).view({1, -1});
  const auto pos = at::arange(ids.size(1), at::kLong).view({1, -1});
  return m.logits(m.forward(ids, pos, causal_mask(at::ones_like(ids, at::kBool))))[0];
}

} // namespace

BOOST_AUTO_TEST_SUITE(generation)

// ---- the sampler -------------------------------------------------------------------------------------

/// 4000 draws from `logits` ([1, 8], on any device) with one row's settings: no token outside
/// `allowed` (what truncation keeps), each token's frequency within 0.035 of its probability after
/// truncation (renormalised), and the first 50 log-probabilities the log-softmax at the
/// temperature, before truncation.
void check_draws(const at::Tensor& logits, double temperature, double top_p, int32_t top_k,
                 at::Generator& gen, const std::set<int32_t>& allowed) {
  const int draws = 4000;
  const auto logp = at::log_softmax(logits[0].to(at::kCPU, at::kFloat) / temperature, -1);
  auto kept = at::zeros({8}, at::kDouble);
  for (auto id : allowed)
    kept[id] = logp[id].exp().item<double>();
  kept = kept / kept.sum();
  std::vector<int> counts(8, 0);
  for (int i = 0; i < draws; ++i) {
    const auto got = sample_tokens(logits, {{temperature, top_p, top_k, &gen}});
    const auto id = got.ids.at(0);
    BOOST_REQUIRE(id >= 0 && id < 8);
    ++counts[id];
    if (i < 50)
      BOOST_CHECK_CLOSE(got.logprobs[0], logp[id].item<float>(), 1e-3);
  }
  for (int id = 0; id < 8; ++id) {
    const double want = kept[id].item<double>();
    if (allowed.count(id) == 0)
      BOOST_CHECK_MESSAGE(counts[id] == 0, "token " << id << " drawn though truncated");
    // 4000 draws: the standard deviation of a frequency is at most 0.008.
    BOOST_CHECK_MESSAGE(std::abs(counts[id] / double(draws) - want) < 0.035,
                        "token " << id << ": frequency " << counts[id] / double(draws)
                                 << ", probability " << want);
  }
}

BOOST_AUTO_TEST_CASE(sampler_draws_from_the_stated_distribution) {
  const auto logits = at::tensor({2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f}).view({1, 8});
  struct setting {
    double temperature, top_p;
    int32_t top_k;
    std::set<int32_t> allowed; ///< the tokens truncation keeps
  };
  // With T = 0.8 the probabilities are about .39 .21 .11 .06 .03 .02 .01 .00:
  // top_p 0.6 keeps {0, 1} (mass before 1 is .39 < .6, before 2 is .60), top_k 3 keeps {0, 1, 2}.
  for (const auto& s : std::vector<setting>{{0.8, 1.0, 0, {0, 1, 2, 3, 4, 5, 6, 7}},
                                            {0.8, 1.0, 3, {0, 1, 2}},
                                            {0.8, 0.55, 0, {0, 1}},
                                            {1.3, 0.9, 4, {0, 1, 2, 3}}}) {
    BOOST_TEST_CONTEXT("T " << s.temperature << " top_p " << s.top_p << " top_k " << s.top_k) {
      auto gen = make_generator(11, at::kCPU);
      check_draws(logits, s.temperature, s.top_p, s.top_k, gen, s.allowed);
    }
  }
}

BOOST_AUTO_TEST_CASE(greedy_rows_take_the_argmax_with_unit_temperature_logprobs) {
  const auto logits = at::tensor({0.1f, 3.0f, 3.0f, -1.0f, 0.5f, 2.0f}).view({2, 3});
  auto gen = make_generator(1, at::kCPU);
  const auto got = sample_tokens(logits, {{0.0, 1.0, 0, nullptr}, {0.0, 0.5, 1, &gen}});
  BOOST_CHECK_EQUAL(got.ids[0], 1); // the lower id among equal maxima
  BOOST_CHECK_EQUAL(got.ids[1], 2);
  BOOST_CHECK_CLOSE(got.logprobs[0], at::log_softmax(logits[0], -1)[1].item<float>(), 1e-4);
  BOOST_CHECK_CLOSE(got.logprobs[1], at::log_softmax(logits[1], -1)[2].item<float>(), 1e-4);
}

BOOST_AUTO_TEST_CASE(a_rows_draws_do_not_depend_on_the_other_rows) {
  auto gen_logits = make_generator(5, at::kCPU);
  const auto logits = at::randn({3, 50}, gen_logits);
  auto a1 = make_generator(42, at::kCPU), a2 = make_generator(42, at::kCPU);
  auto other = make_generator(7, at::kCPU);
  for (int step = 0; step < 20; ++step) {
    const auto together = sample_tokens(logits, {{0.0, 1, 0, nullptr}, {1.0, 0.9, 20, &a1},
                                                 {0.7, 1, 0, &other}});
    const auto by_itself = sample_tokens(logits.narrow(0, 1, 1), {{1.0, 0.9, 20, &a2}});
    BOOST_CHECK_EQUAL(together.ids[1], by_itself.ids[0]);
    BOOST_CHECK_EQUAL(together.logprobs[1], by_itself.logprobs[0]);
  }
}

BOOST_AUTO_TEST_CASE(cuda_sampling_draws_from_the_distribution_whatever_the_batch) {
  // Runs where libtorch has CUDA and a GPU is visible (the GPU machine); says so elsewhere.
  if (!at::hasCUDA()) {
    BOOST_TEST_MESSAGE("no CUDA device: cuda_sampling_draws_from_the_distribution_whatever_the_batch"
                       " checks nothing here");
    return;
  }
  const auto cuda = at::TensorOptions(at::kCUDA);
  // Without top-k / top-p, CUDA rows take the two-kernel exponential race (cuda/sample_kernel.cuh):
  // its frequencies are the softmax's, in float32 and bfloat16 logits (these are exact in both).
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    BOOST_TEST_CONTEXT(c10::toString(dtype)) {
      const auto logits =
        at::tensor({2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f}).view({1, 8});
      auto gen = make_generator(11, at::kCUDA);
      check_draws(logits.to(cuda.dtype(dtype)), 0.8, 1.0, 0, gen, {0, 1, 2, 3, 4, 5, 6, 7});
    }
  }
  // A Qwen-sized vocabulary (37 slices of the first kernel): a greedy row takes the argmax with
  // temperature-1 log-probabilities; a sampled row draws the same tokens with the same
  // log-probabilities in a batch as alone; a top-p row in the batch takes the composition.
  auto gen_logits = make_generator(5, at::kCPU);
  const auto logits = (at::randn({3, 151936}, gen_logits) * 4).to(cuda);
  auto a1 = make_generator(42, at::kCUDA), a2 = make_generator(42, at::kCUDA);
  auto b1 = make_generator(9, at::kCUDA), b2 = make_generator(9, at::kCUDA);
  auto other = make_generator(7, at::kCUDA);
  std::set<int32_t> seen;
  for (int step = 0; step < 10; ++step) {
    const auto together =
      sample_tokens(logits, {{0.0, 1, 0, nullptr}, {0.9, 1, 0, &a1}, {1.0, 1, 0, &other}});
    const auto by_itself = sample_tokens(logits.narrow(0, 1, 1), {{0.9, 1, 0, &a2}});
    BOOST_CHECK_EQUAL(together.ids[1], by_itself.ids[0]);
    BOOST_CHECK_EQUAL(together.logprobs[1], by_itself.logprobs[0]);
    seen.insert(together.ids[1]);
    BOOST_CHECK_EQUAL(together.ids[0], logits[0].argmax().item<int64_t>());
    const auto logp0 = at::log_softmax(logits[0].to(at::kDouble), -1);
    BOOST_CHECK_CLOSE(together.logprobs[0], logp0[together.ids[0]].item<double>(), 1e-3);
    const auto logp1 = at::log_softmax(logits[1].to(at::kDouble) / 0.9, -1);
    BOOST_CHECK_CLOSE(together.logprobs[1], logp1[together.ids[1]].item<double>(), 1e-3);
    // Next to a top-p row, the other rows still take the kernels: the same draws as alone.
    const auto mixed =
      sample_tokens(logits, {{0.0, 1, 0, nullptr}, {0.9, 0.95, 0, &other}, {1.0, 1, 0, &b1}});
    const auto b_alone = sample_tokens(logits.narrow(0, 2, 1), {{1.0, 1, 0, &b2}});
    BOOST_CHECK_EQUAL(mixed.ids[0], together.ids[0]);
    BOOST_CHECK_EQUAL(mixed.logprobs[0], together.logprobs[0]);
    BOOST_CHECK_EQUAL(mixed.ids[2], b_alone.ids[0]);
    BOOST_CHECK_EQUAL(mixed.logprobs[2], b_alone.logprobs[0]);
  }
  BOOST_CHECK_MESSAGE(seen.size() > 1, "10 steps drew one token every time: the stream does not "
                                       "advance");
}

BOOST_AUTO_TEST_CASE(sampling_params_out_of_range_are_named) {
  kbrl::sampling_params p;
  p.temperature = -1;
  p.top_p = 0;
  p.top_k = -2;
  p.max_new_tokens = 0;
  p.stop_strings = {""};
  auto ok = check_sampling_params(p);
  BOOST_REQUIRE(!ok);
  const auto text = kbrl::describe(ok.error());
  for (const char* part : {"temperature", "top_p", "top_k", "max_new_tokens", "stop_strings"})
    BOOST_CHECK_MESSAGE(text.find(part) != std::string::npos, part << " missing: " << text);
  BOOST_CHECK(check_sampling_params(kbrl::sampling_params{}));
}

// ---- the engine --------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(greedy_batched_equals_alone_and_full_forward) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen2"));
  std::vector<generation_request> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(token_request(i, prompt_of(3 + 4 * i, i), 0.0, 10 + i));
  auto engine = make_engine(m, 4);
  const auto batched = engine.generate(reqs);
  const auto single = alone(m, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    check_same(batched[i], single[i]);
    BOOST_CHECK_EQUAL(batched[i].prompt_token_count, static_cast<int32_t>(reqs[i].prompt_tokens.size()));
    BOOST_CHECK_EQUAL(batched[i].sampler, "test-engine");
    // Each greedy token is the argmax of a full re-forward, its logprob that logit's
    // log-softmax (the last token may be the model's eos: the tiny config says 2).
    c10::InferenceMode guard;
    const auto& done = batched[i].completion_tokens;
    const auto logits = sequence_logits(m, reqs[i].prompt_tokens, done);
    const int64_t first = static_cast<int64_t>(reqs[i].prompt_tokens.size()) - 1;
    for (std::size_t t = 0; t < done.size(); ++t) {
      const auto row = logits[first + t];
      BOOST_CHECK_EQUAL(row.argmax().item<int64_t>(), done[t]);
      BOOST_CHECK_SMALL(at::log_softmax(row, -1)[done[t]].item<float>() - batched[i].logprobs[t],
                        1e-4f);
    }
    BOOST_CHECK(batched[i].finish == finish_reason::length
                || (batched[i].finish == finish_reason::stop_token && done.back() == 2));
  }
  BOOST_CHECK(engine.idle());
  BOOST_CHECK_GT(engine.stats().decode_steps, 0u);
}

BOOST_AUTO_TEST_CASE(continuous_batching_gives_each_request_its_own_samples) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("llama"));
  // 9 requests through 3 slots with different lengths: slots are refilled while others run.
  std::vector<generation_request> reqs;
  for (int i = 0; i < 9; ++i) {
    auto r = token_request(100 + i, prompt_of(2 + (i * 5) % 11, i), 0.7 + 0.1 * (i % 3), 4 + (i * 7) % 13,
                     /*seed=*/1000 + i);
    r.params.top_p = i % 2 ? 0.9 : 1.0;
    r.params.top_k = i % 3 == 0 ? 40 : 0;
    reqs.push_back(r);
  }
  auto engine = make_engine(m, 3);
  for (const auto& r : reqs)
    engine.submit(r);
  std::map<uint64_t, generation_result> got;
  std::size_t most_running = 0;
  bool refilled_while_running = false;
  while (!engine.idle()) {
    engine.step();
    most_running = std::max(most_running, engine.running());
    for (auto& r : engine.take_results()) {
      // A slot freed while others still run gets the next waiting request at the next step.
      if (engine.running() > 0 && engine.waiting() > 0)
        refilled_while_running = true;
      got[r.id] = std::move(r);
    }
  }
  BOOST_CHECK_EQUAL(most_running, 3u);
  BOOST_CHECK(refilled_while_running);
  const auto single = alone(m, reqs);
  BOOST_REQUIRE_EQUAL(got.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i)
    check_same(got.at(reqs[i].id), single[i]);
  // Fewer decode steps than batches of three that wait for their longest member.
  uint64_t static_steps = 0;
  for (std::size_t b = 0; b < reqs.size(); b += 3) {
    std::size_t longest = 0;
    for (std::size_t i = b; i < b + 3; ++i)
      longest = std::max(longest, got.at(reqs[i].id).completion_tokens.size());
    static_steps += longest - 1; // the first token comes from the prefill
  }
  BOOST_TEST_MESSAGE("continuous batching: " << engine.stats().decode_steps
                     << " decode steps, static batches of 3 would take " << static_steps);
  BOOST_CHECK_LT(engine.stats().decode_steps, static_steps);

  // Same seed, same tokens; another seed, other tokens.
  auto again = make_engine(m, 2).generate({reqs[4]}).at(0);
  check_same(again, single[4]);
  auto other_seed = reqs[4];
  other_seed.params.seed += 1;
  other_seed.params.max_new_tokens = 16;
  auto base_seed = reqs[4];
  base_seed.params.max_new_tokens = 16;
  const auto two = make_engine(m, 2).generate({base_seed, other_seed});
  BOOST_CHECK(two[0].completion_tokens != two[1].completion_tokens);
}

BOOST_AUTO_TEST_CASE(sampled_logprobs_are_before_truncation) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen3"));
  auto r = token_request(1, prompt_of(6, 3), 0.8, 12, 77);
  r.params.top_k = 5;
  r.params.top_p = 0.8;
  auto engine = make_engine(m, 2);
  const auto res = engine.generate({r}).at(0);
  BOOST_REQUIRE(!res.completion_tokens.empty());
  c10::InferenceMode guard;
  const auto logits = sequence_logits(m, r.prompt_tokens, res.completion_tokens);
  for (std::size_t t = 0; t < res.completion_tokens.size(); ++t) {
    const auto row = logits[static_cast<int64_t>(r.prompt_tokens.size()) - 1 + t];
    const auto id = res.completion_tokens[t];
    BOOST_CHECK_SMALL(at::log_softmax(row / 0.8, -1)[id].item<float>() - res.logprobs[t], 1e-4f);
    // Drawn from the top 5 only.
    BOOST_CHECK(std::get<1>(row.topk(5)).eq(id).any().item<bool>());
  }
  // What a learner recomputes, in chunks of 3 positions: the same numbers.
  std::vector<int64_t> all(r.prompt_tokens.begin(), r.prompt_tokens.end());
  all.insert(all.end(), res.completion_tokens.begin(), res.completion_tokens.end());
  const auto ids = at::tensor(all, at::kLong).view({1, -1});
  const int64_t n = ids.size(1);
  const auto hidden = m.forward(ids.narrow(1, 0, n - 1), at::arange(n - 1, at::kLong).view({1, -1}),
                                causal_mask(at::ones({1, n - 1}, at::kBool)));
  const auto recomputed = token_logprobs(m, hidden, ids.narrow(1, 1, n - 1), 0.8, /*chunk=*/3);
  const auto completion = recomputed[0].narrow(0, r.prompt_tokens.size() - 1, res.logprobs.size());
  kbrl::test::check_close(completion, at::tensor(res.logprobs), 1e-4, "token_logprobs");
}

BOOST_AUTO_TEST_CASE(stop_tokens_eos_and_lengths_end_sequences) {
  temp_dir dir;
  auto config = tiny_model_config("qwen2");
  auto m = tiny_transformer(dir, config);
  const auto prompt = prompt_of(5, 1);
  auto engine = make_engine(m, 2, /*max_len=*/32);
  const auto free_run = engine.generate({token_request(1, prompt, 0.0, 20)}).at(0);
  BOOST_REQUIRE_EQUAL(free_run.completion_tokens.size(), 20u);
  BOOST_CHECK(free_run.finish == finish_reason::length);

  // A stop token: the completion ends with its first occurrence.
  const int32_t stop = free_run.completion_tokens[6];
  auto with_stop = token_request(2, prompt, 0.0, 20);
  with_stop.params.stop_token_ids = {stop};
  const auto stopped = engine.generate({with_stop}).at(0);
  const auto first = std::find(free_run.completion_tokens.begin(), free_run.completion_tokens.end(), stop);
  BOOST_CHECK(stopped.finish == finish_reason::stop_token);
  BOOST_CHECK_EQUAL_COLLECTIONS(stopped.completion_tokens.begin(), stopped.completion_tokens.end(),
                                free_run.completion_tokens.begin(), first + 1);

  // The model's own eos ids (config.json / generation_config.json) stop it too.
  config.eos_token_ids = {stop};
  auto m_eos = tiny_transformer(dir, config, /*seed=*/7); // same weights, other eos
  BOOST_CHECK(m_eos.eos_token_ids() == std::vector<int64_t>{stop});
  auto engine_eos = make_engine(m_eos, 1, 32);
  const auto eos = engine_eos.generate({token_request(3, prompt, 0.0, 20)}).at(0);
  BOOST_CHECK(eos.finish == finish_reason::stop_token);
  BOOST_CHECK(eos.completion_tokens == stopped.completion_tokens);

  // A full cache slot: prompt + completion never exceed max_sequence_length.
  const auto full = engine.generate({token_request(4, prompt_of(28, 2), 0.0, 100)}).at(0);
  BOOST_CHECK(full.finish == finish_reason::length);
  BOOST_CHECK_EQUAL(full.completion_tokens.size(), 4u);
}

BOOST_AUTO_TEST_CASE(stop_strings_cut_the_text_before_them) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("llama"));
  const auto tok = kbrl::test::byte_tokenizer();
  auto engine = make_engine(m, 2, 64, tok);
  auto r = token_request(1, prompt_of(4, 9), 0.0, 24);
  const auto free_run = engine.generate({r}).at(0);
  BOOST_REQUIRE_EQUAL(free_run.completion_tokens.size(), 24u);
  // The text is the stream-decoded completion (special tokens skipped: there are none here).
  BOOST_CHECK_EQUAL(free_run.completion_text, tok.decode(free_run.completion_tokens, true));

  // Stop at four bytes from the middle of the text: it ends just before their first occurrence.
  const auto& text = free_run.completion_text;
  BOOST_REQUIRE_GT(text.size(), 12u);
  const std::string stop_string = text.substr(text.size() / 3, 4);
  const auto cut = text.find(stop_string);
  r.params.stop_strings = {"never appears \x01\x02", stop_string};
  const auto stopped = engine.generate({r}).at(0);
  BOOST_CHECK(stopped.finish == finish_reason::stop_string);
  BOOST_CHECK_EQUAL(stopped.completion_text, text.substr(0, cut));
  // The tokens are the free run's up to the one that completed the stop string.
  BOOST_CHECK_LT(stopped.completion_tokens.size(), free_run.completion_tokens.size());
  BOOST_CHECK(std::equal(stopped.completion_tokens.begin(), stopped.completion_tokens.end(),
                         free_run.completion_tokens.begin()));
  BOOST_CHECK_GE(tok.decode(stopped.completion_tokens).size(), cut + stop_string.size());
  // One token fewer, and the text streamed so far (complete characters only) lacks it.
  kbrl::tok::stream_decoder stream(tok, /*skip_special=*/true);
  std::string streamed;
  for (std::size_t i = 0; i + 1 < stopped.completion_tokens.size(); ++i)
    streamed += stream.push(stopped.completion_tokens[i]);
  BOOST_CHECK(streamed.find(stop_string) == std::string::npos);

  // prompt_text is encoded with the tokenizer: the same as its bytes as token ids here.
  const std::string prompt_text = "kbrl writes kernels";
  auto text_request = token_request(2, {}, 0.0, 5);
  text_request.prompt_text = prompt_text;
  const auto by_bytes = token_request(3, std::vector<int32_t>(prompt_text.begin(), prompt_text.end()), 0.0, 5);
  const auto both = engine.generate({text_request, by_bytes});
  BOOST_CHECK_MESSAGE(both[0].error.empty(), both[0].error);
  BOOST_CHECK_EQUAL(both[0].prompt_token_count, static_cast<int32_t>(prompt_text.size()));
  BOOST_CHECK(both[0].completion_tokens == both[1].completion_tokens);
}

BOOST_AUTO_TEST_CASE(bad_requests_fail_alone_with_a_reason) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen3"));
  auto engine = make_engine(m, 2, /*max_len=*/16);
  std::vector<std::pair<generation_request, std::string>> bad;
  bad.emplace_back(token_request(1, {}, 0.0, 4), "no prompt");
  auto both = token_request(2, {5, 6}, 0.0, 4);
  both.prompt_text = "x";
  bad.emplace_back(both, "both prompt_text and prompt_tokens");
  bad.emplace_back(token_request(3, {5, 256, 7}, 0.0, 4), "prompt token 1 is 256, outside the vocabulary [0, 256)");
  bad.emplace_back(token_request(4, prompt_of(16, 1), 0.0, 4), "prompt of 16 tokens leaves no room");
  bad.emplace_back(token_request(5, {5}, -0.5, 4), "temperature");
  auto text_without_tokenizer = token_request(6, {}, 0.0, 4);
  text_without_tokenizer.prompt_text = "hello";
  bad.emplace_back(text_without_tokenizer, "prompt_text needs a tokenizer");
  auto stop_without_tokenizer = token_request(7, {5}, 0.0, 4);
  stop_without_tokenizer.params.stop_strings = {"x"};
  bad.emplace_back(stop_without_tokenizer, "stop strings need a tokenizer");

  std::vector<generation_request> all;
  for (auto& [r, why] : bad)
    all.push_back(r);
  all.push_back(token_request(8, prompt_of(4, 2), 0.0, 5)); // a good one among them
  const auto results = engine.generate(all);
  for (std::size_t i = 0; i < bad.size(); ++i) {
    BOOST_TEST_CONTEXT("request " << results[i].id) {
      BOOST_CHECK(results[i].finish == finish_reason::error);
      BOOST_CHECK_MESSAGE(results[i].error.find(bad[i].second) != std::string::npos,
                          "'" << bad[i].second << "' missing from: " << results[i].error);
      BOOST_CHECK(results[i].completion_tokens.empty());
    }
  }
  BOOST_CHECK(results.back().finish == finish_reason::length);
  BOOST_CHECK_EQUAL(results.back().completion_tokens.size(), 5u);

  // Options out of range.
  generation_engine_options o;
  o.slots = 0;
  o.max_sequence_length = 1;
  auto refused = generation_engine::create(m, std::nullopt, o);
  BOOST_REQUIRE(!refused);
  const auto text = kbrl::describe(refused.error());
  BOOST_CHECK(text.find("slots") != std::string::npos
              && text.find("max_sequence_length") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cancel_and_callbacks) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen2"));
  auto engine = make_engine(m, 1);
  std::vector<generation_result> seen;
  engine.on_result([&](generation_result r) { seen.push_back(std::move(r)); });
  const auto running = engine.submit(token_request(1, prompt_of(4, 1), 0.0, 50));
  const auto waiting = engine.submit(token_request(2, prompt_of(4, 2), 0.0, 50));
  engine.step();
  engine.step();
  BOOST_CHECK(engine.cancel(waiting));
  BOOST_CHECK(engine.cancel(running));
  BOOST_CHECK(!engine.cancel(running));
  BOOST_CHECK(engine.idle());
  BOOST_REQUIRE_EQUAL(seen.size(), 2u);
  BOOST_CHECK(seen[0].finish == finish_reason::cancelled && seen[0].id == 2);
  BOOST_CHECK(seen[0].completion_tokens.empty());
  BOOST_CHECK(seen[1].finish == finish_reason::cancelled && seen[1].id == 1);
  // Two steps: the prefill's token and a decoded one, then one more decoded.
  BOOST_CHECK_EQUAL(seen[1].completion_tokens.size(), 3u);
  BOOST_CHECK(engine.take_results().empty());
}

BOOST_AUTO_TEST_CASE(adapters_swap_between_batches) {
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("llama"));
  auto engine = make_engine(m, 3);
  std::vector<generation_request> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(token_request(i, prompt_of(5 + i, i), 0.0, 12));
  const auto base = engine.generate(reqs);

  lora_config lc;
  lc.r = 8;
  lc.lora_alpha = 16;
  lc.target_modules = {"q_proj", "v_proj", "o_proj", "down_proj"};
  const auto zero = random_lora_adapter(m.config(), lc, 1, 0.02, /*zero_b=*/true);
  BOOST_REQUIRE(engine.set_adapter(&zero, 1));
  const auto with_zero = engine.generate(reqs);
  const auto v2 = random_lora_adapter(m.config(), lc, 2, /*std=*/0.5);
  BOOST_REQUIRE(engine.set_adapter(&v2, 2));
  const auto with_v2 = engine.generate(reqs);
  BOOST_REQUIRE(engine.set_adapter(nullptr, 3));
  const auto disabled = engine.generate(reqs);
  int changed = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    BOOST_CHECK(with_zero[i].completion_tokens == base[i].completion_tokens);
    BOOST_CHECK_EQUAL(with_zero[i].policy_version, 1u);
    changed += with_v2[i].completion_tokens != base[i].completion_tokens;
    BOOST_CHECK_EQUAL(with_v2[i].policy_version, 2u);
    BOOST_CHECK(disabled[i].completion_tokens == base[i].completion_tokens);
    BOOST_CHECK(disabled[i].logprobs == base[i].logprobs);
  }
  BOOST_CHECK_GT(changed, 0);

  // An adapter for another model is refused and the current one stays.
  auto other = tiny_model_config("llama");
  other.num_hidden_layers = 3;
  const auto foreign = random_lora_adapter(other, lc, 3);
  BOOST_REQUIRE(engine.set_adapter(&v2, 4));
  BOOST_CHECK(!engine.set_adapter(&foreign, 5));
  BOOST_CHECK_EQUAL(engine.policy_version(), 4u);
  BOOST_CHECK(engine.generate(reqs)[0].completion_tokens == with_v2[0].completion_tokens);
}

BOOST_AUTO_TEST_CASE(overlapped_steps_give_the_same_results) {
  // Step overlap (launch a step before taking the last one's tokens) is the default on CUDA
  // only; here it runs on the CPU against the plain order, request by request: greedy and
  // sampled rows, top-p, stop tokens, stop strings, max_new_tokens, a full cache slot, more
  // requests than slots (refilled mid-run), a cancel and an adapter swap with a step in flight.
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("llama"));
  const auto tok = kbrl::test::byte_tokenizer();
  const auto engine_with = [&](generation_engine_options::overlap_mode overlap) {
    generation_engine_options o;
    o.slots = 3;
    o.max_sequence_length = 40;
    o.key_block = 16;
    o.step_overlap = overlap;
    auto e = generation_engine::create(m, tok, o);
    BOOST_REQUIRE_MESSAGE(e, why(e));
    return std::move(*e);
  };
  using mode = generation_engine_options::overlap_mode;
  auto plain = engine_with(mode::off), overlapped = engine_with(mode::on);
  const auto free_run = plain.generate({token_request(50, prompt_of(4, 9), 0.0, 16)}).at(0);
  BOOST_REQUIRE_EQUAL(free_run.completion_tokens.size(), 16u);

  std::vector<generation_request> reqs;
  for (int i = 0; i < 8; ++i) {
    auto r = token_request(100 + i, prompt_of(3 + (i * 5) % 9, i), i % 3 ? 0.8 : 0.0,
                           1 + (i * 7) % 13, /*seed=*/2000 + i);
    r.params.top_p = i % 4 == 1 ? 0.9 : 1.0;
    reqs.push_back(r);
  }
  auto stop_token = token_request(200, prompt_of(4, 9), 0.0, 16);
  stop_token.params.stop_token_ids = {free_run.completion_tokens[5]};
  auto stop_string = token_request(201, prompt_of(4, 9), 0.0, 16);
  stop_string.params.stop_strings = {free_run.completion_text.substr(4, 2)};
  reqs.push_back(stop_token);
  reqs.push_back(stop_string);
  reqs.push_back(token_request(202, prompt_of(36, 3), 0.5, 100, 7)); // 4 positions left
  const auto want = plain.generate(reqs);
  const auto got = overlapped.generate(reqs);
  BOOST_CHECK(want[8].finish == finish_reason::stop_token);
  BOOST_CHECK(want[9].finish == finish_reason::stop_string);
  BOOST_CHECK(want[10].finish == finish_reason::length);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    check_same(got[i], want[i]);
    BOOST_CHECK(got[i].logprobs == want[i].logprobs);
    BOOST_CHECK_EQUAL(got[i].completion_text, want[i].completion_text);
  }

  // The same calls, step by step: a cancel and an adapter swap while a step is in flight.
  lora_config lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = {"q_proj", "down_proj"};
  const auto adapter = random_lora_adapter(m.config(), lc, 5, /*std=*/0.5);
  const auto drive = [&](generation_engine& e) {
    std::map<uint64_t, generation_result> out;
    e.on_result([&](generation_result r) { out[r.id] = std::move(r); });
    std::vector<uint64_t> tickets;
    for (int i = 0; i < 3; ++i)
      tickets.push_back(e.submit(token_request(300 + i, prompt_of(5, 20 + i), 0.0, 14)));
    for (int call = 0; call < 5; ++call)
      e.step();
    BOOST_CHECK(e.cancel(tickets[1]));
    e.step();
    BOOST_REQUIRE(e.set_adapter(&adapter, 9));
    e.run_until_idle();
    BOOST_REQUIRE(e.set_adapter(nullptr, 10));
    return out;
  };
  const auto want_steps = drive(plain), got_steps = drive(overlapped);
  BOOST_REQUIRE_EQUAL(want_steps.size(), 3u);
  BOOST_REQUIRE_EQUAL(got_steps.size(), 3u);
  // Overlap delivers a step's tokens one call later: the cancelled request has one token less.
  const auto& cancelled = want_steps.at(301);
  BOOST_CHECK(cancelled.finish == finish_reason::cancelled);
  BOOST_CHECK(got_steps.at(301).finish == finish_reason::cancelled);
  BOOST_CHECK_EQUAL(got_steps.at(301).completion_tokens.size() + 1,
                    cancelled.completion_tokens.size());
  for (uint64_t id : {300u, 302u}) {
    check_same(got_steps.at(id), want_steps.at(id));
    BOOST_CHECK(got_steps.at(id).logprobs == want_steps.at(id).logprobs);
  }
  // The adapter changed the tokens after the swap (so the comparison above saw it).
  auto base_only = engine_with(mode::off);
  const auto without = base_only.generate({token_request(300, prompt_of(5, 20), 0.0, 14)}).at(0);
  BOOST_CHECK(without.completion_tokens != want_steps.at(300).completion_tokens);
}

BOOST_AUTO_TEST_CASE(cuda_agrees_with_the_cpu) {
  // Runs where libtorch has CUDA and a GPU is visible (the GPU machine); says so elsewhere.
  if (!at::hasCUDA()) {
    BOOST_TEST_MESSAGE("no CUDA device: cuda_agrees_with_the_cpu checks nothing here");
    return;
  }
  temp_dir dir;
  for (const auto& arch : {"qwen2", "qwen3", "llama"}) {
    BOOST_TEST_CONTEXT(arch) {
      auto cpu = tiny_transformer(dir, tiny_model_config(arch));
      auto gpu = tiny_transformer(dir, tiny_model_config(arch), 7, {at::kCUDA, at::kFloat});
      auto gpu_bf16 = tiny_transformer(dir, tiny_model_config(arch), 7, {at::kCUDA, at::kBFloat16});
      std::vector<generation_request> reqs;
      for (int i = 0; i < 4; ++i)
        reqs.push_back(token_request(i, prompt_of(4 + 3 * i, i), 0.0, 12));
      const auto on_cpu = make_engine(cpu, 2).generate(reqs);
      const auto on_gpu = make_engine(gpu, 2).generate(reqs);
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        BOOST_CHECK_MESSAGE(on_gpu[i].error.empty(), on_gpu[i].error);
        BOOST_CHECK(on_gpu[i].completion_tokens == on_cpu[i].completion_tokens);
      }
      // Sampling with per-request CUDA generators: reproducible, whatever the batch.
      auto sampled = reqs;
      for (auto& r : sampled) {
        r.params.temperature = 0.9;
        r.params.top_p = 0.95;
        r.params.seed = 100 + r.id;
      }
      const auto batched = make_engine(gpu, 4).generate(sampled);
      for (std::size_t i = 0; i < sampled.size(); ++i) {
        const auto single = make_engine(gpu, 1).generate({sampled[i]}).at(0);
        BOOST_CHECK_MESSAGE(batched[i].error.empty(), batched[i].error);
        BOOST_CHECK(single.completion_tokens == batched[i].completion_tokens);
      }
      // bfloat16 runs (its rounding differs with the batch, so only that it runs is checked).
      for (const auto& r : make_engine(gpu_bf16, 4).generate(sampled)) {
        BOOST_CHECK_MESSAGE(r.error.empty(), r.error);
        BOOST_CHECK(!r.completion_tokens.empty());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(throughput_on_the_cpu) {
  // Not a check of speed (shared machine), a measurement to report: tiny qwen2, 16 requests of
  // 16 prompt + 48 new tokens, one slot against eight.
  temp_dir dir;
  auto m = tiny_transformer(dir, tiny_model_config("qwen2"));
  std::vector<generation_request> reqs;
  for (int i = 0; i < 16; ++i) {
    auto r = token_request(i, prompt_of(16, i), 0.8, 48, i);
    reqs.push_back(r);
  }
  for (int64_t slots : {1, 8}) {
    auto engine = make_engine(m, slots, 128);
    const auto t0 = std::chrono::steady_clock::now();
    const auto results = engine.generate(reqs);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::size_t tokens = 0;
    for (const auto& r : results)
      tokens += r.completion_tokens.size();
    BOOST_CHECK_GT(tokens, 0u);
    BOOST_TEST_MESSAGE("generation throughput, tiny qwen2 on the CPU, " << slots << " slot(s): "
                       << tokens << " tokens in " << s << " s = " << tokens / s << " tokens/s ("
                       << engine.stats().decode_steps << " decode steps, prefill "
                       << engine.stats().prefill_seconds << " s)");
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Measurements, in a suite of their own that is disabled: Boost.Test runs the disabled test
// cases of a suite that is selected by name (ctest's --run_test=generation would run them).
BOOST_AUTO_TEST_SUITE(generation_measurements, *boost::unit_test::disabled())

BOOST_AUTO_TEST_CASE(measure_a_small_model) {
  // A measurement, disabled by default (--run_test=generation_measurements): a model of
  // 8 layers, hidden 512, vocabulary 32000 (about 60M parameters) on the CPU, float32.
  temp_dir dir;
  auto c = tiny_model_config("qwen2");
  c.vocab_size = 32000;
  c.hidden_size = 512;
  c.intermediate_size = 1536;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  auto m = tiny_transformer(dir, c);
  std::vector<generation_request> reqs;
  for (int i = 0; i < 16; ++i)
    reqs.push_back(token_request(i, prompt_of(64, i), 0.8, 64, i));
  for (int64_t slots : {1, 4, 16}) {
    auto engine = make_engine(m, slots, 256);
    const auto t0 = std::chrono::steady_clock::now();
    const auto results = engine.generate(reqs);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::size_t tokens = 0;
    for (const auto& r : results)
      tokens += r.completion_tokens.size();
    BOOST_TEST_MESSAGE("small qwen2 (60M) on the CPU, " << slots << " slot(s): " << tokens
                       << " tokens in " << s << " s = " << tokens / s << " tokens/s (prefill "
                       << engine.stats().prefill_seconds << " s, decode "
                       << engine.stats().decode_seconds << " s)");
  }
}

BOOST_AUTO_TEST_SUITE_END()
