// The per-token losses on hand-made vectors: values and gradients worked out by hand, PPO's
// clipping on each side, the KL estimator, the aggregation weights, and the gradient of every
// loss against central finite differences in float64.

#include "runtime/rl/policy_loss.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <boost/test/unit_test.hpp>

#include <cmath>

using namespace kbrl;
using kbrl::test::why;

namespace {

at::Tensor doubles(std::vector<double> v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble));
}

/// The loss and its gradient with respect to the learner's log-probabilities.
std::pair<double, at::Tensor> loss_and_grad(rl::token_inputs in, const rl::policy_loss_options& o) {
  in.logprobs = in.logprobs.detach().clone().requires_grad_(true);
  auto terms = rl::compute_policy_loss(in, o);
  auto g = torch::autograd::grad({terms.loss}, {in.logprobs});
  return {terms.loss.item<double>(), g[0]};
}

rl::token_inputs three_tokens() {
  rl::token_inputs in;
  in.logprobs = doubles({-1.0, -2.0, -0.5});
  in.sampler_logprobs = doubles({-1.1, -1.8, -0.5});
  in.advantages = doubles({1.0, -2.0, 0.5});
  in.weights = doubles({0.5, 0.25, 0.25});
  in.base_logprobs = doubles({-1.2, -1.5, -0.4});
  return in;
}

} // namespace

BOOST_AUTO_TEST_SUITE(policy_loss)

BOOST_AUTO_TEST_CASE(aggregation_weights_sum_to_one_over_the_step) {
  const auto token = rl::aggregation_weights({2, 0, 3}, rl::loss_aggregation::token);
  BOOST_REQUIRE_EQUAL(token.size(), 5u);
  for (double w : token)
    BOOST_CHECK_CLOSE(w, 0.2, 1e-12);
  // sequence: two non-empty sequences, each weighing 1/2 spread over its tokens.
  const auto seq = rl::aggregation_weights({2, 0, 3}, rl::loss_aggregation::sequence);
  BOOST_REQUIRE_EQUAL(seq.size(), 5u);
  BOOST_CHECK_CLOSE(seq[0], 0.25, 1e-12);
  BOOST_CHECK_CLOSE(seq[1], 0.25, 1e-12);
  BOOST_CHECK_CLOSE(seq[2], 1.0 / 6, 1e-12);
  BOOST_CHECK_CLOSE(seq[4], 1.0 / 6, 1e-12);
  BOOST_CHECK(rl::aggregation_weights({}, rl::loss_aggregation::token).empty());
}

BOOST_AUTO_TEST_CASE(policy_gradient_is_the_importance_weighted_advantage) {
  auto in = three_tokens();
  rl::policy_loss_options o;
  o.kind = rl::policy_loss_kind::policy_gradient;
  auto [loss, grad] = loss_and_grad(in, o);
  // l = -sum w * exp(lp - old) * A, dl/dlp = -w * ratio * A.
  const double r0 = std::exp(0.1), r1 = std::exp(-0.2), r2 = 1.0;
  const double expected = -(0.5 * r0 * 1.0 + 0.25 * r1 * -2.0 + 0.25 * r2 * 0.5);
  BOOST_CHECK_CLOSE(loss, expected, 1e-10);
  BOOST_CHECK_CLOSE(grad[0].item<double>(), -0.5 * r0, 1e-10);
  BOOST_CHECK_CLOSE(grad[1].item<double>(), 0.25 * r1 * 2.0, 1e-10);
  BOOST_CHECK_CLOSE(grad[2].item<double>(), -0.25 * 0.5, 1e-10);
  auto terms = rl::compute_policy_loss(three_tokens(), o);
  BOOST_CHECK_CLOSE(terms.max_ratio.item<double>(), r0, 1e-10);
  BOOST_CHECK_CLOSE(terms.ratio.item<double>(), 0.5 * r0 + 0.25 * r1 + 0.25, 1e-10);
  BOOST_CHECK_EQUAL(terms.clipped.item<double>(), 0.0);
}

BOOST_AUTO_TEST_CASE(ppo_clips_each_side_with_its_own_epsilon) {
  // ratios: e^0.5 = 1.65 (above 1 + 0.28) with A > 0: clipped, no gradient;
  //         e^0.5 with A < 0: min picks the unclipped term, gradient flows;
  //         e^-0.5 = 0.61 (below 1 - 0.2) with A < 0: clipped, no gradient;
  //         e^-0.5 with A > 0: unclipped;  e^0.1 = 1.105 inside: unclipped.
  rl::token_inputs in;
  in.logprobs = doubles({0.0, 0.0, 0.0, 0.0, 0.0});
  in.sampler_logprobs = doubles({-0.5, -0.5, 0.5, 0.5, -0.1});
  in.advantages = doubles({1.0, -1.0, -1.0, 1.0, 2.0});
  in.weights = doubles({0.2, 0.2, 0.2, 0.2, 0.2});
  rl::policy_loss_options o; // ppo, 0.2 / 0.28
  auto [loss, grad] = loss_and_grad(in, o);
  const double hi = std::exp(0.5), lo = std::exp(-0.5), mid = std::exp(0.1);
  const double expected = -0.2 * (1.28 * 1.0 + hi * -1.0 + 0.8 * -1.0 + lo * 1.0 + mid * 2.0);
  BOOST_CHECK_CLOSE(loss, expected, 1e-10);
  BOOST_CHECK_EQUAL(grad[0].item<double>(), 0.0);
  BOOST_CHECK_CLOSE(grad[1].item<double>(), 0.2 * hi, 1e-10);
  BOOST_CHECK_EQUAL(grad[2].item<double>(), 0.0);
  BOOST_CHECK_CLOSE(grad[3].item<double>(), -0.2 * lo, 1e-10);
  BOOST_CHECK_CLOSE(grad[4].item<double>(), -0.2 * mid * 2.0, 1e-10);
  auto terms = rl::compute_policy_loss(in, o);
  BOOST_CHECK_CLOSE(terms.clipped.item<double>(), 0.4, 1e-10); // two of five tokens

  // Symmetric epsilons clip the first token at 1.2 instead.
  o.eps_high = 0.2;
  auto [loss2, grad2] = loss_and_grad(in, o);
  BOOST_CHECK_CLOSE(loss2 - loss, -0.2 * (1.2 - 1.28), 1e-8);
}

BOOST_AUTO_TEST_CASE(kl_term_is_the_k3_estimator_to_the_base_model) {
  auto in = three_tokens();
  rl::policy_loss_options o;
  o.kind = rl::policy_loss_kind::supervised;
  o.kl_coef = 0.1;
  auto terms = rl::compute_policy_loss(in, o);
  // k3 = exp(d) - d - 1 with d = base - lp = (-0.2, 0.5, 0.1).
  auto k3 = [](double d) { return std::exp(d) - d - 1; };
  const double kl = 0.5 * k3(-0.2) + 0.25 * k3(0.5) + 0.25 * k3(0.1);
  BOOST_CHECK_CLOSE(terms.kl.item<double>(), kl, 1e-10);
  const double sft = 0.5 * 1.0 + 0.25 * 2.0 + 0.25 * 0.5;
  BOOST_CHECK_CLOSE(terms.policy.item<double>(), sft, 1e-10);
  BOOST_CHECK_CLOSE(terms.loss.item<double>(), sft + 0.1 * kl, 1e-10);

  // No divergence when the policy is the base: k3 and its gradient vanish.
  in.base_logprobs = in.logprobs.clone();
  o.kind = rl::policy_loss_kind::policy_gradient;
  o.kl_coef = 1.0;
  auto same = rl::compute_policy_loss(in, o);
  BOOST_CHECK_SMALL(same.kl.item<double>(), 1e-15);
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_in_float64) {
  for (auto kind : {rl::policy_loss_kind::policy_gradient, rl::policy_loss_kind::ppo_clip,
                    rl::policy_loss_kind::supervised}) {
    rl::policy_loss_options o;
    o.kind = kind;
    o.kl_coef = 0.05;
    auto in = three_tokens();
    auto [loss, grad] = loss_and_grad(in, o);
    const double h = 1e-6;
    for (int i = 0; i < 3; ++i) {
      auto plus = in, minus = in;
      plus.logprobs = in.logprobs.clone();
      minus.logprobs = in.logprobs.clone();
      plus.logprobs[i] += h;
      minus.logprobs[i] -= h;
      const double fd = (rl::compute_policy_loss(plus, o).loss.item<double>()
                         - rl::compute_policy_loss(minus, o).loss.item<double>())
                        / (2 * h);
      BOOST_CHECK_MESSAGE(std::abs(fd - grad[i].item<double>()) < 1e-8,
                          rl::to_string(kind) << " token " << i << ": finite difference " << fd
                                              << ", autograd " << grad[i].item<double>());
    }
  }
}

BOOST_AUTO_TEST_CASE(options_and_spellings_are_checked) {
  BOOST_CHECK(*rl::parse_policy_loss_kind("pg") == rl::policy_loss_kind::policy_gradient);
  BOOST_CHECK(*rl::parse_policy_loss_kind("ppo") == rl::policy_loss_kind::ppo_clip);
  BOOST_CHECK(*rl::parse_policy_loss_kind("sft") == rl::policy_loss_kind::supervised);
  BOOST_CHECK(!rl::parse_policy_loss_kind("grpo"));
  BOOST_CHECK(*rl::parse_loss_aggregation("sequence") == rl::loss_aggregation::sequence);
  BOOST_CHECK(!rl::parse_loss_aggregation("batch"));
  rl::policy_loss_options o;
  BOOST_CHECK(rl::check_policy_loss_options(o));
  o.eps_low = 1.0;
  o.kl_coef = -1;
  auto bad = rl::check_policy_loss_options(o);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_NE(why(bad).find("eps_low"), std::string::npos);
  BOOST_CHECK_NE(why(bad).find("kl_coef"), std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
