// kbrl-eval beyond one turn and beyond the eager reference, as a user runs it: real processes,
// the real evaluator (Python workers with torch on the CPU, --backend torch) on the small test
// problems, and a scripted OpenAI-compatible server (test/data/evalturns) standing in for a
// model whose answer at each turn is known in advance.
//
//   - --turns 3: each turn's prompt carries the earlier answers and the evaluator's feedback;
//     turn 2 fixes what turn 1 got wrong; the metrics per turn (best of the turns so far) equal
//     the values computed by hand below; TensorBoard gets them as eval/turn<T>/... in the
//     training run's tensorboard/ folder at the given step;
//   - a run interrupted in the middle of an episode continues from its turn log: finished turns
//     are neither drawn nor evaluated again;
//   - the built-in sampler (a tiny random model) runs episodes too: every turn drawn, kept and
//     logged; a finished run is not drawn again;
//   - --reference compile: on torch < 2 (this machine's 1.13) every sample fails with the clear
//     message; on torch >= 2 (the GPU machine) the torch.compile reference is timed and is what
//     the speedup is measured against; the engine caches the two reference timings apart;
//   - the pieces without processes: the turn log (round trip, a torn line, a gap), the
//     checkpoint step read from checkpoints.jsonl, where TensorBoard events go.

#include "cluster_fixture.hpp"
#include "helper_process.hpp"
#include "tokenizer_fixture.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/eval/python_probe.hpp"
#include "runtime/evalcli/tensorboard_target.hpp"
#include "runtime/evalcli/turn_log.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/report/results_json.hpp"
#include "test_support.hpp"
#include "tfevents_reader.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <simdjson.h>
#include <thread>

using namespace kbrl;
using kbrl::test::contains;

namespace {

namespace fs = std::filesystem;

const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-eval";
const std::string problems = std::string(KBRL_TEST_DATA) + "/problems";
const std::string relu_program =
  std::string(KBRL_TEST_DATA) + "/evalcli/generations/level1/1_small_relu/sample_0.py";

/// The command line shared by every run: the test problems as level 1, judged on the CPU, the
/// evaluation caches in the build folder (later runs load what the first one built).
std::vector<std::string> eval_args(std::vector<std::string> extra) {
  std::vector<std::string> argv{tool,          "--kernelbench", problems, "--backend", "torch",
                                "--trials",    "2",             "--perf-trials",     "3",
                                "--timeout",   "300",           "--config",
                                "eval.cache_dir=" + std::string(KBRL_BUILD_DIR)
                                  + "/test-cache/evalturns"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string program(const std::string& forward_body, const std::string& init_extra = "") {
  return "import time\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n"
         + init_extra + "\n    def forward(self, x):\n        return " + forward_body + "\n";
}

/// An answer in the episodes' format: reasoning, then the program inside the kernel tags.
std::string answer(const std::string& thought, const std::string& code) {
  return "<think>" + thought + "</think>\nHere it is.\n<KERNEL>\n" + code + "</KERNEL>\n";
}

const std::string relu_phrase = "performs a ReLU activation";
const std::string softmax_phrase = "performs a Softmax activation";

/// test/data/evalturns/scripted_openai_server.py as a process, answering from `script`
/// ({phrase: [answer per turn]}) and logging every prompt.
class scripted_server {
public:
  scripted_server(const test::temp_dir& dir, const std::map<std::string, std::vector<std::string>>& script)
    : log_(dir / "prompts.jsonl") {
    std::string json = "{";
    for (auto& [phrase, answers] : script) {
      std::string list;
      for (auto& a : answers) {
        std::string quoted;
        append_json_string(quoted, a);
        list += (list.empty() ? "" : ",") + quoted;
      }
      std::string key;
      append_json_string(key, phrase);
      json += (json.size() > 1 ? "," : "") + key + ":[" + list + "]";
    }
    json += "}";
    auto script_path = dir.write("script.json", json);
    process_ = std::make_unique<test::helper_process>(std::vector<std::string>{
      "/usr/bin/python3", std::string(KBRL_TEST_DATA) + "/evalturns/scripted_openai_server.py",
      "--script", script_path, "--log", log_});
    const auto& line = process_->first_line();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    int64_t port = 0;
    BOOST_REQUIRE_MESSAGE(!parser.parse(line).get(doc) && !doc["port"].get(port),
                          "the scripted server said: " << line);
    port_ = static_cast<int>(port);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  struct request {
    std::string phrase, prompt;
    int64_t turn = -1;
  };
  /// Every request so far, in order.
  std::vector<request> requests() const {
    std::vector<request> out;
    std::ifstream in(log_);
    std::string line;
    simdjson::dom::parser parser;
    while (std::getline(in, line)) {
      simdjson::dom::element doc;
      BOOST_REQUIRE(!parser.parse(line).get(doc));
      request r;
      std::string_view s;
      if (!doc["phrase"].get(s))
        r.phrase = std::string(s);
      BOOST_REQUIRE(!doc["prompt"].get(s));
      r.prompt = std::string(s);
      BOOST_REQUIRE(!doc["turn"].get(r.turn));
      out.push_back(std::move(r));
    }
    return out;
  }

private:
  std::string log_;
  std::unique_ptr<test::helper_process> process_; // started once the script is written
  int port_ = 0;
};

/// The model's answers: ReLU wrong, right, then no program; Softmax no program, wrong, right.
std::map<std::string, std::vector<std::string>> three_turn_script(const std::string& softmax_turn1) {
  return {
    {relu_phrase,
     {answer("abs is close enough", program("torch.abs(x)")),
      answer("negative inputs must give 0", test::read_file(relu_program)),
      "I cannot improve on it."}},
    {softmax_phrase,
     {"Let me think about it first.", softmax_turn1,
      answer("over dim 1", program("torch.softmax(x, dim=1)"))}},
  };
}

std::vector<std::string> model_args(const scripted_server& server, const std::string& out,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--model", "scripted-coder", "--levels", "1", "--problems",
                                "1,4", "--turns", "3", "--chat-format", "chatml",
                                "--max-new-tokens", "64", "--output", out, "--config",
                                "sampler.backend=remote", "--config",
                                "sampler.remote_url=" + server.url(), "--config",
                                "sampler.remote_api=completions"};
  args.insert(args.end(), extra.begin(), extra.end());
  return eval_args(args);
}

std::vector<report::sample_record> samples_of(const std::string& results_json) {
  auto s = report::read_results_samples(results_json);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  return *s;
}

/// (problem, turn) -> record of sample 0.
std::map<std::pair<std::string, int>, report::sample_record>
by_turn(const std::vector<report::sample_record>& records) {
  std::map<std::pair<std::string, int>, report::sample_record> out;
  for (auto& r : records)
    out[{r.problem, r.turn}] = r;
  return out;
}

/// results.json's aggregate "turns"[t][key...] as a number.
double turn_metric(const std::string& results, size_t t, const std::vector<std::string>& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  BOOST_REQUIRE(!parser.load(results).get(e));
  simdjson::dom::array turns;
  BOOST_REQUIRE(!e["aggregate"]["turns"].get(turns));
  BOOST_REQUIRE(t < turns.size());
  e = turns.at(t);
  for (auto& key : path)
    BOOST_REQUIRE_MESSAGE(!e[key].get(e), "no " << key << " in turn " << t);
  double v = -1;
  if (e.get(v)) {
    uint64_t n = 0;
    BOOST_REQUIRE(!e.get(n));
    v = static_cast<double>(n);
  }
  return v;
}

/// The verdicts the script must produce, and the metrics per turn computed by hand from them.
void check_three_turn_results(const std::string& out) {
  auto results = out + "/results.json";
  auto records = samples_of(results);
  BOOST_REQUIRE_EQUAL(records.size(), 6u);
  auto r = by_turn(records);
  const std::string relu = "level1/1_small_relu", softmax = "level1/4_small_softmax";
  BOOST_CHECK_EQUAL(r.at({relu, 0}).error, "mismatch");
  BOOST_CHECK_MESSAGE(r.at({relu, 1}).correct, r.at({relu, 1}).error_excerpt);
  BOOST_CHECK_EQUAL(r.at({relu, 2}).error, "format");
  BOOST_CHECK_EQUAL(r.at({softmax, 0}).error, "format");
  BOOST_CHECK_EQUAL(r.at({softmax, 1}).error, "mismatch");
  BOOST_CHECK_MESSAGE(r.at({softmax, 2}).correct, r.at({softmax, 2}).error_excerpt);
  BOOST_CHECK_EQUAL(r.at({relu, 1}).extraction, "kernel_tag");
  BOOST_CHECK_EQUAL(r.at({relu, 1}).source, "level1/1_small_relu/sample_0/turn_1.txt");
  for (auto& [key, rec] : r)
    BOOST_CHECK_MESSAGE(fs::exists(out + "/generations/" + rec.source), rec.source);
  // Best of the turns so far, per turn t (a sample counts as correct at t if any turn <= t was):
  //   t=0: ReLU no, Softmax no                      correct 0/2, fast_0.0 0
  //   t=1: ReLU yes (turn 1), Softmax no            correct 1/2, fast_0.0 1/2,
  //                                                 geomean = ReLU turn 1's speedup
  //   t=2: ReLU yes (turn 1, still its best), Softmax yes (turn 2)
  //                                                 correct 2/2, fast_0.0 1,
  //                                                 geomean = sqrt(ReLU t1 * Softmax t2)
  // Errors after turn 0: ReLU mismatch, Softmax format; after turn 1: Softmax mismatch (its
  // latest incorrect turn).
  const double s_relu = r.at({relu, 1}).speedup, s_softmax = r.at({softmax, 2}).speedup;
  BOOST_REQUIRE(s_relu > 0 && s_softmax > 0);
  BOOST_CHECK_EQUAL(turn_metric(results, 0, {"correct_rate"}), 0.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 1, {"correct_rate"}), 0.5);
  BOOST_CHECK_EQUAL(turn_metric(results, 2, {"correct_rate"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 0, {"fast_p", "0.0"}), 0.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 1, {"fast_p", "0.0"}), 0.5);
  BOOST_CHECK_EQUAL(turn_metric(results, 2, {"fast_p", "0.0"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 0, {"geomean_speedup"}), 0.0);
  BOOST_CHECK_CLOSE(turn_metric(results, 1, {"geomean_speedup"}), s_relu, 1e-9);
  BOOST_CHECK_CLOSE(turn_metric(results, 2, {"geomean_speedup"}), std::sqrt(s_relu * s_softmax),
                    1e-9);
  BOOST_CHECK_EQUAL(turn_metric(results, 0, {"errors", "mismatch"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 0, {"errors", "format"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 1, {"errors", "mismatch"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 1, {"errors", "none"}), 1.0);
  BOOST_CHECK_EQUAL(turn_metric(results, 2, {"errors", "none"}), 2.0);
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_turns)

BOOST_AUTO_TEST_CASE(turn_two_fixes_turn_one_and_the_metrics_are_per_turn) {
  test::temp_dir dir;
  scripted_server server(dir, three_turn_script(answer("over dim 0?",
                                                       program("torch.softmax(x, dim=0)"))));
  auto out = dir / "out";
  auto run_dir = dir / "run";
  dir.write("run/config.toml", "# a training run's folder\n");
  auto r = test::run_command(
    model_args(server, out, {"--tensorboard", run_dir, "--step", "120"}), 240);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_MESSAGE(contains(r.output, "2 problems (0 finished before), 2 samples of 3 turns"),
                      r.output);
  check_three_turn_results(out);

  // Each turn was prompted as the episodes prompt: the earlier answers and the feedback on them.
  auto requests = server.requests();
  BOOST_REQUIRE_EQUAL(requests.size(), 6u);
  std::map<std::pair<std::string, int64_t>, std::string> prompt;
  for (auto& q : requests)
    prompt[{q.phrase, q.turn}] = q.prompt;
  BOOST_REQUIRE_EQUAL(prompt.size(), 6u); // turns 0, 1, 2 of each problem, once each
  auto& relu1 = prompt.at({relu_phrase, 1});
  BOOST_CHECK(contains(relu1, "Here it is.")); // turn 0's answer, its reasoning dropped
  BOOST_CHECK(!contains(relu1, "abs is close enough"));
  BOOST_CHECK_MESSAGE(contains(relu1, "Your previous answer: the output differs from the "
                                      "reference in 2 of 2 trials."),
                      relu1);
  auto& softmax1 = prompt.at({softmax_phrase, 1});
  BOOST_CHECK_MESSAGE(contains(softmax1, "Your previous answer: no program could be read from it "
                                         "(no_code)."),
                      softmax1);
  auto& softmax2 = prompt.at({softmax_phrase, 2});
  BOOST_CHECK(contains(softmax2, "Let me think about it first."));
  BOOST_CHECK(contains(softmax2, "2 of 2 trials"));

  // The console table and the report have the turns; results.json says how prompts were made.
  BOOST_CHECK(contains(r.output, "per turn (each sample's best turn so far)"));
  BOOST_CHECK(contains(test::read_file(out + "/report.html"), "<table id=\"turns\""));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(out + "/results.json").get(doc));
  std::string_view how, reference;
  BOOST_REQUIRE(!doc["run"]["prompt"].get(how));
  BOOST_CHECK(contains(std::string(how), "multi-turn episode prompts"));
  BOOST_REQUIRE(!doc["run"]["reference"].get(reference));
  BOOST_CHECK_EQUAL(reference, "eager");

  // TensorBoard: in the run's tensorboard/ folder, at step 120, under eval/.
  std::vector<std::string> event_files;
  for (auto& e : fs::directory_iterator(run_dir + "/tensorboard"))
    event_files.push_back(e.path().string());
  BOOST_REQUIRE_EQUAL(event_files.size(), 1u);
  auto events = test::read_event_file(event_files[0]);
  BOOST_REQUIRE_EQUAL(events.size(), 2u);
  BOOST_CHECK_EQUAL(events[1].step, 120);
  std::map<std::string, float> scalars(events[1].scalars.begin(), events[1].scalars.end());
  for (auto& [tag, value] : scalars)
    BOOST_CHECK_MESSAGE(tag.rfind("eval/", 0) == 0, tag);
  BOOST_CHECK_EQUAL(scalars.at("eval/correct_rate"), 1.0f);
  BOOST_CHECK_EQUAL(scalars.at("eval/turn0/correct_rate"), 0.0f);
  BOOST_CHECK_EQUAL(scalars.at("eval/turn1/correct_rate"), 0.5f);
  BOOST_CHECK_EQUAL(scalars.at("eval/turn2/correct_rate"), 1.0f);
}

BOOST_AUTO_TEST_CASE(an_episode_interrupted_mid_turns_continues_from_its_turn_log) {
  test::temp_dir dir;
  // Softmax's turn 1 takes a minute to construct: time to interrupt the run in that turn.
  auto slow = answer("over dim 0?", program("torch.softmax(x, dim=0)", "        time.sleep(60)\n"));
  scripted_server server(dir, three_turn_script(slow));
  auto out = dir / "out";
  auto args = model_args(server, out);
  test::child_process run(args, dir / "run.log");
  auto softmax_turn1 = out + "/generations/level1/4_small_softmax/sample_0/turn_1.txt";
  auto softmax_log = out + "/turns/level1/4_small_softmax/sample_0.jsonl";
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return fs::exists(softmax_turn1)
                                                      && fs::exists(softmax_log); },
                                         std::chrono::seconds(120)),
                        run.output());
  std::this_thread::sleep_for(std::chrono::milliseconds(500)); // its evaluation has begun
  run.signal(SIGINT);
  BOOST_CHECK_EQUAL(run.wait_exit(std::chrono::seconds(10)), 130);
  BOOST_CHECK(!fs::exists(out + "/results.json"));
  BOOST_CHECK(!fs::exists(out + "/problems/level1/4_small_softmax.json"));
  auto before = server.requests().size();
  // What the interrupted turn drew is on disk and is reused: make it the quick wrong answer.
  dir.write("out/generations/level1/4_small_softmax/sample_0/turn_1.txt",
            answer("over dim 0?", program("torch.softmax(x, dim=0)")));
  auto rest = test::run_command(args, 240);
  BOOST_REQUIRE_MESSAGE(rest.code == 0, rest.output);
  BOOST_CHECK_MESSAGE(contains(rest.output, "(from the turn log)"), rest.output);
  // Softmax turn 0 was logged: not drawn and not evaluated again; only turn 2 was drawn for it.
  BOOST_CHECK(!contains(rest.output, "4_small_softmax sample 0 turn 0: format\n"));
  auto requests = server.requests();
  size_t softmax_drawn = 0;
  for (size_t i = before; i < requests.size(); ++i)
    softmax_drawn += requests[i].phrase == softmax_phrase ? 1 : 0;
  BOOST_CHECK_EQUAL(softmax_drawn, 1u);
  check_three_turn_results(out);
}

BOOST_AUTO_TEST_CASE(the_torch_compile_reference_is_timed_or_refused_clearly) {
  test::temp_dir dir;
  dir.write("gens/level1/1_small_relu/sample_0.py", test::read_file(relu_program));
  auto out = dir / "out";
  auto r = test::run_command(
    eval_args({"--generations", dir / "gens", "--output", out, "--reference", "compile"}), 240);
  // Refused (torch < 2): nothing could be judged, exit 3 with the files written; timed: 0.
  BOOST_REQUIRE_MESSAGE(r.code == 0 || r.code == 3, r.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 1u);
  auto& rec = records[0];
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(out + "/results.json").get(doc));
  std::string_view reference;
  BOOST_REQUIRE(!doc["run"]["reference"].get(reference));
  BOOST_CHECK_EQUAL(reference, "compile");
  if (contains(rec.error_excerpt, "torch.compile needs torch >= 2.0")) {
    // torch 1.13 here: the message says what is missing and which torch the worker has.
    BOOST_TEST_MESSAGE("torch < 2 in the worker: the torch.compile reference is refused");
    BOOST_CHECK_EQUAL(rec.error, "infrastructure");
    BOOST_CHECK_EQUAL(r.code, 3);
    BOOST_CHECK_MESSAGE(contains(r.output, "no candidate could be judged"), r.output);
    BOOST_CHECK_MESSAGE(contains(rec.error_excerpt, "torch.compile needs torch >= 2.0, this "
                                                    "worker has 1."),
                        rec.error_excerpt);
    BOOST_CHECK_EQUAL(rec.speedup, 0.0);
    // Another reference in the same folder is another run.
    auto eager = test::run_command(eval_args({"--generations", dir / "gens", "--output", out}), 60);
    BOOST_CHECK_EQUAL(eager.code, 1);
    BOOST_CHECK_MESSAGE(contains(eager.output, "reference: \"(not set)\" now, \"compile\""),
                        eager.output);
    return;
  }
  // torch >= 2 (the GPU machine): timed, and the speedup is against it.
  BOOST_CHECK_MESSAGE(rec.correct, rec.error << ": " << rec.error_excerpt);
  BOOST_CHECK(rec.compiled_reference_ms > 0 && rec.reference_ms > 0 && rec.kernel_ms > 0);
  BOOST_CHECK_CLOSE(rec.speedup, rec.compiled_reference_ms / rec.kernel_ms, 1e-6);
  std::string_view timed;
  BOOST_REQUIRE(!doc["aggregate"]["torch_compile_reference"].get(timed));
  BOOST_CHECK_EQUAL(timed, "timed");
}

BOOST_AUTO_TEST_CASE(the_engine_caches_the_two_references_apart) {
  // One engine with eager speedups and the torch.compile comparison beside them, then one whose
  // speedups are against torch.compile, sharing the reference timing cache file.
  test::temp_dir dir;
  eval::engine_options opts;
  opts.worker.python = eval::resolve_python("auto");
  opts.worker.script = std::string(KBRL_SOURCE_DIR) + "/tools/kbrl_eval_worker.py";
  opts.worker.scratch_dir = dir / "scratch";
  opts.worker.extensions_dir = dir / "extensions";
  opts.reference_cache_file = dir / "reference_times.jsonl";
  auto task = eval::load_problem_file(problems + "/1_small_relu.py");
  BOOST_REQUIRE_MESSAGE(task, test::why(task));
  eval_request req;
  req.task = *task;
  req.task.backend = kernel_backend::torch;
  req.candidate_source = test::read_file(relu_program);
  req.timing.correctness_trials = 1;
  req.timing.perf_trials = 3;
  req.timing.compare_torch_compile = true;
  eval_result first, second;
  {
    eval::eval_engine beside(opts);
    first = beside.evaluate(req);
    second = beside.evaluate(req);
    BOOST_CHECK_EQUAL(beside.reference_cache_hits(), 1u);
  }
  BOOST_REQUIRE_MESSAGE(first.correct, to_string(first.error) << ": " << first.error_excerpt);
  BOOST_CHECK_CLOSE(first.speedup, first.reference_runtime.mean_ms / first.kernel_runtime.mean_ms,
                    1e-9); // eager
  BOOST_CHECK_EQUAL(second.reference_runtime.mean_ms, first.reference_runtime.mean_ms);
  BOOST_CHECK_EQUAL(second.compiled_reference_runtime.mean_ms,
                    first.compiled_reference_runtime.mean_ms);
  const bool has_compile = first.compiled_reference_runtime.mean_ms > 0;
  BOOST_TEST_MESSAGE("torch.compile in the worker: " << (has_compile ? "yes" : "no"));

  opts.reference_mode = "compile";
  eval::eval_engine against(opts);
  auto third = against.evaluate(req);
  if (!has_compile) {
    // Beside eager speedups a missing torch.compile only leaves the comparison out; as the
    // reference it fails the evaluation with the reason.
    BOOST_CHECK_EQUAL(to_string(third.error), "infrastructure");
    BOOST_CHECK_MESSAGE(contains(third.error_excerpt, "torch.compile needs torch >= 2.0"),
                        third.error_excerpt);
    return;
  }
  BOOST_REQUIRE_MESSAGE(third.correct, to_string(third.error) << ": " << third.error_excerpt);
  // Both timings came from the cache file the first engine wrote, each under its own key.
  BOOST_CHECK_EQUAL(third.compiled_reference_runtime.mean_ms,
                    first.compiled_reference_runtime.mean_ms);
  BOOST_CHECK_EQUAL(third.reference_runtime.mean_ms, first.reference_runtime.mean_ms);
  BOOST_CHECK_NE(third.compiled_reference_runtime.mean_ms, third.reference_runtime.mean_ms);
  BOOST_CHECK_CLOSE(third.speedup,
                    third.compiled_reference_runtime.mean_ms / third.kernel_runtime.mean_ms, 1e-9);
}

BOOST_AUTO_TEST_CASE(the_built_in_sampler_runs_episodes_too) {
  // A tiny random model writes no program: every turn is a format failure, fed back as such;
  // no evaluation worker is needed, and each turn's completion is kept in the generations layout.
  test::temp_dir dir;
  auto model = dir / "tiny-qwen2";
  BOOST_REQUIRE(model::write_random_checkpoint(model, model::tiny_model_config("qwen2"), 11));
  dir.write("tiny-qwen2/tokenizer.json", test::byte_tokenizer_json());
  auto out = dir / "out";
  auto r = test::run_command(
    eval_args({"--model", model, "--levels", "1", "--problems", "1", "--samples", "2", "--turns",
               "2", "--max-new-tokens", "8", "--chat-format", "chatml", "--temperature", "1.0",
               "--output", out, "--config", "sampler.dtype=fp32", "--config", "sampler.slots=4",
               "--config", "sampler.max_seq_len=8192"}),
    180);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 4u);
  for (auto& rec : records) {
    BOOST_CHECK_EQUAL(rec.error, "format");
    BOOST_CHECK(rec.completion_tokens > 0 && rec.completion_tokens <= 8);
    BOOST_CHECK_EQUAL(rec.source, "level1/1_small_relu/sample_" + std::to_string(rec.sample)
                                    + "/turn_" + std::to_string(rec.turn) + ".txt");
    BOOST_CHECK(fs::exists(out + "/generations/" + rec.source));
  }
  auto log = evalcli::read_turn_log(evalcli::turn_log_path(out, "level1/1_small_relu", 1));
  BOOST_REQUIRE_MESSAGE(log, test::why(log));
  BOOST_CHECK_EQUAL(log->size(), 2u);
  // The same command again: everything is finished, nothing is drawn (no model is loaded).
  auto again = test::run_command(
    eval_args({"--model", model, "--levels", "1", "--problems", "1", "--samples", "2", "--turns",
               "2", "--max-new-tokens", "8", "--chat-format", "chatml", "--temperature", "1.0",
               "--output", out, "--config", "sampler.dtype=fp32", "--config", "sampler.slots=4",
               "--config", "sampler.max_seq_len=8192"}),
    60);
  BOOST_REQUIRE_MESSAGE(again.code == 0, again.output);
  BOOST_CHECK_MESSAGE(contains(again.output, "1 problems (1 finished before)"), again.output);
  BOOST_CHECK(!contains(again.output, "loading"));
}

BOOST_AUTO_TEST_CASE(multi_turn_needs_a_conversation_the_sampler_can_take) {
  test::temp_dir dir;
  scripted_server server(dir, {});
  auto out = dir / "out";
  auto r = test::run_command(
    eval_args({"--model", "scripted-coder", "--levels", "1", "--problems", "1", "--turns", "2",
               "--output", out, "--config", "sampler.backend=remote", "--config",
               "sampler.remote_url=" + server.url(), "--config", "sampler.remote_api=chat"}),
    60);
  BOOST_CHECK_EQUAL(r.code, 1);
  BOOST_CHECK_MESSAGE(contains(r.output, "cannot go to the chat endpoint"), r.output);
  auto raw = test::run_command(
    eval_args({"--model", "scripted-coder", "--levels", "1", "--problems", "1", "--turns", "2",
               "--chat-format", "none", "--output", out, "--config", "sampler.backend=remote",
               "--config", "sampler.remote_url=" + server.url()}),
    60);
  BOOST_CHECK_EQUAL(raw.code, 1);
  BOOST_CHECK_MESSAGE(contains(raw.output, "needs a chat format"), raw.output);
}

BOOST_AUTO_TEST_CASE(the_turn_log_reads_back_what_it_wrote) {
  test::temp_dir dir;
  auto path = evalcli::turn_log_path(dir / "out", "level1/19_ReLU", 2);
  BOOST_CHECK_EQUAL(path, dir / "out/turns/level1/19_ReLU/sample_2.jsonl");
  auto none = evalcli::read_turn_log(path);
  BOOST_REQUIRE_MESSAGE(none, test::why(none));
  BOOST_CHECK(none->empty());
  evalcli::logged_turn t0;
  t0.turn = 0;
  t0.completion = "<think>x</think>no code, and a bad byte \xff";
  t0.record.problem = "level1/19_ReLU";
  t0.record.error = "format";
  evalcli::logged_turn t1;
  t1.turn = 1;
  t1.completion = "<KERNEL>class ModelNew: pass</KERNEL>";
  t1.evaluated = true;
  t1.verdict.error = eval_error::mismatch;
  t1.verdict.compiled = true;
  t1.verdict.trials_total = 2;
  t1.verdict.trials_passed = 1;
  t1.verdict.trials.push_back({true, 0.0, 0.0, ""});
  t1.verdict.trials.push_back({false, 0.5, 0.25, "values differ"});
  t1.verdict.error_excerpt = "1 of 2 correctness trials failed";
  t1.verdict.kernel_runtime.mean_ms = 1.5;
  t1.record.problem = "level1/19_ReLU";
  t1.record.turn = 1;
  t1.record.error = "mismatch";
  t1.record.trials_total = 2;
  BOOST_REQUIRE(evalcli::append_turn(path, t0));
  BOOST_REQUIRE(evalcli::append_turn(path, t1));
  auto back = evalcli::read_turn_log(path);
  BOOST_REQUIRE_MESSAGE(back, test::why(back));
  BOOST_REQUIRE_EQUAL(back->size(), 2u);
  auto& a = (*back)[0];
  auto& b = (*back)[1];
  BOOST_CHECK(!a.evaluated);
  BOOST_CHECK(contains(a.completion, "no code, and a bad byte \xef\xbf\xbd")); // U+FFFD
  BOOST_CHECK_EQUAL(a.record.error, "format");
  BOOST_CHECK(b.evaluated);
  BOOST_CHECK(b.verdict.error == eval_error::mismatch);
  BOOST_CHECK_EQUAL(b.verdict.trials_total, 2);
  BOOST_REQUIRE_EQUAL(b.verdict.trials.size(), 2u);
  BOOST_CHECK_EQUAL(b.verdict.trials[1].max_abs_diff, 0.5);
  BOOST_CHECK_EQUAL(b.verdict.trials[1].note, "values differ");
  BOOST_CHECK_EQUAL(b.verdict.kernel_runtime.mean_ms, 1.5);
  BOOST_CHECK_EQUAL(b.record.turn, 1);
  BOOST_CHECK_EQUAL(b.record.trials_total, 2);

  // A line cut short by a crash: the turns before it count, it does not.
  {
    std::ofstream(path, std::ios::app) << "{\"turn\":2,\"completion\":\"cut";
  }
  auto torn = evalcli::read_turn_log(path);
  BOOST_REQUIRE_MESSAGE(torn, test::why(torn));
  BOOST_CHECK_EQUAL(torn->size(), 2u);
  // A gap (turn 3 after turn 1): the episode goes on from turn 2.
  auto gap_path = dir / "gap.jsonl";
  BOOST_REQUIRE(evalcli::append_turn(gap_path, t0));
  auto t3 = t1;
  t3.turn = 3;
  BOOST_REQUIRE(evalcli::append_turn(gap_path, t3));
  auto gap = evalcli::read_turn_log(gap_path);
  BOOST_REQUIRE_MESSAGE(gap, test::why(gap));
  BOOST_CHECK_EQUAL(gap->size(), 1u);
  // A complete line that is not a turn is an error naming the file and line.
  auto bad = dir.write("bad.jsonl", "{\"turn\":0,\"completion\":7}\n");
  auto refused = evalcli::read_turn_log(bad);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_MESSAGE(contains(describe(refused.error()), "bad.jsonl:1: \"completion\""),
                      describe(refused.error()));
}

BOOST_AUTO_TEST_CASE(the_step_comes_from_the_checkpoint_and_events_go_beside_training) {
  test::temp_dir dir;
  dir.write("run/learner/checkpoints/checkpoints.jsonl",
            "{\"step\":20,\"dir\":\"step-000020\",\"unix_ms\":1,\"cursor\":{\"batches_trained\":20,"
            "\"last_batch_id\":20,\"last_coordinator_step\":20,\"policy_version\":20}}\n"
            "{\"step\":40,\"dir\":\"step-000040\",\"unix_ms\":2,\"cursor\":{\"batches_trained\":40,"
            "\"last_batch_id\":40,\"last_coordinator_step\":40,\"policy_version\":40}}\n");
  dir.write("run/learner/checkpoints/step-000040/adapter/adapter_config.json", "{}");
  dir.write("run/config.toml", "");
  auto adapter = dir / "run/learner/checkpoints/step-000040/adapter";
  std::string source;
  auto step = evalcli::checkpoint_step(adapter, &source);
  BOOST_REQUIRE_MESSAGE(step, test::why(step));
  BOOST_CHECK_EQUAL(*step, 40);
  BOOST_CHECK(contains(source, "checkpoints.jsonl"));
  // The step folder itself works too.
  auto from_dir = evalcli::checkpoint_step(dir / "run/learner/checkpoints/step-000040/");
  BOOST_REQUIRE_MESSAGE(from_dir, test::why(from_dir));
  BOOST_CHECK_EQUAL(*from_dir, 40);
  // An adapter outside a learner's checkpoints: the message says to give --step.
  dir.write("loose/adapter_config.json", "{}");
  auto loose = evalcli::checkpoint_step(dir / "loose");
  BOOST_REQUIRE(!loose);
  BOOST_CHECK_MESSAGE(contains(describe(loose.error()), "give --step N"),
                      describe(loose.error()));

  // A training run's folder: its tensorboard/ folder; the step from the adapter.
  auto target = evalcli::resolve_tensorboard(dir / "run", -1, adapter);
  BOOST_REQUIRE_MESSAGE(target, test::why(target));
  BOOST_CHECK_EQUAL(target->log_dir, dir / "run/tensorboard");
  BOOST_CHECK_EQUAL(target->step, 40);
  // Any other folder is the log folder; --step wins over the adapter.
  auto plain = evalcli::resolve_tensorboard(dir / "tb", 7, adapter);
  BOOST_REQUIRE_MESSAGE(plain, test::why(plain));
  BOOST_CHECK_EQUAL(plain->log_dir, dir / "tb");
  BOOST_CHECK_EQUAL(plain->step, 7);
  auto no_step = evalcli::resolve_tensorboard(dir / "tb", -1, "");
  BOOST_REQUIRE(!no_step);
  BOOST_CHECK(contains(describe(no_step.error()), "--step N"));
}

BOOST_AUTO_TEST_SUITE_END()
