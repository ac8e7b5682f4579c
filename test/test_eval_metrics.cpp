// The evaluation metrics against values computed by hand on small fixtures of verdicts: pass@k
// (exact binomial ratios, large n without overflow, invalid arguments), fast_p over the first
// sample of each problem and best-of-N, ties at p, problems with no correct sample, correct but
// untimed samples, geometric means, per level, per turn (best of turns), error categories, hack
// flags, the torch.compile comparison and the scalar names logged to TensorBoard.

#include "runtime/report/eval_metrics.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <map>

using namespace kbrl;
using namespace kbrl::report;

namespace {

/// A record of `problem` at `level`; its number is the last character's code.
sample_record rec(const std::string& problem, int level, int sample, bool correct,
                  double speedup = 0, const std::string& error = "none", int turn = 0) {
  sample_record r;
  r.problem = problem;
  r.level = level;
  r.problem_number = problem.back(); // "level1/A" < "level1/B": problems sort by number
  r.sample = sample;
  r.turn = turn;
  r.correct = correct;
  r.compiled = correct || error == "none" || error == "mismatch" || error == "runtime";
  r.error = error;
  r.speedup = speedup;
  if (speedup > 0) {
    r.reference_ms = 1.0;
    r.kernel_ms = 1.0 / speedup;
  }
  return r;
}

/// The value of metric `name` in metric_scalars().
double scalar(const eval_metrics& m, const std::string& name) {
  for (auto& [k, v] : metric_scalars(m))
    if (k == name)
      return v;
  BOOST_FAIL("no scalar named " + name);
  return 0;
}

constexpr double tol = 1e-12; // exact arithmetic on small fractions

/// The fixture of the header: four problems of two samples each.
///   A (level 1): correct 1.0x (a tie at p = 1), correct 2.5x
///   B (level 1): mismatch, correct 0.5x (a tie at p = 0.5)
///   C (level 1): correct 0.8x (a tie at p = 0.8), compile error
///   D (level 2): refused by a static check (flag try_except), no program found (format)
std::vector<sample_record> fixture() {
  auto a1 = rec("level1/A", 1, 1, true, 2.5);
  a1.hack_flags = {"suspicious_speedup"};
  auto d0 = rec("level2/D", 2, 0, false, 0, "static_check");
  d0.hack_flags = {"try_except", "try_except"}; // counted once per sample
  return {rec("level1/A", 1, 0, true, 1.0),
          a1,
          rec("level1/B", 1, 0, false, 0, "mismatch"),
          rec("level1/B", 1, 1, true, 0.5),
          rec("level1/C", 1, 0, true, 0.8),
          rec("level1/C", 1, 1, false, 0, "compile"),
          d0,
          rec("level2/D", 2, 1, false, 0, "format")};
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_metrics)

BOOST_AUTO_TEST_CASE(pass_at_k_is_the_unbiased_estimator) {
  BOOST_CHECK_CLOSE(pass_at_k(5, 2, 1), 0.4, tol);           // c / n
  BOOST_CHECK_CLOSE(pass_at_k(5, 2, 2), 1.0 - 3.0 / 10, tol); // 1 - C(3,2)/C(5,2)
  BOOST_CHECK_CLOSE(pass_at_k(10, 3, 5), 1.0 - 21.0 / 252, tol);
  BOOST_CHECK_EQUAL(pass_at_k(5, 0, 1), 0.0);
  BOOST_CHECK_EQUAL(pass_at_k(5, 0, 5), 0.0);
  BOOST_CHECK_EQUAL(pass_at_k(5, 5, 3), 1.0);
  BOOST_CHECK_EQUAL(pass_at_k(4, 3, 2), 1.0); // n - c < k: every draw holds a correct sample
  BOOST_CHECK_EQUAL(pass_at_k(1, 1, 1), 1.0);
  // Large n: C(1000, 500) overflows any integer and double; the product form does not.
  // Reference values from Python's exact math.comb.
  BOOST_CHECK_CLOSE(pass_at_k(200, 10, 100), 0.9992289739372822, /*tol %=*/1e-9);
  BOOST_CHECK_CLOSE(pass_at_k(1000, 5, 500), 0.9690623421817003, /*tol %=*/1e-9);
  // Outside the estimator's domain.
  BOOST_CHECK(std::isnan(pass_at_k(5, 2, 0)));
  BOOST_CHECK(std::isnan(pass_at_k(5, 2, 6)));
  BOOST_CHECK(std::isnan(pass_at_k(5, 6, 1)));
  BOOST_CHECK(std::isnan(pass_at_k(0, 0, 1)));
  BOOST_CHECK(std::isnan(pass_at_k(5, -1, 1)));
}

BOOST_AUTO_TEST_CASE(fast_p_scores_the_first_sample_and_ties_at_p_do_not_count) {
  auto m = compute_metrics(fixture());
  BOOST_REQUIRE_EQUAL(m.thresholds.size(), 6u);
  auto& g = m.overall;
  BOOST_CHECK_EQUAL(g.problems, 4u);
  BOOST_CHECK_EQUAL(g.samples, 8u);
  BOOST_CHECK_EQUAL(g.correct, 4u);
  BOOST_CHECK_CLOSE(g.correct_rate, 0.5, tol);
  BOOST_CHECK_CLOSE(g.compiled_rate, 5.0 / 8, tol); // 4 correct + the mismatch
  // First samples: A 1.0x, B incorrect, C 0.8x, D refused.
  const std::vector<double> fast{2.0 / 4, 2.0 / 4, 1.0 / 4, 0, 0, 0}; // p = 0, .5, .8, 1, 1.5, 2
  for (size_t i = 0; i < fast.size(); ++i)
    BOOST_CHECK_MESSAGE(std::fabs(g.fast_p[i] - fast[i]) < tol,
                        "fast_" << m.thresholds[i] << ": " << g.fast_p[i] << " != " << fast[i]);
  // Best of N: A has 2.5x, B 0.5x, C 0.8x.
  const std::vector<double> best{3.0 / 4, 2.0 / 4, 1.0 / 4, 1.0 / 4, 1.0 / 4, 1.0 / 4};
  for (size_t i = 0; i < best.size(); ++i)
    BOOST_CHECK_MESSAGE(std::fabs(g.fast_p_best[i] - best[i]) < tol,
                        "best-of-N fast_" << m.thresholds[i] << ": " << g.fast_p_best[i]);
  // pass@1 = mean of c/n = (1 + .5 + .5 + 0) / 4; pass@2 = (1 + 1 + 1 + 0) / 4.
  BOOST_REQUIRE_EQUAL(g.pass_at_k.size(), 2u);
  BOOST_CHECK_CLOSE(g.pass_at_k[0], 0.5, tol);
  BOOST_CHECK_CLOSE(g.pass_at_k[1], 0.75, tol);
  // Geometric mean of 1.0, 2.5, 0.5, 0.8 = 1.
  BOOST_CHECK_EQUAL(g.timed_correct, 4u);
  BOOST_CHECK_CLOSE(g.geomean_speedup, 1.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(levels_errors_and_hack_flags_are_counted) {
  auto m = compute_metrics(fixture());
  BOOST_REQUIRE_EQUAL(m.levels.size(), 2u);
  auto& l1 = m.levels[0];
  auto& l2 = m.levels[1];
  BOOST_CHECK_EQUAL(l1.name, "level1");
  BOOST_CHECK_EQUAL(l1.problems, 3u);
  BOOST_CHECK_CLOSE(l1.correct_rate, 4.0 / 6, tol);
  BOOST_CHECK_CLOSE(l1.fast_p[0], 2.0 / 3, tol);
  BOOST_CHECK_CLOSE(l1.pass_at_k[0], 2.0 / 3, tol);
  BOOST_CHECK_CLOSE(l1.pass_at_k[1], 1.0, tol);
  BOOST_CHECK_EQUAL(l2.name, "level2");
  BOOST_CHECK_EQUAL(l2.correct, 0u);
  BOOST_CHECK_EQUAL(l2.geomean_speedup, 0.0);
  BOOST_CHECK_EQUAL(l2.pass_at_k[1], 0.0);
  const std::map<std::string, size_t> errors{
    {"none", 4}, {"mismatch", 1}, {"compile", 1}, {"static_check", 1}, {"format", 1}};
  BOOST_CHECK(m.overall.errors == errors);
  const std::map<std::string, size_t> flags{{"suspicious_speedup", 1}, {"try_except", 1}};
  BOOST_CHECK(m.overall.hack_flags == flags);
  BOOST_CHECK(m.turns.empty()); // single turn: no per-turn groups
  BOOST_CHECK_EQUAL(m.max_samples, 2u);
  BOOST_REQUIRE_EQUAL(m.problems.size(), 4u);
  BOOST_CHECK_EQUAL(m.problems[0].problem, "level1/A");
  BOOST_CHECK_EQUAL(m.problems[0].best_speedup, 2.5);
  BOOST_CHECK(m.problems[0].first_correct);
  BOOST_CHECK(!m.problems[1].first_correct); // B's first sample is the mismatch
  BOOST_CHECK_EQUAL(m.problems[1].best_speedup, 0.5);
}

BOOST_AUTO_TEST_CASE(no_correct_samples_give_zeros_not_nans) {
  auto m = compute_metrics({rec("p", 1, 0, false, 0, "compile"), rec("p", 1, 1, false, 0, "runtime"),
                            rec("q", 1, 0, false, 0, "timeout")});
  auto& g = m.overall;
  BOOST_CHECK_EQUAL(g.correct_rate, 0.0);
  BOOST_CHECK_EQUAL(g.geomean_speedup, 0.0);
  BOOST_CHECK_EQUAL(g.timed_correct, 0u);
  for (double f : g.fast_p)
    BOOST_CHECK_EQUAL(f, 0.0);
  // pass@k up to the most samples of a problem (p's 2); q, with one, adds 0 to pass@2.
  BOOST_REQUIRE_EQUAL(g.pass_at_k.size(), 2u);
  BOOST_CHECK_EQUAL(g.pass_at_k[0], 0.0);
  BOOST_CHECK_EQUAL(g.pass_at_k[1], 0.0);
  for (auto& [name, value] : metric_scalars(m))
    BOOST_CHECK_MESSAGE(std::isfinite(value), name << " = " << value);
  // And nothing at all.
  auto empty = compute_metrics({});
  BOOST_CHECK_EQUAL(empty.overall.problems, 0u);
  BOOST_CHECK(empty.overall.pass_at_k.empty());
  for (auto& [name, value] : metric_scalars(empty))
    BOOST_CHECK_MESSAGE(std::isfinite(value), name << " = " << value);
}

BOOST_AUTO_TEST_CASE(all_correct_with_ties_and_untimed_samples) {
  // Every sample exactly 2x: fast_2 does not count them (speedup > p), fast_1.5 does.
  auto m = compute_metrics({rec("p", 1, 0, true, 2.0), rec("q", 1, 0, true, 2.0)});
  BOOST_CHECK_EQUAL(m.overall.correct_rate, 1.0);
  BOOST_CHECK_EQUAL(m.overall.pass_at_k[0], 1.0);
  BOOST_CHECK_EQUAL(m.overall.fast_p[4], 1.0); // p = 1.5
  BOOST_CHECK_EQUAL(m.overall.fast_p[5], 0.0); // p = 2.0, a tie
  BOOST_CHECK_CLOSE(m.overall.geomean_speedup, 2.0, 1e-9);
  // Correct but not timed (speedup 0): correct, never fast, not in the geometric mean.
  auto untimed = compute_metrics({rec("p", 1, 0, true, 0), rec("q", 1, 0, true, 3.0)});
  BOOST_CHECK_EQUAL(untimed.overall.correct_rate, 1.0);
  BOOST_CHECK_CLOSE(untimed.overall.fast_p[0], 0.5, tol);
  BOOST_CHECK_EQUAL(untimed.overall.timed_correct, 1u);
  BOOST_CHECK_CLOSE(untimed.overall.geomean_speedup, 3.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(turns_count_the_best_turn_so_far) {
  // Sample 0 of p: compile error, then correct 1.5x, then correct but slower 1.2x.
  // Sample 1 of p: correct 0.9x at turn 0 and stops there.
  auto m = compute_metrics({rec("p", 1, 0, false, 0, "compile", 0), rec("p", 1, 0, true, 1.5, "none", 1),
                            rec("p", 1, 0, true, 1.2, "none", 2), rec("p", 1, 1, true, 0.9, "none", 0)});
  BOOST_CHECK_EQUAL(m.max_turns, 3u);
  BOOST_REQUIRE_EQUAL(m.turns.size(), 3u);
  BOOST_CHECK_EQUAL(m.turns[0].name, "turn 0");
  BOOST_CHECK_CLOSE(m.turns[0].correct_rate, 0.5, tol);
  BOOST_CHECK_EQUAL(m.turns[0].fast_p[3], 0.0); // first sample not correct after turn 0
  BOOST_CHECK_CLOSE(m.turns[1].correct_rate, 1.0, tol);
  BOOST_CHECK_EQUAL(m.turns[1].fast_p[3], 1.0); // 1.5x after turn 1
  BOOST_CHECK_CLOSE(m.turns[2].geomean_speedup, std::sqrt(1.5 * 0.9), 1e-9); // best turn kept
  // Overall = best of all turns: two samples, both correct, one sample each.
  BOOST_CHECK_EQUAL(m.overall.samples, 2u);
  BOOST_CHECK_CLOSE(m.overall.geomean_speedup, std::sqrt(1.5 * 0.9), 1e-9);
  BOOST_CHECK_EQUAL(m.overall.errors.at("none"), 2u);
  BOOST_CHECK_CLOSE(scalar(m, "eval/turn1/correct_rate"), 1.0, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/turn0/correct_rate"), 0.5, tol);
}

BOOST_AUTO_TEST_CASE(speedups_against_torch_compile_when_timed) {
  auto plain = compute_metrics(fixture());
  BOOST_CHECK(!plain.compile_reference_timed);
  BOOST_CHECK(plain.overall.fast_p_vs_compile.empty());
  // Kernel 1 ms; eager reference 2 ms (2x), torch.compile reference 1.2 ms (1.2x).
  auto r = rec("p", 1, 0, true, 2.0);
  r.kernel_ms = 1.0;
  r.reference_ms = 2.0;
  r.compiled_reference_ms = 1.2;
  auto m = compute_metrics({r});
  BOOST_CHECK(m.compile_reference_timed);
  BOOST_CHECK_CLOSE(speedup_vs_compile(r), 1.2, tol);
  BOOST_CHECK_CLOSE(m.overall.geomean_speedup_vs_compile, 1.2, 1e-9);
  BOOST_CHECK_EQUAL(m.overall.fast_p_vs_compile[3], 1.0); // p = 1
  BOOST_CHECK_EQUAL(m.overall.fast_p_vs_compile[4], 0.0); // p = 1.5
  BOOST_CHECK_CLOSE(scalar(m, "eval/vs_compile/geomean_speedup"), 1.2, 1e-9);
}

BOOST_AUTO_TEST_CASE(kernelbench_verdict_is_reported_beside_the_strict_one) {
  // X: sample 0 only KernelBench-correct (1.2x), sample 1 correct by both (2.5x).
  // Y: sample 0 correct by neither, sample 1 only KernelBench-correct (0.9x).
  auto kb = [](sample_record r) {
    r.kernelbench_correct = true;
    return r;
  };
  auto x0 = kb(rec("level1/X", 1, 0, false, 1.2, "mismatch"));
  auto m = compute_metrics({x0, kb(rec("level1/X", 1, 1, true, 2.5)),
                            rec("level1/Y", 1, 0, false, 0, "mismatch"),
                            kb(rec("level1/Y", 1, 1, false, 0.9, "mismatch"))});
  auto& g = m.overall;
  // The strict verdict (`correct`), as before.
  BOOST_CHECK_EQUAL(g.correct, 1u);
  BOOST_CHECK_CLOSE(g.correct_rate, 0.25, tol);
  BOOST_REQUIRE_EQUAL(g.pass_at_k.size(), 2u);
  BOOST_CHECK_CLOSE(g.pass_at_k[0], 0.25, tol); // (1/2 + 0) / 2
  BOOST_CHECK_CLOSE(g.pass_at_k[1], 0.5, tol);
  BOOST_CHECK_EQUAL(g.fast_p[3], 0.0); // p = 1: neither first sample is strictly correct
  // KernelBench's.
  BOOST_CHECK_EQUAL(g.kernelbench_correct, 3u);
  BOOST_CHECK_CLOSE(g.kernelbench_correct_rate, 0.75, tol);
  BOOST_REQUIRE_EQUAL(g.kernelbench_pass_at_k.size(), 2u);
  BOOST_CHECK_CLOSE(g.kernelbench_pass_at_k[0], 0.75, tol); // (2/2 + 1/2) / 2
  BOOST_CHECK_CLOSE(g.kernelbench_pass_at_k[1], 1.0, tol);
  BOOST_REQUIRE_EQUAL(g.kernelbench_fast_p.size(), 6u);
  BOOST_CHECK_CLOSE(g.kernelbench_fast_p[0], 0.5, tol); // p = 0: X's first sample
  BOOST_CHECK_CLOSE(g.kernelbench_fast_p[3], 0.5, tol); // p = 1: 1.2x
  BOOST_CHECK_EQUAL(g.kernelbench_fast_p[4], 0.0);      // p = 1.5
  BOOST_CHECK_CLOSE(scalar(m, "eval/kernelbench_correct_rate"), 0.75, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/kernelbench_pass@2"), 1.0, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/kernelbench_fast_1.0"), 0.5, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/level1/kernelbench_correct_rate"), 0.75, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/correct_rate"), 0.25, tol);

  // Several turns: each verdict picks the sample's best turn by itself.
  auto t1 = rec("p", 1, 0, false, 0, "mismatch", 1);
  auto turns = compute_metrics({kb(rec("p", 1, 0, false, 1.1, "mismatch", 0)), t1});
  BOOST_CHECK_EQUAL(turns.overall.correct_rate, 0.0);
  BOOST_CHECK_EQUAL(turns.overall.kernelbench_correct_rate, 1.0); // turn 0 by KernelBench
  BOOST_CHECK_EQUAL(turns.overall.kernelbench_fast_p[3], 1.0);    // its 1.1x
  BOOST_CHECK_EQUAL(turns.turns.size(), 2u);
  BOOST_CHECK_EQUAL(turns.turns[1].kernelbench_correct_rate, 1.0);
}

BOOST_AUTO_TEST_CASE(scalars_carry_every_metric_by_name) {
  auto m = compute_metrics(fixture());
  BOOST_CHECK_CLOSE(scalar(m, "eval/correct_rate"), 0.5, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/pass@2"), 0.75, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/fast_0.5"), 0.5, tol);
  BOOST_CHECK_EQUAL(scalar(m, "eval/fast_1.0"), 0.0);
  BOOST_CHECK_CLOSE(scalar(m, "eval/best_of_n/fast_1.0"), 0.25, tol);
  BOOST_CHECK_CLOSE(scalar(m, "eval/level1/fast_0.0"), 2.0 / 3, tol);
  BOOST_CHECK_EQUAL(scalar(m, "eval/errors/static_check"), 1.0);
  BOOST_CHECK_EQUAL(scalar(m, "eval/hack_flags/try_except"), 1.0);
  BOOST_CHECK_EQUAL(fast_p_name(1), "fast_1.0");
  BOOST_CHECK_EQUAL(fast_p_name(0.5), "fast_0.5");
  BOOST_CHECK_EQUAL(fast_p_name(0), "fast_0.0");
}

// Uneven sample counts (generations that failed to save): KernelBench's calculate_pass_at_k
// takes each problem's own samples; the padded view counts the missing ones as failures.
//   P: 3 samples, sample 1 correct                 n=3 c=1
//   Q: samples 0 (correct 1.5x) and 1 (correct), 2 missing   n=2 c=2
//   R: sample 0 wrong, 1 and 2 missing              n=1 c=0
//   S: every sample missing                         n=0
BOOST_AUTO_TEST_CASE(uneven_samples_count_as_kernelbench_counts_them_or_padded) {
  std::vector<sample_record> records{
    rec("level1/P", 1, 0, false, 0, "mismatch"), rec("level1/P", 1, 1, true, 0.9),
    rec("level1/P", 1, 2, false, 0, "compile"),  rec("level1/Q", 1, 0, true, 1.5),
    rec("level1/Q", 1, 1, true, 0.7),            rec("level1/Q", 1, 2, false, 0, missing_error),
    rec("level1/R", 1, 0, false, 0, "runtime"),  rec("level1/R", 1, 1, false, 0, missing_error),
    rec("level1/R", 1, 2, false, 0, missing_error), rec("level1/S", 1, 0, false, 0, missing_error),
    rec("level1/S", 1, 1, false, 0, missing_error), rec("level1/S", 1, 2, false, 0, missing_error)};

  auto kb = compute_metrics(records); // KernelBench's counting is the default
  BOOST_CHECK(kb.counting == sample_counting::kernelbench);
  BOOST_CHECK_EQUAL(kb.overall.samples, 6u); // 3 + 2 + 1 + 0
  BOOST_CHECK_CLOSE(kb.overall.correct_rate, 3.0 / 6, tol);
  BOOST_CHECK_EQUAL(kb.overall.pass_at_k_problems, 3u); // S has no sample
  BOOST_REQUIRE_EQUAL(kb.overall.pass_at_k.size(), 3u); // k up to the most samples (P's 3)
  // pass@1: (1/3 + 1 + 0) / 3
  BOOST_CHECK_CLOSE(kb.overall.pass_at_k[0], (1.0 / 3 + 1.0) / 3, tol);
  // pass@2: P 1 - C(2,2)/C(3,2) = 2/3; Q 1; R has fewer than 2 samples: 0
  BOOST_CHECK_CLOSE(kb.overall.pass_at_k[1], (2.0 / 3 + 1.0) / 3, tol);
  // pass@3: P 1 (n - c < k); Q and R have fewer than 3: 0
  BOOST_CHECK_CLOSE(kb.overall.pass_at_k[2], 1.0 / 3, tol);
  BOOST_CHECK_CLOSE(scalar(kb, "eval/pass@2"), (2.0 / 3 + 1.0) / 3, tol);
  // fast_p scores the first sample; S's is missing, so it is not fast.
  BOOST_CHECK_CLOSE(kb.overall.fast_p[0], 1.0 / 4, tol);
  BOOST_CHECK_EQUAL(kb.overall.errors.at(missing_error), 6u); // listed whatever the counting
  BOOST_CHECK_EQUAL(kb.problems[1].samples, 2u);              // Q
  // KernelBench's verdict is counted the same way.
  BOOST_REQUIRE_EQUAL(kb.overall.kernelbench_pass_at_k.size(), 3u);

  auto padded = compute_metrics(records, default_fast_p_thresholds(), sample_counting::padded);
  BOOST_CHECK_EQUAL(padded.overall.samples, 12u);
  BOOST_CHECK_CLOSE(padded.overall.correct_rate, 3.0 / 12, tol);
  BOOST_CHECK_EQUAL(padded.overall.pass_at_k_problems, 4u);
  BOOST_REQUIRE_EQUAL(padded.overall.pass_at_k.size(), 3u);
  BOOST_CHECK_CLOSE(padded.overall.pass_at_k[0], (1.0 / 3 + 2.0 / 3) / 4, tol);
  // pass@2: P 2/3, Q (n=3, c=2) 1, R and S 0
  BOOST_CHECK_CLOSE(padded.overall.pass_at_k[1], (2.0 / 3 + 1.0) / 4, tol);
  BOOST_CHECK_CLOSE(padded.overall.pass_at_k[2], 2.0 / 4, tol);
  BOOST_CHECK_CLOSE(padded.overall.fast_p[0], 1.0 / 4, tol);

  BOOST_CHECK_EQUAL(to_string(sample_counting::padded), std::string("padded"));
  BOOST_CHECK(parse_sample_counting("kernelbench") == sample_counting::kernelbench);
  BOOST_CHECK(!parse_sample_counting("pad"));
}

BOOST_AUTO_TEST_SUITE_END()
