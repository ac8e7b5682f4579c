// Data-parallel LoRA training on the CPU over Gloo and loopback: c10d collectives between rank
// threads (in-process and TCP rendezvous, a timeout instead of a hang), token-balanced sharding,
// two replicas training exactly like one trainer, a checkpoint of the two-replica run resuming
// identically, one replica's bad sample failing the step on every replica with its error, and
// the learner running two CPU replicas (learner.data_parallel_ranks = 2).

#include "model_fixture.hpp"
#include "runtime/io/elapsed.hpp"
#include "training_samples.hpp"
#include "runtime/train/checkpoint.hpp"
#include "runtime/train/collective_group.hpp"
#include "runtime/train/data_parallel.hpp"
#include "runtime/train/learner_core.hpp"
#include "test_support.hpp"

#include "messages/errors.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>
#include <set>
#include <thread>

using namespace kbrl;
using kbrl::test::temp_dir;
using kbrl::test::why;
namespace fs = std::filesystem;

namespace {

/// Runs fn(rank) on `size` threads at once (collectives need every rank), returns the results.
template <class Fn>
auto on_ranks(int size, Fn fn) {
  using result = decltype(fn(0));
  std::vector<std::optional<result>> out(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] { out[r] = fn(r); });
  for (auto& t : threads)
    t.join();
  return out;
}

/// A tiny random qwen2 checkpoint written once; replicas load it as often as needed.
struct tiny_model {
  temp_dir dir;
  fs::path path = dir / "qwen2";

  tiny_model() {
    auto written =
      model::write_random_checkpoint(path, model::tiny_model_config("qwen2"), /*seed=*/7);
    BOOST_REQUIRE_MESSAGE(written, why(written));
  }

  std::unique_ptr<model::transformer> load(at::ScalarType dtype = at::kFloat) const {
    model::transformer_options o;
    o.dtype = dtype;
    auto m = model::transformer::load(path, o);
    BOOST_REQUIRE_MESSAGE(m, why(m));
    return std::make_unique<model::transformer>(std::move(*m));
  }

  std::vector<std::unique_ptr<model::transformer>> replicas(int n) const {
    std::vector<std::unique_ptr<model::transformer>> out;
    for (int i = 0; i < n; ++i)
      out.push_back(load());
    return out;
  }
};

/// Samples of random tokens and lengths (prompt 2-9, completion 1-12), sampler logprobs near
/// the tiny models' -log(256).
std::vector<train::training_sample> random_samples(uint64_t seed, int count) {
  return test::random_training_samples(seed, count, /*prompt_spread=*/8,
                                       /*completion_spread=*/12);
}

train::trainer_options small_options() {
  train::trainer_options o;
  o.lora_r = 4;
  o.lora_alpha = 8;
  o.adamw.lr = 1e-3;
  o.micro_batch_tokens = 48; // several micro-batches per replica
  o.logprob_chunk = 8;
  o.clip_norm = 1.0;
  return o;
}

/// A single trainer whose factors are small random values (B non-zero: every factor has a
/// gradient from the first step), and that adapter, to start the replicas from.
struct reference_trainer {
  std::unique_ptr<model::transformer> model;
  std::unique_ptr<train::lora_trainer> trainer;
  model::lora_adapter start;

  reference_trainer(const tiny_model& m, const train::trainer_options& options,
                    at::ScalarType model_dtype = at::kFloat) {
    model = m.load(model_dtype);
    auto t = train::lora_trainer::create(*model, options);
    BOOST_REQUIRE_MESSAGE(t, why(t));
    trainer = std::move(*t);
    auto gen = at::detail::createCPUGenerator(99);
    trainer->set_parameters(at::randn({trainer->lora().size()}, gen).mul(0.05));
    start = trainer->adapter();
  }
};

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

train::group_options quick_timeout(double seconds) {
  train::group_options g;
  g.timeout_s = seconds;
  return g;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_parallel)

// -- collectives ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(gloo_sums_and_broadcasts_between_rank_threads) {
  if (!train::gloo_available()) {
    // A build without Gloo must say so instead of training on one replica silently.
    auto g = train::join_group(train::make_in_process_store(), 0, 2, at::kCPU, {});
    BOOST_REQUIRE(!g);
    BOOST_CHECK_EQUAL(g.error().code(), static_cast<uint8_t>(errc::not_supported));
    return;
  }
  auto store = train::make_in_process_store();
  auto results = on_ranks(3, [&](int r) -> std::string {
    auto g = train::join_group(store, r, 3, at::kCPU, quick_timeout(20));
    if (!g)
      return why(g);
    if ((*g)->backend() != "gloo" || (*g)->rank() != r || (*g)->size() != 3)
      return "wrong group identity";
    auto t = at::full({5}, static_cast<double>(r + 1), at::kDouble);
    if (auto ok = (*g)->all_reduce_sum(t); !ok)
      return why(ok);
    if (!at::equal(t, at::full({5}, 6.0, at::kDouble)))
      return "sum is not 1 + 2 + 3";
    auto b = at::full({3}, static_cast<float>(10 * r));
    if (auto ok = (*g)->broadcast(b, /*root=*/2); !ok)
      return why(ok);
    if (!at::equal(b, at::full({3}, 20.f)))
      return "broadcast did not copy rank 2's tensor";
    return "";
  });
  for (int r = 0; r < 3; ++r)
    BOOST_CHECK_MESSAGE(*results[r] == "", "rank " << r << ": " << *results[r]);
}

BOOST_AUTO_TEST_CASE(a_tcp_rendezvous_on_loopback_joins_the_same_way) {
  if (!train::gloo_available())
    return;
  // What a group spanning processes or nodes would use: rank 0 serves the store.
  auto server = train::serve_tcp_store(/*port=*/0, /*world_size=*/2, /*timeout_s=*/20);
  BOOST_REQUIRE_MESSAGE(server, why(server));
  const auto port = train::store_port(**server);
  BOOST_REQUIRE_GT(port, 0);
  auto results = on_ranks(2, [&](int r) -> std::string {
    auto store = *server;
    if (r == 1) {
      auto c = train::connect_tcp_store("127.0.0.1", port, 20);
      if (!c)
        return why(c);
      store = *c;
    }
    auto g = train::join_group(store, r, 2, at::kCPU, quick_timeout(20));
    if (!g)
      return why(g);
    auto t = at::full({4}, static_cast<float>(r + 1));
    if (auto ok = (*g)->all_reduce_sum(t); !ok)
      return why(ok);
    return at::equal(t, at::full({4}, 3.f)) ? "" : "sum is not 1 + 2";
  });
  for (int r = 0; r < 2; ++r)
    BOOST_CHECK_MESSAGE(*results[r] == "", "rank " << r << ": " << *results[r]);
  // Nothing listens there any more once the server is gone: a clear error, not a hang.
  server->reset();
  auto lost = train::connect_tcp_store("127.0.0.1", port, /*timeout_s=*/1);
  BOOST_CHECK(!lost);
  if (!lost)
    BOOST_CHECK_EQUAL(lost.error().code(), static_cast<uint8_t>(errc::io_failure));
}

BOOST_AUTO_TEST_CASE(a_collective_that_a_rank_never_joins_times_out) {
  if (!train::gloo_available())
    return;
  auto store = train::make_in_process_store();
  std::vector<std::unique_ptr<train::collective_group>> groups(2);
  auto joined = on_ranks(2, [&](int r) -> std::string {
    auto g = train::join_group(store, r, 2, at::kCPU, quick_timeout(1.0));
    if (!g)
      return why(g);
    groups[r] = std::move(*g);
    return "";
  });
  BOOST_REQUIRE_MESSAGE(*joined[0] == "" && *joined[1] == "", *joined[0] << *joined[1]);
  // Rank 1 is alive but never enters the all-reduce.
  auto t = at::ones({8});
  const auto t0 = std::chrono::steady_clock::now();
  auto ok = groups[0]->all_reduce_sum(t);
  const double waited = seconds_since(t0);
  BOOST_REQUIRE(!ok);
  BOOST_CHECK_EQUAL(ok.error().code(), static_cast<uint8_t>(errc::internal));
  BOOST_CHECK_MESSAGE(why(ok).find("gloo all-reduce failed on rank 0 of 2") != std::string::npos,
                      why(ok));
  BOOST_CHECK_LT(waited, 10.0); // the 1 s timeout, not forever
  groups.clear();
}

BOOST_AUTO_TEST_CASE(join_group_refuses_bad_arguments) {
  auto store = train::make_in_process_store();
  auto bad_rank = train::join_group(store, 2, 2, at::kCPU, {});
  BOOST_REQUIRE(!bad_rank);
  BOOST_CHECK_EQUAL(why(bad_rank), "invalid_argument: join_group: rank 2 outside a group of 2");
  train::group_options o;
  o.backend = "mpi";
  auto bad_backend = train::join_group(store, 0, 1, at::kCPU, o);
  BOOST_REQUIRE(!bad_backend);
  BOOST_CHECK_EQUAL(why(bad_backend),
                    "invalid_argument: join_group: unknown backend 'mpi' (expected gloo, nccl or "
                    "auto)");
  o.backend = "nccl";
  auto no_cuda = train::join_group(store, 0, 1, at::kCPU, o);
  BOOST_REQUIRE(!no_cuda);
  BOOST_CHECK_EQUAL(no_cuda.error().code(), static_cast<uint8_t>(errc::not_supported));
}

// -- sharding -------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(shards_are_balanced_by_tokens_and_deterministic) {
  // Lengths (prompt + completion): 10, 3, 8, 8, 1, 6, 4.
  const std::vector<int> lengths{10, 3, 8, 8, 1, 6, 4};
  std::vector<train::training_sample> samples;
  for (int n : lengths) {
    train::training_sample s;
    s.prompt_tokens.assign(1, 1);
    s.completion_tokens.assign(static_cast<std::size_t>(n - 1), 2);
    samples.push_back(s);
  }
  // Longest first to the lightest replica: 10 -> r0, 8 (#2) -> r1, 8 (#3) -> r1 (8 < 10),
  // 6 -> r0 (10 < 16), 4 -> r0 (16 = 16: the lower rank), 3 -> r1 (16 < 20), 1 -> r1 (19 < 20).
  const auto two = train::shard_by_tokens(samples, 2);
  BOOST_REQUIRE_EQUAL(two.size(), 2u);
  BOOST_CHECK(two[0] == (std::vector<std::size_t>{0, 5, 6}));    // 10 + 6 + 4 = 20
  BOOST_CHECK(two[1] == (std::vector<std::size_t>{1, 2, 3, 4})); // 3 + 8 + 8 + 1 = 20
  BOOST_CHECK(train::shard_by_tokens(samples, 2) == two);
  // Every sample exactly once, for any number of replicas; more replicas than samples leave
  // some empty.
  for (int ranks : {1, 3, 4, 9}) {
    const auto shards = train::shard_by_tokens(samples, ranks);
    BOOST_REQUIRE_EQUAL(shards.size(), static_cast<std::size_t>(ranks));
    std::multiset<std::size_t> seen;
    for (const auto& s : shards)
      seen.insert(s.begin(), s.end());
    BOOST_CHECK_EQUAL(seen.size(), samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i)
      BOOST_CHECK_EQUAL(seen.count(i), 1u);
  }
  BOOST_CHECK(train::shard_by_tokens(samples, 9)[8].empty());
}

BOOST_AUTO_TEST_CASE(shard_gradients_add_up_to_the_step_gradient) {
  // The premise of the design, without collectives: weights over the whole step make the
  // shards' gradients sum to the full gradient (float64 model and factors: only rounding
  // differs, since other micro-batches sum the same terms in another order).
  tiny_model m;
  auto options = small_options();
  options.param_dtype = train::factor_dtype::float64;
  reference_trainer ref(m, options, at::kDouble);
  const auto samples = random_samples(3, 7);
  auto full = ref.trainer->compute_gradients(samples);
  BOOST_REQUIRE_MESSAGE(full, why(full));
  const auto expected = ref.trainer->gradients().clone();
  at::Tensor sum = at::zeros_like(expected);
  double loss = 0;
  int64_t tokens = 0;
  for (const auto& shard : train::shard_by_tokens(samples, 3)) {
    auto part = ref.trainer->compute_shard_gradients(samples, shard);
    BOOST_REQUIRE_MESSAGE(part, why(part));
    sum += ref.trainer->gradients();
    loss += part->loss;
    tokens += part->tokens;
  }
  BOOST_CHECK_GT(expected.abs().max().item<double>(), 1e-6);
  BOOST_CHECK_LE(max_abs_diff(sum, expected), /*tol=*/1e-12);
  BOOST_CHECK_CLOSE(loss, full->loss, /*percent=*/1e-9);
  BOOST_CHECK_EQUAL(tokens, full->tokens);
}

// -- training -------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(two_replicas_train_like_one_trainer) {
  if (!train::gloo_available())
    return;
  tiny_model m;
  const auto options = small_options();
  reference_trainer ref(m, options);
  auto dp = train::data_parallel_trainer::create(m.replicas(2), options, quick_timeout(60),
                                                 &ref.start);
  BOOST_REQUIRE_MESSAGE(dp, why(dp));
  BOOST_CHECK_EQUAL((*dp)->ranks(), 2);
  BOOST_CHECK_EQUAL((*dp)->backend(), "gloo");
  for (int step = 0; step < 3; ++step) {
    const auto samples = random_samples(10 + step, 9);
    auto one = ref.trainer->step(samples);
    auto two = (*dp)->step(samples);
    BOOST_REQUIRE_MESSAGE(one, why(one));
    BOOST_REQUIRE_MESSAGE(two, why(two));
    BOOST_CHECK_EQUAL(two->step, one->step);
    BOOST_CHECK_EQUAL(two->sequences, one->sequences);
    BOOST_CHECK_EQUAL(two->tokens, one->tokens);
    BOOST_CHECK_EQUAL(two->completion_tokens, one->completion_tokens);
    BOOST_CHECK_GE(two->micro_batches, 2); // both replicas computed
    BOOST_CHECK_CLOSE(two->loss, one->loss, /*percent=*/1e-3);
    BOOST_CHECK_CLOSE(two->grad_norm, one->grad_norm, /*percent=*/1e-3);
    BOOST_CHECK_CLOSE(two->mean_ratio, one->mean_ratio, /*percent=*/1e-3);
    BOOST_CHECK_CLOSE(two->max_ratio, one->max_ratio, /*percent=*/1e-3);
    BOOST_CHECK_EQUAL(two->lr, one->lr);
    // float32: the two runs sum the same per-token terms in another order (other micro-batches,
    // two partial gradients added by Gloo), about 1e-7 relative per sum; AdamW's normalised
    // update (lr 1e-3) turns that into differences far below 1e-5 over 3 steps, while one step
    // moves the factors by about lr = 1e-3: 1e-5 separates rounding from a wrong gradient.
    const double d = max_abs_diff((*dp)->primary().parameters(), ref.trainer->parameters());
    BOOST_CHECK_MESSAGE(d <= 1e-5, "step " << step << ": max |difference| " << d);
    BOOST_TEST_MESSAGE("two replicas vs one trainer, step " << step << ": max |difference| of "
                       "the factors " << d << ", loss " << two->loss << " vs " << one->loss);
    // The replicas themselves stay bit-identical (same summed gradient, same update).
    BOOST_CHECK(at::equal((*dp)->replica(0).parameters(), (*dp)->replica(1).parameters()));
  }
  // The trained factors moved: the comparison above is not of two unchanged adapters.
  BOOST_CHECK_GT(max_abs_diff(ref.trainer->parameters(),
                              train::lora_parameters::from_adapter(*m.load(), ref.start)
                                ->values()),
                 1e-4);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_two_replicas_resumes_identically) {
  if (!train::gloo_available())
    return;
  tiny_model m;
  const auto options = small_options();
  temp_dir dir;
  const fs::path root = dir / "checkpoints";
  auto first = train::data_parallel_trainer::create(m.replicas(2), options, quick_timeout(60));
  BOOST_REQUIRE_MESSAGE(first, why(first));
  for (int step = 0; step < 2; ++step)
    BOOST_REQUIRE((*first)->step(random_samples(20 + step, 8)));
  auto saved = train::save_checkpoint(root, (*first)->primary(), {});
  BOOST_REQUIRE_MESSAGE(saved, why(saved));

  // A new learner life: fresh replicas, the primary restored, the others synchronised.
  auto second = train::data_parallel_trainer::create(m.replicas(2), options, quick_timeout(60));
  BOOST_REQUIRE_MESSAGE(second, why(second));
  BOOST_REQUIRE(train::load_checkpoint(root / saved->dir, (*second)->primary()));
  BOOST_REQUIRE((*second)->sync_replicas());
  BOOST_CHECK_EQUAL((*second)->replica(1).steps_done(), 2);
  BOOST_CHECK(at::equal((*second)->replica(1).parameters(), (*first)->primary().parameters()));
  for (int step = 2; step < 4; ++step) {
    const auto samples = random_samples(20 + step, 8);
    auto a = (*first)->step(samples);
    auto b = (*second)->step(samples);
    BOOST_REQUIRE_MESSAGE(a, why(a));
    BOOST_REQUIRE_MESSAGE(b, why(b));
    BOOST_CHECK_EQUAL(a->loss, b->loss);
    // Bit-identical on the CPU: the same arithmetic in the same order.
    for (int r = 0; r < 2; ++r)
      BOOST_CHECK(at::equal((*first)->replica(r).parameters(),
                            (*second)->replica(r).parameters()));
  }
}

BOOST_AUTO_TEST_CASE(a_bad_sample_on_one_replica_fails_the_step_everywhere) {
  if (!train::gloo_available())
    return;
  tiny_model m;
  auto dp = train::data_parallel_trainer::create(m.replicas(2), small_options(),
                                                 quick_timeout(30));
  BOOST_REQUIRE_MESSAGE(dp, why(dp));
  auto samples = random_samples(31, 6);
  // A token outside the vocabulary in a sample of replica 1's shard: only replica 1 sees it.
  const auto shards = train::shard_by_tokens(samples, 2);
  BOOST_REQUIRE(!shards[1].empty());
  const auto bad = shards[1].front();
  samples[bad].completion_tokens.back() = 4096;
  const auto before = (*dp)->primary().parameters().clone();
  const auto t0 = std::chrono::steady_clock::now();
  auto failed = (*dp)->step(samples);
  const double took = seconds_since(t0);
  BOOST_REQUIRE(!failed);
  BOOST_CHECK_EQUAL(failed.error().code(), static_cast<uint8_t>(errc::invalid_argument));
  const std::string text = why(failed);
  BOOST_TEST_MESSAGE("one replica's bad sample: " << text << " (after " << took << " s)");
  BOOST_CHECK_MESSAGE(text.find("data-parallel step: replica 1 (cpu): sample " + std::to_string(bad)
                                + ": completion token[")
                        != std::string::npos,
                      text);
  BOOST_CHECK_MESSAGE(text.find("= 4096 is outside the vocabulary [0, 256)") != std::string::npos,
                      text);
  BOOST_CHECK_LT(took, 20.0); // no replica waited for a collective that never came
  // Nothing changed on either replica, and the group still works.
  for (int r = 0; r < 2; ++r) {
    BOOST_CHECK(at::equal((*dp)->replica(r).parameters(), before));
    BOOST_CHECK_EQUAL((*dp)->replica(r).steps_done(), 0);
  }
  samples[bad].completion_tokens.back() = 7;
  auto ok = (*dp)->step(samples);
  BOOST_REQUIRE_MESSAGE(ok, why(ok));
  BOOST_CHECK_EQUAL(ok->step, 1);
  BOOST_CHECK(at::equal((*dp)->replica(0).parameters(), (*dp)->replica(1).parameters()));
}

BOOST_AUTO_TEST_CASE(more_replicas_than_samples_still_train) {
  if (!train::gloo_available())
    return;
  tiny_model m;
  const auto options = small_options();
  reference_trainer ref(m, options);
  auto dp = train::data_parallel_trainer::create(m.replicas(3), options, quick_timeout(60),
                                                 &ref.start);
  BOOST_REQUIRE_MESSAGE(dp, why(dp));
  const auto samples = random_samples(41, 2); // replica 2 gets nothing
  auto one = ref.trainer->step(samples);
  auto three = (*dp)->step(samples);
  BOOST_REQUIRE_MESSAGE(one, why(one));
  BOOST_REQUIRE_MESSAGE(three, why(three));
  BOOST_CHECK_EQUAL(three->sequences, 2);
  BOOST_CHECK_LE(max_abs_diff((*dp)->replica(2).parameters(), ref.trainer->parameters()),
                 /*tol=*/1e-5);
}

BOOST_AUTO_TEST_CASE(the_learner_trains_two_cpu_replicas) {
  if (!train::gloo_available())
    return;
  temp_dir dir;
  const auto model_dir = dir / "model";
  BOOST_REQUIRE(model::write_random_checkpoint(model_dir, model::tiny_model_config("qwen2"),
                                               /*seed=*/11));
  auto settings = [&](const std::string& run, int ranks) {
    train::learner_settings s;
    s.model = model_dir;
    s.dtype = "fp32";
    s.run_dir = dir / run;
    s.cpu_ranks = ranks;
    s.collective_timeout_s = 60;
    s.trainer.lora_r = 4;
    s.trainer.lora_alpha = 8;
    s.trainer.adamw.lr = 1e-3;
    s.trainer.micro_batch_tokens = 32;
    s.checkpoint_every = 2;
    return s;
  };
  auto batch = [](uint64_t id) {
    trajectory_batch b;
    b.id = id;
    for (int i = 0; i < 6; ++i) {
      trajectory t;
      t.id = id * 100 + i;
      t.group_id = id * 10 + i / 3;
      turn u;
      u.prompt_tokens = {5, 6, 7, static_cast<int32_t>(i)};
      for (int k = 0; k <= i; ++k) {
        u.completion_tokens.push_back(static_cast<int32_t>(20 + 7 * k + i));
        u.logprobs.push_back(-5.5f);
      }
      u.score = (i % 3) * 0.5;
      t.turns.push_back(u);
      b.trajectories.push_back(t);
    }
    return b;
  };
  auto one = train::learner_core::start(settings("one", 1));
  auto two = train::learner_core::start(settings("two", 2));
  BOOST_REQUIRE_MESSAGE(one, why(one));
  BOOST_REQUIRE_MESSAGE(two, why(two));
  BOOST_CHECK_EQUAL((*one)->replicas().ranks(), 1);
  BOOST_CHECK_EQUAL((*two)->replicas().ranks(), 2);
  BOOST_CHECK_EQUAL(train::describe_devices((*two)->settings()), "cpu x2");
  for (uint64_t id = 0; id < 2; ++id) {
    auto a = (*one)->train(batch(id));
    auto b = (*two)->train(batch(id));
    BOOST_REQUIRE_MESSAGE(a, why(a));
    BOOST_REQUIRE_MESSAGE(b, why(b));
    BOOST_CHECK_EQUAL(a->version, b->version);
    BOOST_CHECK_EQUAL((*one)->report().last->tokens, (*two)->report().last->tokens);
  }
  BOOST_CHECK_LE(max_abs_diff((*one)->trainer().parameters(), (*two)->trainer().parameters()),
                 /*tol=*/1e-5);
  // The primary replica wrote the checkpoint at step 2 and published version 2.
  const fs::path learner_dir = dir / "two/learner";
  BOOST_CHECK(fs::exists(learner_dir / "checkpoints" / "step-000002"));
  BOOST_CHECK(fs::exists(learner_dir / "policy" / "v000002"));
  // A new life of the two-replica learner resumes from it on both replicas.
  two->reset();
  auto again = train::learner_core::start(settings("two", 2));
  BOOST_REQUIRE_MESSAGE(again, why(again));
  BOOST_CHECK_EQUAL((*again)->trainer().steps_done(), 2);
  BOOST_CHECK_EQUAL((*again)->replicas().replica(1).steps_done(), 2);
  BOOST_CHECK(at::equal((*again)->replicas().replica(1).parameters(),
                        (*again)->trainer().parameters()));
}

BOOST_AUTO_TEST_SUITE_END()
