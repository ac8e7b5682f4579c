#include "runtime/report/eval_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>

namespace kbrl::report {

namespace {

/// The samples of one problem, each as its list of turns.
struct problem_entry {
  std::string problem;
  int32_t level = 0;
  int32_t number = 0;
  std::map<int32_t, std::vector<const sample_record*>> samples; ///< sample -> turns, by turn
};

/// Which verdict a computation reads: the record's `correct` or its `kernelbench_correct`.
using verdict_of = bool (*)(const sample_record&);
bool correct_verdict(const sample_record& r) { return r.correct; }
bool kernelbench_verdict(const sample_record& r) { return r.kernelbench_correct; }

/// True when `a` is a better outcome than `b` by `ok`: correct beats incorrect, then the higher
/// speedup; between incorrect turns the later one is the sample's current state.
bool better(const sample_record& a, const sample_record& b, verdict_of ok) {
  if (ok(a) != ok(b))
    return ok(a);
  if (ok(a))
    return a.speedup > b.speedup;
  return a.turn > b.turn;
}

/// The sample's outcome after turn `t` (its best turn among 0..t), or its first turn when it
/// has none that early (cannot happen for turn numbers from 0, kept as a safe answer).
const sample_record& outcome_after(const std::vector<const sample_record*>& turns, int32_t t,
                                   verdict_of ok = correct_verdict) {
  const sample_record* best = nullptr;
  for (auto* r : turns)
    if (r->turn <= t && (!best || better(*r, *best, ok)))
      best = r;
  return best ? *best : *turns.front();
}

/// A problem's sample outcomes after turn t, ordered by sample index.
std::vector<const sample_record*> outcomes(const problem_entry& p, int32_t t,
                                           verdict_of ok = correct_verdict) {
  std::vector<const sample_record*> out;
  for (auto& [index, turns] : p.samples)
    out.push_back(&outcome_after(turns, t, ok));
  return out;
}

/// The outcomes that count as samples: with kernelbench counting, the missing ones do not.
std::vector<const sample_record*> counted(const std::vector<const sample_record*>& outs,
                                          sample_counting counting) {
  if (counting == sample_counting::padded)
    return outs;
  std::vector<const sample_record*> out;
  for (auto* r : outs)
    if (r->error != missing_error)
      out.push_back(r);
  return out;
}

/// pass@k over problems given as (samples, correct), k = 1.. as the counting says, and how many
/// problems it averages over.
std::pair<std::vector<double>, size_t>
pass_at_k_curve(const std::vector<std::pair<size_t, size_t>>& n_c, sample_counting counting) {
  std::vector<double> curve;
  if (counting == sample_counting::padded) {
    if (n_c.empty())
      return {curve, 0};
    size_t fewest = std::numeric_limits<size_t>::max();
    for (auto& nc : n_c)
      fewest = std::min(fewest, nc.first);
    for (size_t k = 1; k <= fewest; ++k) {
      double sum = 0;
      for (auto& [n, c] : n_c)
        sum += pass_at_k(static_cast<int64_t>(n), static_cast<int64_t>(c),
                         static_cast<int64_t>(k));
      curve.push_back(sum / static_cast<double>(n_c.size()));
    }
    return {curve, n_c.size()};
  }
  // KernelBench: problems with samples; one with fewer than k adds 0 to pass@k.
  size_t most = 0, with_samples = 0;
  for (auto& nc : n_c) {
    most = std::max(most, nc.first);
    with_samples += nc.first > 0 ? 1 : 0;
  }
  for (size_t k = 1; k <= most; ++k) {
    double sum = 0;
    for (auto& [n, c] : n_c)
      if (n >= k)
        sum += pass_at_k(static_cast<int64_t>(n), static_cast<int64_t>(c),
                         static_cast<int64_t>(k));
    curve.push_back(sum / static_cast<double>(with_samples));
  }
  return {curve, with_samples};
}

/// KernelBench's verdict through the same metrics: rate, pass@k, fast_p (first sample).
void kernelbench_metrics(metric_group& g, const std::vector<const problem_entry*>& probs,
                         int32_t turn, const std::vector<double>& thresholds,
                         sample_counting counting) {
  g.kernelbench_fast_p.assign(thresholds.size(), 0);
  size_t samples = 0;
  std::vector<std::pair<size_t, size_t>> n_c;
  for (auto* p : probs) {
    auto outs = outcomes(*p, turn, kernelbench_verdict);
    auto present = counted(outs, counting);
    size_t correct = 0;
    for (auto* r : present)
      correct += r->kernelbench_correct ? 1 : 0;
    samples += present.size();
    g.kernelbench_correct += correct;
    n_c.emplace_back(present.size(), correct);
    for (size_t i = 0; i < thresholds.size(); ++i)
      if (!outs.empty() && outs.front()->kernelbench_correct
          && outs.front()->speedup > thresholds[i])
        g.kernelbench_fast_p[i] += 1;
  }
  if (samples > 0)
    g.kernelbench_correct_rate =
      static_cast<double>(g.kernelbench_correct) / static_cast<double>(samples);
  if (probs.empty())
    return;
  const double np = static_cast<double>(probs.size());
  for (auto& f : g.kernelbench_fast_p)
    f /= np;
  g.kernelbench_pass_at_k = pass_at_k_curve(n_c, counting).first;
}

bool fast(const sample_record& r, double p) { return r.correct && r.speedup > p; }
bool fast_vs_compile(const sample_record& r, double p) {
  return r.correct && speedup_vs_compile(r) > p;
}

metric_group make_group(const std::string& name, const std::vector<const problem_entry*>& probs,
                        int32_t turn, const std::vector<double>& thresholds,
                        sample_counting counting) {
  metric_group g;
  g.name = name;
  g.problems = probs.size();
  g.fast_p.assign(thresholds.size(), 0);
  g.fast_p_best.assign(thresholds.size(), 0);
  std::vector<double> fast_compile(thresholds.size(), 0);
  double log_sum = 0, log_sum_compile = 0;
  std::vector<std::pair<size_t, size_t>> n_c; // per problem: samples, correct
  for (auto* p : probs) {
    auto outs = outcomes(*p, turn);
    for (auto* r : outs)
      ++g.errors[r->error]; // "missing" included whatever the counting
    auto present = counted(outs, counting);
    size_t correct = 0;
    for (auto* r : present) {
      ++g.samples;
      g.compiled += r->compiled ? 1 : 0;
      correct += r->correct ? 1 : 0;
      for (auto& flag : std::set<std::string>(r->hack_flags.begin(), r->hack_flags.end()))
        ++g.hack_flags[flag];
      if (r->correct && r->speedup > 0) {
        ++g.timed_correct;
        log_sum += std::log(r->speedup);
      }
      if (r->correct && speedup_vs_compile(*r) > 0) {
        ++g.compile_timed_correct;
        log_sum_compile += std::log(speedup_vs_compile(*r));
      }
    }
    g.correct += correct;
    n_c.emplace_back(present.size(), correct);
    for (size_t i = 0; i < thresholds.size(); ++i) {
      // fast_p scores the first sample, as KernelBench (sample_id 0); best-of-N apart.
      if (!outs.empty() && fast(*outs.front(), thresholds[i]))
        g.fast_p[i] += 1;
      if (std::any_of(outs.begin(), outs.end(),
                      [&](const sample_record* r) { return fast(*r, thresholds[i]); }))
        g.fast_p_best[i] += 1;
      if (!outs.empty() && fast_vs_compile(*outs.front(), thresholds[i]))
        fast_compile[i] += 1;
    }
  }
  if (g.samples > 0) {
    g.compiled_rate = static_cast<double>(g.compiled) / static_cast<double>(g.samples);
    g.correct_rate = static_cast<double>(g.correct) / static_cast<double>(g.samples);
  }
  if (g.problems > 0) {
    const double np = static_cast<double>(g.problems);
    for (size_t i = 0; i < thresholds.size(); ++i) {
      g.fast_p[i] /= np;
      g.fast_p_best[i] /= np;
      fast_compile[i] /= np;
    }
    std::tie(g.pass_at_k, g.pass_at_k_problems) = pass_at_k_curve(n_c, counting);
  }
  kernelbench_metrics(g, probs, turn, thresholds, counting);
  if (g.timed_correct > 0)
    g.geomean_speedup = std::exp(log_sum / static_cast<double>(g.timed_correct));
  if (g.compile_timed_correct > 0) {
    g.geomean_speedup_vs_compile =
      std::exp(log_sum_compile / static_cast<double>(g.compile_timed_correct));
    g.fast_p_vs_compile = fast_compile;
  }
  return g;
}

} // namespace

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  if (n < 1 || c < 0 || c > n || k < 1 || k > n)
    return std::numeric_limits<double>::quiet_NaN();
  if (n - c < k)
    return 1.0; // every draw of k samples holds a correct one
  // C(n-c,k)/C(n,k) = prod_{i=n-c+1..n} (1 - k/i): no factorials, no overflow.
  double none_correct = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i)
    none_correct *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - none_correct;
}

const char* to_string(sample_counting counting) {
  return counting == sample_counting::kernelbench ? "kernelbench" : "padded";
}

std::optional<sample_counting> parse_sample_counting(const std::string& text) {
  if (text == "kernelbench")
    return sample_counting::kernelbench;
  if (text == "padded")
    return sample_counting::padded;
  return std::nullopt;
}

const std::vector<double>& default_fast_p_thresholds() {
  static const std::vector<double> p{0.0, 0.5, 0.8, 1.0, 1.5, 2.0};
  return p;
}

std::string fast_p_name(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", p);
  std::string s = buf;
  if (s.find('.') == std::string::npos && s.find('e') == std::string::npos)
    s += ".0";
  return "fast_" + s;
}

eval_metrics compute_metrics(const std::vector<sample_record>& records,
                             const std::vector<double>& thresholds, sample_counting counting) {
  eval_metrics m;
  m.thresholds = thresholds;
  m.counting = counting;
  // Problems ordered by (level, number, id); each sample's turns by turn.
  std::map<std::tuple<int32_t, int32_t, std::string>, problem_entry> by_problem;
  int32_t last_turn = 0;
  for (auto& r : records) {
    auto& p = by_problem[{r.level, r.problem_number, r.problem}];
    p.problem = r.problem;
    p.level = r.level;
    p.number = r.problem_number;
    p.samples[r.sample].push_back(&r);
    last_turn = std::max(last_turn, r.turn);
    if (r.compiled_reference_ms > 0)
      m.compile_reference_timed = true;
  }
  std::vector<const problem_entry*> all;
  std::map<int32_t, std::vector<const problem_entry*>> per_level;
  for (auto& [key, p] : by_problem) {
    for (auto& [index, turns] : p.samples) {
      std::sort(turns.begin(), turns.end(),
                [](const sample_record* a, const sample_record* b) { return a->turn < b->turn; });
      m.max_turns = std::max(m.max_turns, turns.size());
    }
    m.max_samples = std::max(m.max_samples, p.samples.size());
    all.push_back(&p);
    per_level[p.level].push_back(&p);
  }
  m.overall = make_group("all", all, last_turn, thresholds, counting);
  for (auto& [level, probs] : per_level)
    m.levels.push_back(
      make_group("level" + std::to_string(level), probs, last_turn, thresholds, counting));
  if (last_turn > 0)
    for (int32_t t = 0; t <= last_turn; ++t)
      m.turns.push_back(make_group("turn " + std::to_string(t), all, t, thresholds, counting));
  for (auto* p : all) {
    problem_summary s;
    s.problem = p->problem;
    s.level = p->level;
    s.number = p->number;
    auto outs = outcomes(*p, last_turn);
    auto present = counted(outs, counting);
    s.samples = present.size();
    for (auto* r : present) {
      s.correct += r->correct ? 1 : 0;
      if (r->correct)
        s.best_speedup = std::max(s.best_speedup, r->speedup);
    }
    for (auto* r : outs)
      ++s.errors[r->error];
    if (!outs.empty()) {
      s.first_correct = outs.front()->correct;
      s.first_speedup = outs.front()->correct ? outs.front()->speedup : 0;
    }
    m.problems.push_back(std::move(s));
  }
  return m;
}

namespace {

void group_scalars(std::vector<std::pair<std::string, double>>& out, const metric_group& g,
                   const std::vector<double>& thresholds, const std::string& prefix) {
  out.emplace_back(prefix + "problems", static_cast<double>(g.problems));
  out.emplace_back(prefix + "samples", static_cast<double>(g.samples));
  out.emplace_back(prefix + "compiled_rate", g.compiled_rate);
  out.emplace_back(prefix + "correct_rate", g.correct_rate);
  for (size_t k = 1; k <= g.pass_at_k.size(); ++k)
    out.emplace_back(prefix + "pass@" + std::to_string(k), g.pass_at_k[k - 1]);
  for (size_t i = 0; i < thresholds.size(); ++i) {
    out.emplace_back(prefix + fast_p_name(thresholds[i]), g.fast_p[i]);
    out.emplace_back(prefix + "best_of_n/" + fast_p_name(thresholds[i]), g.fast_p_best[i]);
  }
  out.emplace_back(prefix + "geomean_speedup", g.geomean_speedup);
  out.emplace_back(prefix + "kernelbench_correct_rate", g.kernelbench_correct_rate);
  for (size_t k = 1; k <= g.kernelbench_pass_at_k.size(); ++k)
    out.emplace_back(prefix + "kernelbench_pass@" + std::to_string(k),
                     g.kernelbench_pass_at_k[k - 1]);
  for (size_t i = 0; i < thresholds.size() && i < g.kernelbench_fast_p.size(); ++i)
    out.emplace_back(prefix + "kernelbench_" + fast_p_name(thresholds[i]),
                     g.kernelbench_fast_p[i]);
  if (!g.fast_p_vs_compile.empty()) {
    out.emplace_back(prefix + "vs_compile/geomean_speedup", g.geomean_speedup_vs_compile);
    for (size_t i = 0; i < thresholds.size(); ++i)
      out.emplace_back(prefix + "vs_compile/" + fast_p_name(thresholds[i]),
                       g.fast_p_vs_compile[i]);
  }
}

} // namespace

std::vector<std::pair<std::string, double>> metric_scalars(const eval_metrics& m,
                                                           const std::string& prefix) {
  std::vector<std::pair<std::string, double>> out;
  group_scalars(out, m.overall, m.thresholds, prefix);
  for (auto& [category, n] : m.overall.errors)
    out.emplace_back(prefix + "errors/" + category, static_cast<double>(n));
  for (auto& [flag, n] : m.overall.hack_flags)
    out.emplace_back(prefix + "hack_flags/" + flag, static_cast<double>(n));
  for (auto& g : m.levels)
    group_scalars(out, g, m.thresholds, prefix + g.name + "/");
  for (size_t t = 0; t < m.turns.size(); ++t)
    group_scalars(out, m.turns[t], m.thresholds, prefix + "turn" + std::to_string(t) + "/");
  return out;
}

} // namespace kbrl::report
