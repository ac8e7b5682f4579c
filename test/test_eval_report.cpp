// The files of an evaluation run without running one: TensorBoard event files read back by an
// independent reader (CRCs, protobuf fields), per-problem and results JSON round trips, the
// ledger that continues an interrupted run, the generations-folder layout, problem selection,
// and report.html rendered by a real headless browser (no script errors, the tables and charts
// there).

#include "cluster_fixture.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/generations_dir.hpp"
#include "runtime/report/html_report.hpp"
#include "runtime/report/problem_selection.hpp"
#include "runtime/report/results_json.hpp"
#include "runtime/report/run_ledger.hpp"
#include "runtime/report/tfevents_writer.hpp"
#include "test_support.hpp"
#include "tfevents_reader.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

using namespace kbrl;
using namespace kbrl::report;

namespace {

namespace fs = std::filesystem;

sample_record record(const std::string& problem, int number, int sample, bool correct,
                     double speedup, const std::string& error = "none") {
  sample_record r;
  r.problem = problem;
  r.level = problem.rfind("level2", 0) == 0 ? 2 : 1;
  r.problem_number = number;
  r.sample = sample;
  r.correct = correct;
  r.compiled = correct || error == "mismatch";
  r.error = error;
  r.speedup = speedup;
  r.kernel_ms = speedup > 0 ? 1.0 / speedup : 0;
  r.reference_ms = speedup > 0 ? 1.0 : 0;
  r.source = problem + "/sample_" + std::to_string(sample) + ".py";
  return r;
}

std::vector<sample_record> some_records() {
  auto bad = record("level1/2_B", 2, 0, false, 0, "compile");
  bad.error_excerpt = "main.cpp:3: error: expected ';' before '}' <script>alert(1)</script>";
  auto flagged = record("level2/1_C", 1, 0, false, 0, "static_check");
  flagged.hack_flags = {"try_except"};
  return {record("level1/1_A", 1, 0, true, 1.7), record("level1/1_A", 1, 1, true, 0.6),
          bad,                                   record("level1/2_B", 2, 1, false, 0, "mismatch"),
          flagged,                               record("level2/1_C", 1, 1, true, 3.2)};
}

run_info some_info() {
  run_info info;
  info.mode = "generations";
  info.generations_dir = "/data/runs/gpt";
  info.problem_source = "/data/KernelBench";
  info.levels = {1, 2};
  info.samples = 2;
  info.backend = "cuda";
  info.started = "2025-01-01T00:00:00Z";
  info.finished = "2025-01-01T00:10:00Z";
  return info;
}

/// The headless browser of this machine (tools/setup.sh installs chromium-headless-shell).
std::string browser() {
  for (auto name : {"chromium-headless-shell", "chromium", "google-chrome"})
    for (auto dir : {"/usr/bin/", "/usr/local/bin/", "/usr/lib/chromium/"}) {
      std::string path = std::string(dir) + name;
      if (::access(path.c_str(), X_OK) == 0)
        return path;
    }
  return {};
}

/// The DOM of `html_file` after the page's scripts ran, and the browser's console lines.
test::command_result render_in_browser(const std::string& html_file,
                                       const std::string& window = "1400,1000") {
  auto exe = browser();
  BOOST_REQUIRE_MESSAGE(!exe.empty(), "no headless browser: run tools/setup.sh (it installs "
                                      "Debian's chromium-headless-shell)");
  // --no-sandbox: Chromium refuses to start its sandbox as root.
  return test::run_command({exe, "--headless", "--no-sandbox", "--disable-gpu",
                            "--enable-logging=stderr", "--v=0", "--window-size=" + window,
                            "--dump-dom", "file://" + html_file},
                           60);
}

/// The document width the page's script measured (data-page-width), -1 when absent.
int page_width(const std::string& dom) {
  auto at = dom.find("data-page-width=\"");
  return at == std::string::npos ? -1 : std::atoi(dom.c_str() + at + 17);
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_report)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_standard_check_value) {
  BOOST_CHECK_EQUAL(crc32c("123456789"), 0xe3069283u); // CRC-32C's published check value
  BOOST_CHECK_EQUAL(crc32c(""), 0u);
  BOOST_CHECK_EQUAL(crc32c("456789", crc32c("123")), crc32c("123456789")); // continues
  std::string data = "kbrl";
  BOOST_CHECK_EQUAL(masked_crc32c(data), test::masked_crc(data));
}

BOOST_AUTO_TEST_CASE(event_files_read_back_with_checked_crcs) {
  test::temp_dir dir;
  auto writer = tfevents_writer::create(dir / "tb", "test");
  BOOST_REQUIRE_MESSAGE(writer, test::why(writer));
  BOOST_CHECK(fs::path(writer->path()).filename().string().rfind("events.out.tfevents.", 0) == 0);
  BOOST_REQUIRE(writer->write_scalars(1200, {{"eval/fast_1.0", 0.25}, {"eval/pass@1", 0.5}}));
  BOOST_REQUIRE(writer->write_scalars(2400, {{"eval/fast_1.0", 0.375}}));
  std::vector<test::tf_event> events;
  BOOST_REQUIRE_NO_THROW(events = test::read_event_file(writer->path()));
  BOOST_REQUIRE_EQUAL(events.size(), 3u);
  BOOST_CHECK_EQUAL(events[0].file_version, "brain.Event:2");
  BOOST_CHECK(events[0].wall_time > 1.6e9); // seconds since 1970, now
  BOOST_CHECK_EQUAL(events[1].step, 1200);
  BOOST_REQUIRE_EQUAL(events[1].scalars.size(), 2u);
  BOOST_CHECK_EQUAL(events[1].scalars[0].first, "eval/fast_1.0");
  BOOST_CHECK_EQUAL(events[1].scalars[0].second, 0.25f);
  BOOST_CHECK_EQUAL(events[1].scalars[1].first, "eval/pass@1");
  BOOST_CHECK_EQUAL(events[1].scalars[1].second, 0.5f);
  BOOST_CHECK_EQUAL(events[2].step, 2400);
  BOOST_CHECK_EQUAL(events[2].scalars[0].second, 0.375f);
  // The reader notices a flipped bit in a record's data.
  auto bytes = test::read_file(writer->path());
  bytes[bytes.size() - 6] ^= 0x01;
  auto broken = dir / "broken.tfevents";
  std::ofstream(broken, std::ios::binary) << bytes;
  BOOST_CHECK_EXCEPTION(test::read_event_file(broken), std::runtime_error,
                        [](const std::runtime_error& e) {
                          return std::string(e.what()).find("CRC mismatch") != std::string::npos;
                        });
  // A large step and many tags encode varints of several bytes.
  std::vector<std::pair<std::string, double>> many;
  for (int i = 0; i < 300; ++i)
    many.emplace_back("eval/level" + std::to_string(i) + "/correct_rate", i / 300.0);
  auto raw = encode_scalars_event(1.5, int64_t{1} << 40, many);
  auto decoded = test::decode_event(raw);
  BOOST_CHECK_EQUAL(decoded.step, int64_t{1} << 40);
  BOOST_CHECK_EQUAL(decoded.wall_time, 1.5);
  BOOST_REQUIRE_EQUAL(decoded.scalars.size(), 300u);
  BOOST_CHECK_EQUAL(decoded.scalars[299].first, "eval/level299/correct_rate");
  BOOST_CHECK_EQUAL(decoded.scalars[299].second, static_cast<float>(299 / 300.0));
  auto bad_dir = tfevents_writer::create("/proc/kbrl-no-such-dir/tb");
  BOOST_CHECK(!bad_dir);
}

BOOST_AUTO_TEST_CASE(problem_files_round_trip_every_field) {
  test::temp_dir dir;
  auto r = record("level1/1_A", 1, 0, true, 1.7);
  r.turn = 2;
  r.compiled_reference_ms = 0.8;
  r.hack_flags = {"suspicious_speedup", "tf32"};
  r.error_excerpt = "line 1\n\"quoted\" \\ tab\t \x01 and bad UTF-8: \xff\xfe end";
  r.extraction = "python_block";
  r.candidate_hash = "0123456789abcdef";
  r.evaluator_seconds = 3.25;
  r.completion_tokens = 812;
  r.finish = "stop_token";
  r.trials_passed = 5;
  r.trials_total = 5;
  auto sig = signature_of(some_info());
  auto path = dir / "p.json";
  BOOST_REQUIRE(write_file_atomically(path, problem_json("level1/1_A", sig, {r})));
  auto back = read_problem_json(path);
  BOOST_REQUIRE_MESSAGE(back, test::why(back));
  BOOST_CHECK_EQUAL(back->problem, "level1/1_A");
  BOOST_CHECK(back->signature == sig);
  BOOST_REQUIRE_EQUAL(back->records.size(), 1u);
  auto& b = back->records[0];
  BOOST_CHECK_EQUAL(b.problem, r.problem);
  BOOST_CHECK_EQUAL(b.turn, 2);
  BOOST_CHECK_EQUAL(b.speedup, r.speedup); // %.17g: exact
  BOOST_CHECK_EQUAL(b.kernel_ms, r.kernel_ms);
  BOOST_CHECK_EQUAL(b.compiled_reference_ms, 0.8);
  BOOST_CHECK(b.hack_flags == r.hack_flags);
  BOOST_CHECK_EQUAL(b.error_excerpt.substr(0, 30), r.error_excerpt.substr(0, 30));
  BOOST_CHECK(b.error_excerpt.find("\xef\xbf\xbd") != std::string::npos); // U+FFFD for bad bytes
  BOOST_CHECK_EQUAL(b.extraction, "python_block");
  BOOST_CHECK_EQUAL(b.completion_tokens, 812);
  BOOST_CHECK_EQUAL(b.finish, "stop_token");
  BOOST_CHECK_EQUAL(b.evaluator_seconds, 3.25);
  BOOST_CHECK_EQUAL(b.trials_passed, 5);
  BOOST_CHECK(b.kernelbench_correct == r.kernelbench_correct);
  BOOST_CHECK_EQUAL(b.time_coverage, r.time_coverage);
  // Records written before issue 16 have neither verdict field: their `correct` was
  // KernelBench's check, their time coverage not measured.
  json_writer w;
  auto strict_wrong = r;
  strict_wrong.correct = false;
  strict_wrong.kernelbench_correct = true;
  strict_wrong.time_coverage = 0.25;
  write_record(w, strict_wrong);
  auto both = parse_record(w.str(), "new");
  BOOST_REQUIRE_MESSAGE(both, test::why(both));
  BOOST_CHECK(!both->correct && both->kernelbench_correct);
  BOOST_CHECK_EQUAL(both->time_coverage, 0.25);
  auto old_text = w.str();
  for (std::string key : {"\"kernelbench_correct\":true,", "\"time_coverage\":0.25,"}) {
    auto at = old_text.find(key);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, key << " not in " << old_text);
    old_text.erase(at, key.size());
  }
  auto old = parse_record(old_text, "old");
  BOOST_REQUIRE_MESSAGE(old, test::why(old));
  BOOST_CHECK(!old->correct && !old->kernelbench_correct);
  BOOST_CHECK_EQUAL(old->time_coverage, -1.0);
  // A damaged file names itself and the field.
  test::write_file(path, R"({"problem": "level1/1_A", "signature": {}, "samples": [{"problem": 3}]})");
  auto broken = read_problem_json(path);
  BOOST_REQUIRE(!broken);
  BOOST_CHECK_MESSAGE(describe(broken.error()).find(path) != std::string::npos
                        && describe(broken.error()).find("\"problem\"") != std::string::npos,
                      describe(broken.error()));
  test::write_file(path, "{not json");
  BOOST_CHECK(!read_problem_json(path));
}

BOOST_AUTO_TEST_CASE(results_json_holds_the_aggregate_and_every_sample) {
  test::temp_dir dir;
  auto records = some_records();
  auto m = compute_metrics(records);
  auto info = some_info();
  info.timing.compare_torch_compile = true;
  auto path = dir / "results.json";
  BOOST_REQUIRE(write_file_atomically(path, results_json(info, m, records)));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(path).get(doc));
  double correct_rate = -1, fast0 = -1, pass2 = -1;
  BOOST_CHECK(!doc["aggregate"]["overall"]["correct_rate"].get(correct_rate));
  BOOST_CHECK_CLOSE(correct_rate, 3.0 / 6, 1e-9);
  BOOST_CHECK(!doc["aggregate"]["overall"]["fast_p"]["0.0"].get(fast0));
  BOOST_CHECK_CLOSE(fast0, 1.0 / 3, 1e-9); // first samples: A 1.7x, B compile, C refused
  BOOST_CHECK(!doc["aggregate"]["overall"]["pass_at_k"]["2"].get(pass2));
  BOOST_CHECK_CLOSE(pass2, 2.0 / 3, 1e-9);
  std::string_view compile_note;
  BOOST_CHECK(!doc["aggregate"]["torch_compile_reference"].get(compile_note));
  BOOST_CHECK(compile_note.find("missing") != std::string_view::npos);
  simdjson::dom::array levels;
  BOOST_REQUIRE(!doc["aggregate"]["levels"].get(levels));
  BOOST_CHECK_EQUAL(levels.size(), 2u);
  double kb_rate = -1, kb_pass1 = -1, kb_fast0 = -1;
  BOOST_CHECK(!doc["aggregate"]["overall"]["kernelbench_correct_rate"].get(kb_rate));
  BOOST_CHECK(!doc["aggregate"]["overall"]["kernelbench_pass_at_k"]["1"].get(kb_pass1));
  BOOST_CHECK(!doc["aggregate"]["overall"]["kernelbench_fast_p"]["0.0"].get(kb_fast0));
  BOOST_CHECK_CLOSE(kb_rate, m.overall.kernelbench_correct_rate, 1e-9);
  BOOST_CHECK_CLOSE(kb_pass1, m.overall.kernelbench_pass_at_k.at(0), 1e-9);
  auto samples = read_results_samples(path);
  BOOST_REQUIRE_MESSAGE(samples, test::why(samples));
  BOOST_REQUIRE_EQUAL(samples->size(), records.size());
  BOOST_CHECK_EQUAL((*samples)[2].error, "compile");
  BOOST_CHECK_EQUAL((*samples)[2].error_excerpt, records[2].error_excerpt);
  // The metrics of the records read back are the metrics written.
  auto again = compute_metrics(*samples);
  BOOST_CHECK_EQUAL(again.overall.geomean_speedup, m.overall.geomean_speedup);
}

BOOST_AUTO_TEST_CASE(the_ledger_writes_finished_problems_and_restores_them) {
  test::temp_dir dir;
  problem a, b;
  a.id = "level1/1_A";
  b.id = "level1/2_B";
  auto sig = signature_of(some_info());
  {
    run_ledger ledger(dir.path.string(), sig);
    ledger.expect(a.id, 2);
    ledger.expect(b.id, 1);
    auto first = ledger.add(record(a.id, 1, 1, true, 1.2));
    BOOST_REQUIRE(first);
    BOOST_CHECK(!*first); // one of two
    BOOST_CHECK(!fs::exists(ledger.problem_path(a.id)));
    auto second = ledger.add(record(a.id, 1, 0, false, 0, "runtime"));
    BOOST_REQUIRE(second);
    BOOST_CHECK(*second);
    BOOST_CHECK(fs::exists(dir / "problems/level1/1_A.json"));
    BOOST_CHECK(!ledger.add(record("level9/none", 1, 0, true, 1))); // never expected
    BOOST_CHECK(!ledger.add(record(a.id, 1, 2, true, 1)));          // one too many
    // b never finishes: "interrupted" here.
    BOOST_CHECK_EQUAL(ledger.problems_finished(), 1u);
    BOOST_CHECK_EQUAL(ledger.problems_open(), 1u);
  }
  run_ledger again(dir.path.string(), sig);
  auto restored = again.restore({a, b});
  BOOST_REQUIRE_MESSAGE(restored, test::why(restored));
  BOOST_REQUIRE_EQUAL(restored->size(), 1u);
  BOOST_CHECK_EQUAL(restored->front(), a.id);
  BOOST_CHECK(again.finished(a.id));
  auto recs = again.records();
  BOOST_REQUIRE_EQUAL(recs.size(), 2u);
  BOOST_CHECK_EQUAL(recs[0].sample, 0); // sorted by sample
  BOOST_CHECK_EQUAL(recs[0].error, "runtime");
  // Another run's settings: refused, naming the difference.
  auto other_info = some_info();
  other_info.samples = 4;
  run_ledger other(dir.path.string(), signature_of(other_info));
  auto refused = other.restore({a});
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_MESSAGE(describe(refused.error()).find("samples: \"4\" now, \"2\"")
                        != std::string::npos,
                      describe(refused.error()));
  // A problem whose file holds a failure of kbrl's (infrastructure) runs again.
  run_ledger third(dir.path.string(), sig);
  third.expect(b.id, 1);
  BOOST_REQUIRE(third.add(record(b.id, 2, 0, false, 0, "infrastructure")));
  BOOST_CHECK(fs::exists(third.problem_path(b.id)));
  run_ledger fourth(dir.path.string(), sig);
  auto r4 = fourth.restore({a, b});
  BOOST_REQUIRE(r4);
  BOOST_CHECK_EQUAL(r4->size(), 1u); // a only
  BOOST_CHECK(!fourth.finished(b.id));
}

BOOST_AUTO_TEST_CASE(generations_folders_in_every_layout) {
  test::temp_dir dir;
  dir.write("gens/level1/19_ReLU/sample_0.py", "code");
  dir.write("gens/level1/19_ReLU/sample_1.txt", "answer");
  dir.write("gens/level1/3/sample_0.md", "answer");
  dir.write("gens/level2/7_Fused/sample_0/turn_0.txt", "t0");
  dir.write("gens/level2/7_Fused/sample_0/turn_1.py", "t1");
  dir.write("gens/level_3_problem_5_sample_2_kernel.py", "kernelbench");
  dir.write("gens/level1/19_ReLU/notes.json", "{}");
  dir.write("gens/eval_results.json", "{}");
  dir.write("gens/.cache/x.py", "ignored silently");
  auto scan = scan_generations(dir / "gens");
  BOOST_REQUIRE_MESSAGE(scan, test::why(scan));
  BOOST_REQUIRE_EQUAL(scan->files.size(), 6u);
  auto& f = scan->files;
  BOOST_CHECK(f[0].level == 1 && f[0].problem_number == 3 && f[0].sample == 0 && f[0].is_completion);
  BOOST_CHECK(f[1].problem_number == 19 && f[1].sample == 0 && !f[1].is_completion);
  BOOST_CHECK(f[2].problem_number == 19 && f[2].sample == 1 && f[2].is_completion);
  BOOST_CHECK(f[3].level == 2 && f[3].turn == 0 && f[3].is_completion);
  BOOST_CHECK(f[4].level == 2 && f[4].turn == 1 && !f[4].is_completion);
  BOOST_CHECK(f[5].level == 3 && f[5].problem_number == 5 && f[5].sample == 2);
  BOOST_CHECK_EQUAL(f[2].relative, "level1/19_ReLU/sample_1.txt");
  BOOST_REQUIRE_EQUAL(scan->ignored.size(), 2u);
  BOOST_CHECK_EQUAL(scan->ignored[0], "eval_results.json");
  BOOST_CHECK_EQUAL(scan->ignored[1], "level1/19_ReLU/notes.json");
  // Two files for one sample: refused, both named.
  dir.write("gens/level1/19/sample_0.txt", "again");
  auto dup = scan_generations(dir / "gens");
  BOOST_REQUIRE(!dup);
  auto text = describe(dup.error());
  BOOST_CHECK_MESSAGE(text.find("sample_0.py") != std::string::npos
                        && text.find("level1/19/sample_0.txt") != std::string::npos,
                      text);
  BOOST_CHECK(!scan_generations(dir / "nowhere"));
  // kbrl-eval --model writes where a scan finds it again.
  problem p;
  p.level = 1;
  p.number = 19;
  p.name = "19_ReLU";
  BOOST_CHECK_EQUAL(completion_relative_path(p, 3, 0, false), "level1/19_ReLU/sample_3.txt");
  BOOST_CHECK_EQUAL(completion_relative_path(p, 0, 2, true), "level1/19_ReLU/sample_0/turn_2.txt");
  p.name = "relu"; // a file without its number: the number goes in front
  BOOST_CHECK_EQUAL(completion_relative_path(p, 0, 0, false), "level1/19_relu/sample_0.txt");
}

BOOST_AUTO_TEST_CASE(problems_are_selected_by_level_and_number) {
  auto levels = parse_levels("1, 2");
  BOOST_REQUIRE(levels);
  BOOST_CHECK(*levels == (std::vector<int32_t>{1, 2}));
  BOOST_CHECK(!parse_levels("1,x"));
  BOOST_CHECK(!parse_levels("1,1"));
  BOOST_CHECK(!parse_levels("0"));
  auto set = parse_number_set("1-3,7");
  BOOST_REQUIRE(set);
  BOOST_CHECK(set->contains(2) && set->contains(7) && !set->contains(4));
  BOOST_CHECK_EQUAL(set->to_string(), "1-3,7");
  BOOST_CHECK(parse_number_set("")->all());
  BOOST_CHECK(!parse_number_set("5-2"));
  BOOST_CHECK(!parse_number_set("1-"));
  // A flat folder of problem files serves one level.
  std::string flat = std::string(KBRL_TEST_DATA) + "/problems";
  auto some = select_problems(flat, {1}, *parse_number_set("2-4"));
  BOOST_REQUIRE_MESSAGE(some, test::why(some));
  BOOST_REQUIRE_EQUAL(some->size(), 3u);
  BOOST_CHECK_EQUAL((*some)[0].id, "level1/2_small_matmul");
  BOOST_CHECK_EQUAL((*some)[2].number, 4);
  BOOST_CHECK(!select_problems(flat, {1, 2}, {}));             // two levels need level folders
  BOOST_CHECK(!select_problems(flat, {1}, *parse_number_set("50-60"))); // nothing selected
  BOOST_CHECK(!select_problems("", {1}, {}));
  // A KernelBench checkout.
  test::temp_dir dir;
  auto problem_text = test::read_file(flat + "/1_small_relu.py");
  dir.write("kb/KernelBench/level2/5_Thing.py", problem_text);
  dir.write("kb/KernelBench/level2/12_Other.py", problem_text);
  auto kb = select_problems(dir / "kb", {2}, {});
  BOOST_REQUIRE_MESSAGE(kb, test::why(kb));
  BOOST_REQUIRE_EQUAL(kb->size(), 2u);
  BOOST_CHECK_EQUAL((*kb)[0].id, "level2/5_Thing");
  BOOST_CHECK_EQUAL((*kb)[1].level, 2);
}

BOOST_AUTO_TEST_CASE(the_report_page_escapes_and_holds_every_part) {
  auto records = some_records();
  auto m = compute_metrics(records);
  auto html = render_html_report(some_info(), m, records);
  for (auto id : {"table id=\"summary\"", "table id=\"kernelbench\"",
                  "table id=\"best-of-n\"", "table id=\"problems\"",
                  "table id=\"errors\"", "table id=\"hack-flags\"", "table id=\"samples\"",
                  "svg id=\"speedup-histogram\"", "svg id=\"problem-chart\""})
    BOOST_CHECK_MESSAGE(html.find(id) != std::string::npos, "missing " << id);
  // The error excerpt's markup is text, not markup.
  BOOST_CHECK(html.find("<script>alert(1)") == std::string::npos);
  BOOST_CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  // Self-contained: nothing is loaded from anywhere.
  BOOST_CHECK(html.find(" src=") == std::string::npos);
  BOOST_CHECK(html.find(" href=") == std::string::npos);
  BOOST_CHECK(html.find("@import") == std::string::npos);
  BOOST_CHECK_EQUAL(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
}

BOOST_AUTO_TEST_CASE(the_report_renders_in_a_headless_browser_without_script_errors) {
  test::temp_dir dir;
  auto records = some_records();
  auto page = dir / "report.html";
  test::write_file(page, render_html_report(some_info(), compute_metrics(records), records));
  auto r = render_in_browser(page);
  BOOST_REQUIRE_MESSAGE(r.code == 0, "the browser failed: " << r.output.substr(0, 2000));
  BOOST_CHECK_MESSAGE(r.output.find("data-rendered=\"yes\"") != std::string::npos,
                      "the page's script did not run to its end:\n" << r.output.substr(0, 3000));
  // The attribute (the script's own text names it in single quotes).
  BOOST_CHECK_MESSAGE(r.output.find("data-js-errors=\"") == std::string::npos,
                      "script errors:\n" << r.output.substr(0, 3000));
  BOOST_CHECK(r.output.find("Uncaught") == std::string::npos);
  // The browser built the tables (with the tbody it adds) and kept the charts.
  BOOST_CHECK(r.output.find("<table id=\"summary\" class=\"sortable\"><thead>") != std::string::npos);
  BOOST_CHECK(r.output.find("level1/1_A") != std::string::npos);
  BOOST_CHECK(r.output.find("<svg id=\"speedup-histogram\"") != std::string::npos);
  BOOST_CHECK(r.output.find("<rect") != std::string::npos);
  // The same check catches a page whose script fails.
  auto bad = dir / "bad.html";
  auto html = test::read_file(page);
  auto at = html.rfind("<script>");
  html.insert(at + 8, "no_such_function();");
  test::write_file(bad, html);
  auto rb = render_in_browser(bad);
  BOOST_CHECK_MESSAGE(rb.output.find("data-js-errors=\"") != std::string::npos,
                      "a failing script went unnoticed");
  BOOST_CHECK(rb.output.find("data-rendered=\"yes\"") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_report_with_many_samples_and_long_errors_fits_1400_pixels) {
  // 64 samples per problem (64 pass@k values, shown as 1..5, 10, 20, 50, 64), a long unbroken
  // error line, a long source path and each sample's program folded in the samples table.
  std::vector<sample_record> records;
  for (int s = 0; s < 64; ++s) {
    auto r = record("level1/1_A", 1, s, s % 3 == 0, s % 3 == 0 ? 1.5 : 0,
                    s % 3 == 0 ? "none" : "compile");
    if (s % 3 != 0)
      r.error_excerpt = std::string(400, 'x') + "\nerror: expected ';'";
    r.source = "level1/1_A/" + std::string(120, 'p') + "/sample_" + std::to_string(s) + ".py";
    records.push_back(r);
  }
  auto info = some_info();
  info.machine = "host gpu-7, 1 x NVIDIA H100 80GB HBM3, driver 580.0, libtorch 2.11.0";
  test::temp_dir dir;
  auto page = dir / "report.html";
  test::write_file(page, render_html_report(info, compute_metrics(records), records,
                                            [](const sample_record& r) {
                                              return "class ModelNew:  # " + r.source + "\n" +
                                                     std::string(300, 'c');
                                            }));
  auto html = test::read_file(page);
  BOOST_CHECK(html.find("<th>pass@64</th>") != std::string::npos);
  BOOST_CHECK(html.find("<th>pass@6</th>") == std::string::npos);
  BOOST_CHECK(html.find("<th>pass@50</th>") != std::string::npos);
  BOOST_CHECK(html.find("libtorch 2.11.0") != std::string::npos);
  BOOST_CHECK(html.find("class ModelNew:  # level1/1_A/") != std::string::npos);
  auto r = render_in_browser(page, "1400,1000");
  BOOST_REQUIRE_MESSAGE(r.code == 0, "the browser failed: " << r.output.substr(0, 2000));
  const int width = page_width(r.output);
  BOOST_CHECK_MESSAGE(width > 0 && width <= 1400, "the page is " << width << " px wide at 1400");
}

BOOST_AUTO_TEST_SUITE_END()
