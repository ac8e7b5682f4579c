// One source for each default: the settings table (runtime/config/settings.cpp). What a
// default-constructed settings struct holds (code and tests that build settings by hand) must be
// what the run config's table gives with no key set. A struct default that drifts from the
// table fails here, naming the field. (The coordinator's and episodes' are checked in rl_run.)

#include "runtime/config/settings.hpp"
#include "runtime/node/node_plan.hpp"
#include "runtime/retrieval/retrieval_settings.hpp"
#include "runtime/sampler/sampler_settings.hpp"
#include "runtime/train/learner_settings.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace kbrl;

namespace {

config::run_config table_defaults() { return config::run_config::defaults(); }

} // namespace

BOOST_AUTO_TEST_SUITE(settings_defaults)

BOOST_AUTO_TEST_CASE(the_evaluator_supervisor_defaults_are_the_tables) {
  auto t = evaluation_supervision(table_defaults());
  const supervisor_settings d;
  BOOST_CHECK_EQUAL(t.queue_capacity, d.queue_capacity);
  BOOST_CHECK_EQUAL(t.restart_limit, d.restart_limit);
  BOOST_CHECK_EQUAL(t.restart_window.count(), d.restart_window.count());
  BOOST_CHECK_EQUAL(t.degraded_backoff.count(), d.degraded_backoff.count());
  BOOST_CHECK_EQUAL(t.request_margin.count(), d.request_margin.count());
  BOOST_CHECK_EQUAL(t.build_workers, d.build_workers);
}

BOOST_AUTO_TEST_CASE(the_sampler_defaults_are_the_tables) {
  auto t = sampling::sampler_settings_from(table_defaults(), -1, "n/sampler.0");
  const sampling::sampler_settings d;
  BOOST_CHECK_EQUAL(t.backend, d.backend);
  BOOST_CHECK_EQUAL(t.queue_capacity, d.queue_capacity);
  BOOST_CHECK_EQUAL(t.dtype, d.dtype);
  BOOST_CHECK_EQUAL(t.slots, d.slots);
  BOOST_CHECK_EQUAL(t.max_seq_len, d.max_seq_len);
  BOOST_CHECK_EQUAL(t.cuda_graphs, d.cuda_graphs);
  const auto& r = t.remote;
  const remote::remote_sampler_options dr;
  BOOST_CHECK_EQUAL(r.retry.max_retries, dr.retry.max_retries);
  BOOST_CHECK_EQUAL(r.retry.initial_backoff_s, dr.retry.initial_backoff_s);
  BOOST_CHECK_EQUAL(r.retry.max_backoff_s, dr.retry.max_backoff_s);
  BOOST_CHECK_EQUAL(r.max_in_flight, dr.max_in_flight);
  BOOST_CHECK_EQUAL(r.connect_timeout_s, dr.connect_timeout_s);
  BOOST_CHECK_EQUAL(r.request_timeout_s, dr.request_timeout_s);
  BOOST_CHECK_EQUAL(r.use_token_prompts, dr.use_token_prompts);
  BOOST_CHECK_EQUAL(r.require_token_ids, dr.require_token_ids);
  BOOST_CHECK(r.api == dr.api);
}

BOOST_AUTO_TEST_CASE(the_learner_defaults_are_the_tables) {
  auto t = train::learner_settings_from(table_defaults(), -1, "/runs/x");
  BOOST_REQUIRE_MESSAGE(t, test::why(t));
  const train::learner_settings d;
  BOOST_CHECK_EQUAL(t->dtype, d.dtype);
  BOOST_CHECK_EQUAL(t->cpu_ranks, d.cpu_ranks);
  BOOST_CHECK_EQUAL(t->collective_timeout_s, d.collective_timeout_s);
  BOOST_CHECK_EQUAL(t->max_staleness, d.max_staleness);
  BOOST_CHECK_EQUAL(t->checkpoint_every, d.checkpoint_every);
  BOOST_CHECK_EQUAL(t->keep_checkpoints, d.keep_checkpoints);
  BOOST_CHECK_EQUAL(t->resume, d.resume);
  BOOST_CHECK_EQUAL(t->publish_bytes, d.publish_bytes);
  const auto& o = t->trainer;
  const train::trainer_options od;
  BOOST_CHECK_EQUAL(o.lora_r, od.lora_r);
  BOOST_CHECK_EQUAL(o.lora_alpha, od.lora_alpha);
  BOOST_CHECK_EQUAL(o.use_rslora, od.use_rslora);
  BOOST_CHECK_EQUAL(o.lora_dropout, od.lora_dropout);
  BOOST_CHECK_EQUAL(o.seed, od.seed);
  BOOST_CHECK_EQUAL(o.adamw.lr, od.adamw.lr);
  BOOST_CHECK_EQUAL(o.adamw.beta1, od.adamw.beta1);
  BOOST_CHECK_EQUAL(o.adamw.beta2, od.adamw.beta2);
  BOOST_CHECK_EQUAL(o.adamw.weight_decay, od.adamw.weight_decay);
  BOOST_CHECK(o.schedule.kind == od.schedule.kind);
  BOOST_CHECK_EQUAL(o.schedule.warmup_steps, od.schedule.warmup_steps);
  BOOST_CHECK_EQUAL(o.clip_norm, od.clip_norm);
  BOOST_CHECK_EQUAL(o.micro_batch_tokens, od.micro_batch_tokens);
  BOOST_CHECK_EQUAL(o.gradient_checkpointing, od.gradient_checkpointing);
  BOOST_CHECK_EQUAL(o.temperature, od.temperature);
  BOOST_CHECK(o.aggregation == od.aggregation);
  BOOST_CHECK(o.loss.kind == od.loss.kind);
  BOOST_CHECK_EQUAL(o.loss.eps_low, od.loss.eps_low);
  BOOST_CHECK_EQUAL(o.loss.eps_high, od.loss.eps_high);
  BOOST_CHECK_EQUAL(o.loss.kl_coef, od.loss.kl_coef);
}

BOOST_AUTO_TEST_CASE(the_retrieval_defaults_are_the_tables) {
  auto t = retrieval::retrieval_settings_from(table_defaults());
  const retrieval::retrieval_settings d;
  BOOST_CHECK_EQUAL(t.index_dir, d.index_dir);
  BOOST_CHECK_EQUAL(t.k, d.k);
  BOOST_CHECK_EQUAL(t.token_budget, d.token_budget);
  BOOST_CHECK_EQUAL(t.embedder, d.embedder);
}

BOOST_AUTO_TEST_SUITE_END()
