#pragma once
// report.html: an evaluation run for a person. One self-contained page (inline CSS, inline SVG
// charts, a few lines of script to sort tables; nothing fetched from the network):
//
//   the run (model or generations folder, problems, samples, evaluator, timing)
//   a summary table per level: compiled and correct rates, pass@k, fast_p, geometric-mean speedup
//   best-of-N fast_p (when several samples), per turn (when several turns), vs torch.compile
//   a histogram of the correct samples' speedups, a chart of each problem's best speedup
//   tables of problems, error categories, hack flags and every sample (error excerpts folded)
//
// Element ids the tests (and scripts) rely on: table#summary, table#problems, table#errors,
// table#hack-flags, table#samples, svg#speedup-histogram, svg#problem-chart. After its script
// has run, <body> carries data-rendered="yes" and data-page-width (the document's scroll width
// in pixels, so a test can see nothing overflows the window); an uncaught script error is
// recorded in the data-js-errors attribute of <html>. Wide tables scroll inside their own box;
// pass@k is shown for k = 1..5, 10, 20, 50, ... and the largest k (results.json has every k).

#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/results_json.hpp"

#include <functional>
#include <string>
#include <vector>

namespace kbrl::report {

/// The program a sample record evaluated, for the samples table ("" when unknown).
using source_reader = std::function<std::string(const sample_record&)>;

/// The report page for `records` and their `metrics`; with `source`, every sample's program is
/// in the page (folded, at most 30 KB each).
std::string render_html_report(const run_info& info, const eval_metrics& metrics,
                               const std::vector<sample_record>& records,
                               const source_reader& source = {});

/// `text` with &, <, >, " and ' escaped for HTML (invalid UTF-8 repaired).
std::string html_escape(const std::string& text);

} // namespace kbrl::report
