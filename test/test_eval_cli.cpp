// kbrl-eval as a user runs it: real processes, the real evaluator (Python workers with torch on
// the CPU, --backend torch) on the small test problems.
//
//   - a generations folder (test/data/evalcli, its README lists the expected verdicts) scored
//     end to end: results.json, per-problem files, report.html in a headless browser,
//     TensorBoard scalars at a step;
//   - multi-turn generations (sample_<S>/turn_<T>) scored per turn and best of turns;
//   - a re-run with the same output folder continues: finished problems are not evaluated again,
//     a deleted problem file is; other settings are refused; Ctrl-C leaves a folder that the
//     next run completes;
//   - --model with a tiny random checkpoint: (garbage) completions drawn by the built-in sampler,
//     parsed (format failures counted), written as a generations folder that --generations
//     scores to the same verdicts; with --adapter (a training checkpoint) the adapter is what
//     generates, and --tensorboard --step logs the metrics at the checkpoint's step;
//   - --model with a remote OpenAI-compatible server (the fake one of the remote sampler tests)
//     whose answer holds a correct kernel: generated, extracted, evaluated;
//   - where a GPU is present, a CUDA load_inline kernel scored with --backend cuda --gpu 0.

#include "cluster_fixture.hpp"
#include "helper_process.hpp"
#include "tokenizer_fixture.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/device/devices.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/report/results_json.hpp"
#include "test_support.hpp"
#include "tfevents_reader.hpp"

#include <boost/test/unit_test.hpp>
#include <curl/curl.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

using namespace kbrl;
using kbrl::test::contains;

namespace {

namespace fs = std::filesystem;

const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-eval";
const std::string problems = std::string(KBRL_TEST_DATA) + "/problems";
const std::string fixture_generations = std::string(KBRL_TEST_DATA) + "/evalcli/generations";

/// The command line shared by every run: the test problems as level 1, judged on the CPU. The
/// evaluation caches live in the build folder (eval.cache_dir): only the first run after a fresh
/// build compiles the fixture's C++ extension, later runs load what it built.
std::vector<std::string> eval_args(std::vector<std::string> extra) {
  std::vector<std::string> argv{tool,          "--kernelbench", problems, "--backend", "torch",
                                "--trials",    "2",             "--perf-trials",     "3",
                                "--timeout",   "300",           "--config",
                                "eval.cache_dir=" + std::string(KBRL_BUILD_DIR) + "/test-cache/evalcli"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<report::sample_record> samples_of(const std::string& results_json) {
  auto s = report::read_results_samples(results_json);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  return *s;
}

/// (problem, sample) -> record.
std::map<std::pair<std::string, int>, report::sample_record>
by_sample(const std::vector<report::sample_record>& records) {
  std::map<std::pair<std::string, int>, report::sample_record> out;
  for (auto& r : records)
    out[{r.problem, r.sample}] = r;
  return out;
}

double aggregate(const std::string& results_json, const std::vector<std::string>& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  BOOST_REQUIRE(!parser.load(results_json).get(e));
  e = e["aggregate"];
  for (auto& key : path)
    BOOST_REQUIRE_MESSAGE(!e[key].get(e), "no " << key << " in " << results_json);
  double v = -1;
  BOOST_REQUIRE(!e.get(v));
  return v;
}

/// A tiny random Qwen2 with the byte tokenizer, as a model directory.
std::string tiny_model(const test::temp_dir& dir) {
  auto path = dir / "tiny-qwen2";
  auto config = model::tiny_model_config("qwen2");
  BOOST_REQUIRE(model::write_random_checkpoint(path, config, 11));
  dir.write("tiny-qwen2/tokenizer.json", test::byte_tokenizer_json());
  return path;
}

/// test/data/remote/fake_openai_server.py as a process: its ports, and its fault queue through
/// the control port. It exits when its stdin (a pipe held here) closes.
class openai_server {
public:
  openai_server()
    : process_({"/usr/bin/python3", std::string(KBRL_TEST_DATA) + "/remote/fake_openai_server.py",
                "--model", "fake-coder"}) {
    const auto& line = process_.first_line();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    BOOST_REQUIRE_MESSAGE(!parser.parse(line).get(doc), "the fake server said: " << line);
    int64_t port = 0, control = 0;
    BOOST_REQUIRE(!doc["port"].get(port) && !doc["control_port"].get(control));
    port_ = static_cast<int>(port);
    control_port_ = static_cast<int>(control);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// The next chat completion request is answered with `content` as the assistant's message.
  void answer_next_chat_with(const std::string& content) {
    json_writer reply;
    reply.begin_object().field("id", "chatcmpl-1").field("object", "chat.completion")
      .field("model", "fake-coder").key("choices").begin_array().begin_object()
      .field("index", int64_t{0}).key("message").begin_object().field("role", "assistant")
      .field("content", content).end_object();
    // The remote sampler needs the sampled tokens' log-probabilities (the learner does).
    reply.key("logprobs").begin_object().key("content").begin_array();
    for (int t = 0; t < 3; ++t)
      reply.begin_object().field("token", "token_id:" + std::to_string(10 + t))
        .field("logprob", -0.5).end_object();
    reply.end_array().end_object();
    reply.field("finish_reason", "stop").end_object().end_array().end_object();
    json_writer fault;
    fault.begin_object().key("faults").begin_array().begin_object().field("kind", "body")
      .field("path", "/v1/chat/completions").field("body", reply.str()).end_object()
      .end_array().end_object();
    CURL* curl = curl_easy_init();
    auto control_url = "http://127.0.0.1:" + std::to_string(control_port_) + "/faults";
    auto body = fault.str();
    curl_easy_setopt(curl, CURLOPT_URL, control_url.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                     +[](char*, size_t size, size_t count, void*) { return size * count; });
    auto rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    BOOST_REQUIRE_MESSAGE(rc == CURLE_OK, curl_easy_strerror(rc));
  }

private:
  test::helper_process process_;
  int port_ = 0, control_port_ = 0;
};

} // namespace

BOOST_AUTO_TEST_SUITE(eval_cli)

BOOST_AUTO_TEST_CASE(a_generations_folder_is_scored_and_a_rerun_continues) {
  test::temp_dir dir;
  auto out = dir / "out";
  auto tb = dir / "tb";
  // The first run after a fresh build compiles the fixture's C++ extension and its precompiled
  // header: on the CI machine that took minutes.
  auto r = test::run_command(eval_args({"--generations", fixture_generations, "--output", out,
                                        "--tensorboard", tb, "--step", "1200"}),
                             480);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_MESSAGE(contains(r.output, "3 problems (0 finished before), 5 candidates"), r.output);
  auto results = out + "/results.json";
  auto records = samples_of(results);
  BOOST_REQUIRE_EQUAL(records.size(), 6u);
  auto s = by_sample(records);
  auto& relu0 = s.at({"level1/1_small_relu", 0});
  auto& relu1 = s.at({"level1/1_small_relu", 1});
  auto& mm0 = s.at({"level1/2_small_matmul", 0});
  auto& mm1 = s.at({"level1/2_small_matmul", 1});
  auto& sm0 = s.at({"level1/4_small_softmax", 0});
  auto& sm1 = s.at({"level1/4_small_softmax", 1});
  BOOST_CHECK_MESSAGE(relu0.correct && relu0.extraction == "file", relu0.error_excerpt);
  BOOST_CHECK_MESSAGE(relu1.correct && relu1.extraction == "python_block",
                      relu1.error << ": " << relu1.error_excerpt); // the load_inline extension
  BOOST_CHECK(relu0.speedup > 0 && relu0.kernel_ms > 0 && relu0.reference_ms > 0);
  BOOST_CHECK_EQUAL(mm0.error, "mismatch");
  BOOST_CHECK(!mm0.correct && mm0.compiled);
  BOOST_CHECK_EQUAL(mm1.error, "missing");
  BOOST_CHECK_MESSAGE(sm0.correct && sm0.extraction == "kernel_tag", sm0.error_excerpt);
  BOOST_CHECK_EQUAL(sm1.error, "format");
  BOOST_CHECK(contains(sm1.error_excerpt, "no ```python code block"));
  BOOST_CHECK_EQUAL(relu1.source, "level1/1_small_relu/sample_1.txt");
  // The aggregate (the fixture's README computes it by hand), counted as KernelBench does: the
  // missing sample is not a sample.
  BOOST_CHECK_CLOSE(aggregate(results, {"overall", "correct_rate"}), 0.6, 1e-9);
  BOOST_CHECK_CLOSE(aggregate(results, {"overall", "pass_at_k", "1"}), 0.5, 1e-9);
  BOOST_CHECK_CLOSE(aggregate(results, {"overall", "pass_at_k", "2"}), 2.0 / 3, 1e-9);
  BOOST_CHECK_CLOSE(aggregate(results, {"overall", "fast_p", "0.0"}), 2.0 / 3, 1e-9);
  BOOST_CHECK_EQUAL(aggregate(results, {"overall", "errors", "format"}), 1.0);
  BOOST_CHECK_EQUAL(aggregate(results, {"overall", "errors", "missing"}), 1.0);
  // Per-problem files and the report.
  BOOST_CHECK(fs::exists(out + "/problems/level1/1_small_relu.json"));
  BOOST_CHECK(fs::exists(out + "/problems/level1/4_small_softmax.json"));
  auto html = test::read_file(out + "/report.html");
  BOOST_CHECK(contains(html, "<table id=\"summary\""));
  BOOST_CHECK(contains(html, "level1/4_small_softmax"));
  // TensorBoard: the metrics at step 1200, CRCs checked by the test's own reader.
  std::vector<std::string> event_files;
  for (auto& e : fs::directory_iterator(tb))
    event_files.push_back(e.path().string());
  BOOST_REQUIRE_EQUAL(event_files.size(), 1u);
  std::vector<test::tf_event> events;
  BOOST_REQUIRE_NO_THROW(events = test::read_event_file(event_files[0]));
  BOOST_REQUIRE_EQUAL(events.size(), 2u);
  BOOST_CHECK_EQUAL(events[1].step, 1200);
  std::map<std::string, float> scalars(events[1].scalars.begin(), events[1].scalars.end());
  BOOST_CHECK_EQUAL(scalars.at("eval/correct_rate"), 0.6f); // 3 of the 5 samples it has
  BOOST_CHECK_EQUAL(scalars.at("eval/pass@2"), static_cast<float>(2.0 / 3));
  BOOST_CHECK(scalars.count("eval/level1/fast_1.0") == 1);

  // The same command again: everything is finished, nothing is evaluated.
  auto again = test::run_command(eval_args({"--generations", fixture_generations, "--output", out}),
                                 120);
  BOOST_REQUIRE_MESSAGE(again.code == 0, again.output);
  BOOST_CHECK_MESSAGE(contains(again.output, "3 problems (3 finished before), 0 candidates"),
                      again.output);
  auto records_again = samples_of(results);
  BOOST_REQUIRE_EQUAL(records_again.size(), 6u);
  for (size_t i = 0; i < records.size(); ++i) {
    BOOST_CHECK_EQUAL(records_again[i].error, records[i].error);
    BOOST_CHECK_EQUAL(records_again[i].speedup, records[i].speedup); // read back, not re-timed
  }

  // A problem whose file is gone (as if interrupted before it finished) is evaluated again.
  fs::remove(out + "/problems/level1/4_small_softmax.json");
  auto partial = test::run_command(
    eval_args({"--generations", fixture_generations, "--output", out}), 120);
  BOOST_REQUIRE_MESSAGE(partial.code == 0, partial.output);
  BOOST_CHECK_MESSAGE(contains(partial.output, "3 problems (2 finished before), 2 candidates"),
                      partial.output);
  BOOST_CHECK(!contains(partial.output, "1_small_relu sample"));
  BOOST_CHECK(by_sample(samples_of(results)).at({"level1/4_small_softmax", 0}).correct);

  // Other settings in the same folder are refused, naming the difference.
  auto other = test::run_command(
    eval_args({"--generations", fixture_generations, "--output", out, "--samples", "3"}), 60);
  BOOST_CHECK_EQUAL(other.code, 1);
  BOOST_CHECK_MESSAGE(contains(other.output, "samples: \"3\" now, \"2\""), other.output);
}

BOOST_AUTO_TEST_CASE(an_interrupted_run_is_continued) {
  test::temp_dir dir;
  // The second problem's candidate takes 60 s to construct: time to interrupt the run.
  dir.write("gens/level1/1_small_relu/sample_0.py",
            test::read_file(fixture_generations + "/level1/1_small_relu/sample_0.py"));
  dir.write("gens/level1/4_small_softmax/sample_0.py",
            "import time\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        time.sleep(60)\n\n"
            "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n");
  auto out = dir / "out";
  auto args = eval_args({"--generations", dir / "gens", "--output", out});
  test::child_process run(args, dir / "run.log");
  auto first = out + "/problems/level1/1_small_relu.json";
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return fs::exists(first); }, std::chrono::seconds(90)),
                        run.output());
  run.signal(SIGINT);
  BOOST_CHECK_EQUAL(run.wait_exit(std::chrono::seconds(10)), 130);
  BOOST_CHECK_MESSAGE(contains(run.output(), "interrupted"), run.output());
  BOOST_CHECK(!fs::exists(out + "/results.json"));
  BOOST_CHECK(!fs::exists(out + "/problems/level1/4_small_softmax.json"));
  // Continue with a quick candidate in place of the slow one.
  dir.write("gens/level1/4_small_softmax/sample_0.py",
            "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n");
  auto rest = test::run_command(args, 120);
  BOOST_REQUIRE_MESSAGE(rest.code == 0, rest.output);
  BOOST_CHECK_MESSAGE(contains(rest.output, "2 problems (1 finished before), 1 candidates"),
                      rest.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 2u);
  BOOST_CHECK(records[0].correct && records[1].correct);
}

BOOST_AUTO_TEST_CASE(multi_turn_generations_are_scored_per_turn) {
  // One sample of ReLU in two turns: a wrong first attempt, then a correct one.
  test::temp_dir dir;
  dir.write("gens/level1/1_small_relu/sample_0/turn_0.py",
            "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.abs(x)\n");
  dir.write("gens/level1/1_small_relu/sample_0/turn_1.txt",
            "Fixed:\n```python\n"
              + test::read_file(fixture_generations + "/level1/1_small_relu/sample_0.py")
              + "```\n");
  auto out = dir / "out";
  auto r = test::run_command(eval_args({"--generations", dir / "gens", "--output", out}), 120);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 2u);
  BOOST_CHECK_EQUAL(records[0].turn, 0);
  BOOST_CHECK_EQUAL(records[0].error, "mismatch");
  BOOST_CHECK_EQUAL(records[1].turn, 1);
  BOOST_CHECK(records[1].correct);
  auto results = out + "/results.json";
  BOOST_CHECK_EQUAL(aggregate(results, {"overall", "correct_rate"}), 1.0); // best of turns
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(results).get(doc));
  simdjson::dom::array turns;
  BOOST_REQUIRE(!doc["aggregate"]["turns"].get(turns));
  BOOST_REQUIRE_EQUAL(turns.size(), 2u);
  double after0 = -1, after1 = -1;
  BOOST_CHECK(!turns.at(0)["correct_rate"].get(after0));
  BOOST_CHECK(!turns.at(1)["correct_rate"].get(after1));
  BOOST_CHECK_EQUAL(after0, 0.0);
  BOOST_CHECK_EQUAL(after1, 1.0);
  BOOST_CHECK(contains(test::read_file(out + "/report.html"), "<table id=\"turns\""));
}

BOOST_AUTO_TEST_CASE(a_model_is_sampled_parsed_and_scored_like_its_generations) {
  test::temp_dir dir;
  auto model = tiny_model(dir);
  auto out = dir / "out";
  auto model_args = eval_args({"--model", model, "--levels", "1", "--problems", "1,4",
                               "--samples", "2", "--max-new-tokens", "24", "--chat-format",
                               "chatml", "--temperature", "1.0", "--output", out, "--config",
                               "sampler.dtype=fp32", "--config", "sampler.slots=4", "--config",
                               "sampler.max_seq_len=4096"});
  auto r = test::run_command(model_args, 180);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_MESSAGE(contains(r.output, "4 candidates to evaluate, 4 to generate"), r.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 4u);
  for (auto& rec : records) {
    // Random weights write no program: a format failure each, with the generation's facts.
    BOOST_CHECK_EQUAL(rec.error, "format");
    BOOST_CHECK(rec.completion_tokens > 0 && rec.completion_tokens <= 24);
    BOOST_CHECK(!rec.finish.empty());
    BOOST_CHECK(fs::exists(out + "/generations/" + rec.source));
  }
  BOOST_CHECK_EQUAL(aggregate(out + "/results.json", {"overall", "errors", "format"}), 4.0);
  BOOST_CHECK_EQUAL(aggregate(out + "/results.json", {"overall", "pass_at_k", "2"}), 0.0);

  // The completions it wrote, scored as a generations folder: the same verdicts.
  auto rescored = dir / "rescored";
  auto g = test::run_command(eval_args({"--generations", out + "/generations", "--output",
                                        rescored}),
                             120);
  BOOST_REQUIRE_MESSAGE(g.code == 0, g.output);
  auto again = by_sample(samples_of(rescored + "/results.json"));
  BOOST_REQUIRE_EQUAL(again.size(), records.size());
  for (auto& rec : records) {
    auto& other = again.at({rec.problem, rec.sample});
    BOOST_CHECK_EQUAL(other.error, rec.error);
    BOOST_CHECK_EQUAL(other.correct, rec.correct);
    BOOST_CHECK_EQUAL(other.error_excerpt, rec.error_excerpt);
    BOOST_CHECK_EQUAL(other.source, rec.source);
  }

  // Re-run of the model run: the completions on disk are reused, nothing is generated again.
  fs::remove(out + "/problems/level1/1_small_relu.json");
  auto before = test::read_file(out + "/generations/level1/1_small_relu/sample_0.txt");
  auto cont = test::run_command(model_args, 120);
  BOOST_REQUIRE_MESSAGE(cont.code == 0, cont.output);
  BOOST_CHECK_MESSAGE(contains(cont.output, "2 candidates to evaluate, 0 to generate"), cont.output);
  BOOST_CHECK_EQUAL(test::read_file(out + "/generations/level1/1_small_relu/sample_0.txt"), before);
}

BOOST_AUTO_TEST_CASE(a_checkpoints_adapter_is_what_generates_and_its_step_is_logged) {
  test::temp_dir dir;
  auto model = tiny_model(dir);
  model::lora_config lc;
  lc.r = 4;
  lc.lora_alpha = 8;
  lc.target_modules = {"q_proj", "v_proj", "down_proj"};
  auto adapter = model::random_lora_adapter(model::tiny_model_config("qwen2"), lc, 5, /*std=*/0.5);
  BOOST_REQUIRE(model::write_lora_adapter(dir / "checkpoint-300", adapter));
  // One sample: greedy by default, so the two runs differ only by the adapter.
  auto run = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"--model", model, "--levels", "1", "--problems", "1",
                                  "--max-new-tokens", "16", "--chat-format", "none",
                                  "--output", out, "--config", "sampler.dtype=fp32",
                                  "--config", "sampler.slots=2", "--config",
                                  "sampler.max_seq_len=4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_command(eval_args(args), 120);
  };
  auto base = run(dir / "base", {});
  BOOST_REQUIRE_MESSAGE(base.code == 0, base.output);
  auto tuned = run(dir / "tuned", {"--adapter", dir / "checkpoint-300", "--tensorboard",
                                   dir / "tb", "--step", "300"});
  BOOST_REQUIRE_MESSAGE(tuned.code == 0, tuned.output);
  auto completion = "/generations/level1/1_small_relu/sample_0.txt";
  auto base_text = test::read_file(dir / "base" + completion);
  auto tuned_text = test::read_file(dir / "tuned" + completion);
  BOOST_CHECK(!base_text.empty());
  BOOST_CHECK_MESSAGE(base_text != tuned_text, "the adapter changed nothing: " << base_text);
  std::vector<std::string> event_files;
  for (auto& e : fs::directory_iterator(dir / "tb"))
    event_files.push_back(e.path().string());
  BOOST_REQUIRE_EQUAL(event_files.size(), 1u);
  auto events = test::read_event_file(event_files[0]);
  BOOST_REQUIRE_EQUAL(events.size(), 2u);
  BOOST_CHECK_EQUAL(events[1].step, 300);
  // The run records which adapter it evaluated; an adapter that cannot be loaded stops the run.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(dir / "tuned/results.json").get(doc));
  std::string_view recorded;
  BOOST_REQUIRE(!doc["run"]["adapter"].get(recorded));
  BOOST_CHECK(contains(std::string(recorded), "checkpoint-300"));
  auto broken = run(dir / "broken", {"--adapter", dir / "no-such-checkpoint"});
  BOOST_CHECK_EQUAL(broken.code, 1);
  BOOST_CHECK_MESSAGE(contains(broken.output, "the adapter was not applied")
                        && contains(broken.output, "no-such-checkpoint"),
                      broken.output);
}

BOOST_AUTO_TEST_CASE(a_remote_server_writes_the_kernels) {
  // An OpenAI-compatible server (the fake one): one answer holds a correct program, the other
  // is the fake model's own text (no code).
  openai_server server;
  server.answer_next_chat_with("Here it is:\n```python\n"
                               + test::read_file(fixture_generations
                                                 + "/level1/1_small_relu/sample_0.py")
                               + "```\n");
  test::temp_dir dir;
  auto out = dir / "out";
  auto r = test::run_command(
    eval_args({"--model", "fake-coder", "--levels", "1", "--problems", "1", "--samples", "2",
               "--max-new-tokens", "8", "--output", out, "--config", "sampler.backend=remote",
               "--config", "sampler.remote_url=" + server.url(), "--config",
               "sampler.remote_api=chat"}),
    120);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  auto records = samples_of(out + "/results.json");
  BOOST_REQUIRE_EQUAL(records.size(), 2u);
  size_t correct = 0, format = 0;
  for (auto& rec : records) {
    correct += rec.correct ? 1 : 0;
    format += rec.error == "format" ? 1 : 0;
  }
  BOOST_CHECK_MESSAGE(correct == 1u, r.output << test::read_file(out + "/results.json"));
  BOOST_CHECK_EQUAL(format, 1u);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE(!parser.load(out + "/results.json").get(doc));
  std::string_view prompt;
  BOOST_REQUIRE(!doc["run"]["prompt"].get(prompt));
  BOOST_CHECK(contains(std::string(prompt), "chat endpoint"));
}

BOOST_AUTO_TEST_CASE(on_a_gpu_cuda_kernels_are_scored) {
  if (cuda_device_count() == 0) {
    BOOST_TEST_MESSAGE("no CUDA device: the CUDA generations are checked on the GPU machine");
    return;
  }
  test::temp_dir dir;
  auto out = dir / "out";
  std::vector<std::string> args{tool, "--kernelbench", problems, "--backend", "cuda", "--gpu", "0",
                                "--generations", std::string(KBRL_TEST_DATA)
                                                   + "/evalcli/generations_cuda",
                                "--output", out, "--compare-torch-compile"};
  auto r = test::run_command(args, 600);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  auto s = by_sample(samples_of(out + "/results.json"));
  auto& kernel = s.at({"level1/1_small_relu", 0});
  auto& plain = s.at({"level1/1_small_relu", 1});
  BOOST_CHECK_MESSAGE(kernel.correct && kernel.speedup > 0, kernel.error << ": "
                                                               << kernel.error_excerpt);
  BOOST_CHECK_EQUAL(plain.error, "static_check");
  auto html = test::read_file(out + "/report.html");
  BOOST_CHECK(contains(html, "vs-compile"));
}

BOOST_AUTO_TEST_CASE(wrong_inputs_fail_with_a_clear_message) {
  test::temp_dir dir;
  auto out = dir / "out";
  auto expect_failure = [&](std::vector<std::string> extra, const std::string& says) {
    auto r = test::run_command(eval_args(std::move(extra)), 60);
    BOOST_CHECK_MESSAGE(r.code != 0, "succeeded: " << r.output);
    BOOST_CHECK_MESSAGE(contains(r.output, says), "expected \"" << says << "\" in:\n" << r.output);
  };
  expect_failure({"--output", out}, "--model PATH|ID");
  expect_failure({"--generations", dir / "nowhere", "--output", out}, "not a folder");
  expect_failure({"--model", dir / "m", "--output", out}, "--model needs --levels");
  expect_failure({"--model", dir / "m", "--levels", "1", "--turns", "2", "--chat-format", "none",
                  "--output", out},
                 "needs a chat format");
  expect_failure({"--model", dir / "m", "--levels", "1,x", "--output", out}, "not a level");
  expect_failure({"--generations", fixture_generations, "--levels", "7", "--output", out},
                 "no files for level 7");
  expect_failure({"--generations", fixture_generations, "--output", out, "--config",
                  "eval.isolaton=none"},
                 "did you mean 'eval.isolation'");
  // The byte tokenizer has no chat template: auto cannot pick a format, and says what to do.
  auto model = tiny_model(dir);
  expect_failure({"--model", model, "--levels", "1", "--output", out}, "--chat-format");
  // A stray sample number far beyond the rest.
  fs::copy(fixture_generations, dir / "stray", fs::copy_options::recursive);
  for (auto& level : fs::directory_iterator(dir / "stray"))
    for (auto& prob : fs::directory_iterator(level.path())) {
      std::ofstream(prob.path() / "sample_99999.py") << "class ModelNew: pass\n";
      break;
    }
  expect_failure({"--generations", dir / "stray", "--output", out}, "sample_99999.py");
  // An empty generations folder.
  fs::create_directories(dir / "empty");
  expect_failure({"--generations", dir / "empty", "--output", out}, "no candidate files");
  // A GPU backend with no --gpu: said before anything starts (whatever the machine has).
  auto cuda = test::run_command({tool, "--kernelbench", problems, "--backend", "cuda",
                                 "--generations", fixture_generations, "--output", out},
                                60);
  BOOST_CHECK_EQUAL(cuda.code, 1);
  BOOST_CHECK_MESSAGE(contains(cuda.output, "--backend cuda needs a GPU"), cuda.output);
}

BOOST_AUTO_TEST_SUITE_END()
