// kbrl-eval on a cluster (--manifest): real kbrl-node evaluator processes on loopback, the real
// evaluator (Python workers with torch on the CPU, --backend torch), the quickstart problems and
// a generations folder made of config/quickstart/solutions.jsonl.
//
//   - the evaluator pool's rules (who gets which request, loss, busy, nothing left) directly;
//   - the record's node, evaluator and retries written to results.json and read back, and a
//     record of an earlier version (without them) still read;
//   - two evaluator nodes: the same aggregate metrics as kbrl-eval without a manifest, both
//     nodes evaluated some samples, and a third manifest node where nothing listens is warned
//     about (named with its address) while the run goes on, and nodes that judge with other
//     settings (eval.reference_mode) than the run are not used;
//   - a node killed mid-run: every sample is still evaluated, the ones it held were sent again
//     (the record says so);
//   - every node lost: a clear error, the finished problems kept, and the same command
//     continues once a node is back;
//   - no evaluator node reachable at all: a clear error naming each node and address;
//   - a builder node (kbrl-node --role builder) builds for an evaluator node: each source once,
//     the verdicts those of kbrl-eval's own process, and the evaluator loads what it was sent.

#include "cluster_fixture.hpp"
#include "runtime/evalcli/evaluator_pool.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/report/results_json.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <filesystem>
#include <map>
#include <regex>

using namespace kbrl;
using evalcli::evaluator_pool;

namespace {

namespace fs = std::filesystem;

const std::string source_root = KBRL_SOURCE_DIR;
const std::string quickstart_problems = source_root + "/config/quickstart/problems";

/// config/quickstart/solutions.jsonl as a generations folder: level1/<problem>/sample_<k>.txt,
/// the completions in file order. `slow` adds a sleep to every forward() (each candidate then
/// takes a good fraction of a second, so a node killed mid-run is holding one).
size_t write_generations(const std::string& root, const std::vector<std::string>& problems,
                         bool slow = false) {
  simdjson::dom::parser parser;
  simdjson::dom::document_stream lines;
  BOOST_REQUIRE(!parser.load_many(source_root + "/config/quickstart/solutions.jsonl").get(lines));
  std::map<std::string, int> samples;
  size_t written = 0;
  for (auto line : lines) {
    std::string_view problem, completion;
    BOOST_REQUIRE(!line["problem"].get(problem) && !line["completion"].get(completion));
    auto name = std::string(problem.substr(problem.find('/') + 1));
    if (std::find(problems.begin(), problems.end(), name) == problems.end())
      continue;
    std::string text(completion);
    if (slow) {
      // Before the first forward's body: sleeps, then does what the completion does.
      auto at = text.find("    def forward(");
      if (at != std::string::npos) {
        auto body = text.find('\n', at) + 1;
        text.insert(body, "        import time\n        time.sleep(0.1)\n");
      }
    }
    auto dir = fs::path(root) / "level1" / name;
    fs::create_directories(dir);
    test::write_file(dir / ("sample_" + std::to_string(samples[name]++) + ".txt"), text);
    ++written;
  }
  return written;
}

/// The shared part of every kbrl-eval command line here.
std::vector<std::string> eval_args(const std::string& generations, const std::string& output,
                                   std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{test::build_dir() + "/kbrl-eval", "--generations", generations,
                                "--kernelbench", quickstart_problems, "--backend", "torch",
                                "--no-timing", "--trials", "2", "--timeout", "120",
                                "--output", output};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

/// The "aggregate" object of a results.json, minified (compared as text).
std::string aggregate_of(const std::string& results_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  BOOST_REQUIRE_MESSAGE(!parser.load(results_json).get(doc), "cannot read " << results_json);
  simdjson::dom::element agg;
  BOOST_REQUIRE_MESSAGE(!doc["aggregate"].get(agg), results_json << " has no aggregate");
  return simdjson::minify(agg);
}

std::vector<report::sample_record> samples_of(const std::string& results_json) {
  auto s = report::read_results_samples(results_json);
  BOOST_REQUIRE_MESSAGE(s, test::why(s));
  return *s;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// Evaluator nodes (kbrl-node --role evaluator, CPU) of one manifest, and the manifest.
struct evaluator_cluster {
  test::temp_dir dir;
  std::string manifest;
  std::map<std::string, uint16_t> ports;
  std::map<std::string, test::child_process> nodes;
  std::map<std::string, int> starts; ///< each start logs to its own file
  std::map<std::string, std::string> roles;                    ///< default "evaluator"
  std::map<std::string, std::vector<std::string>> overrides;    ///< key=value per node

  /// `live` nodes are started; `dead` ones are only listed (nothing listens on their port).
  /// `node_roles` names the nodes that are not evaluators (e.g. {"bld", "builder"}).
  evaluator_cluster(const std::vector<std::string>& live, const std::vector<std::string>& dead = {},
                    std::map<std::string, std::string> node_roles = {},
                    std::map<std::string, std::vector<std::string>> node_overrides = {})
      : roles(std::move(node_roles)), overrides(std::move(node_overrides)) {
    auto all = live;
    all.insert(all.end(), dead.begin(), dead.end());
    std::string text = "[cluster]\nname = \"evaltest\"\ncoordinator = \"" + all.front()
                       + "\"\nheartbeat_interval_s = 0.2\nnode_timeout_s = 3.0\n\n";
    for (auto& name : all) {
      ports[name] = test::free_port();
      text += "[[node]]\nname = \"" + name + "\"\nhost = \"127.0.0.1\"\nport = "
              + std::to_string(ports[name]) + "\nroles = [\"" + role_of(name) + "\"]\n\n";
    }
    manifest = dir / "cluster.toml";
    test::write_file(manifest, text);
    for (auto& name : live)
      start(name);
    for (auto& name : live)
      wait_listening(name);
  }

  std::string role_of(const std::string& name) const {
    auto it = roles.find(name);
    return it == roles.end() ? "evaluator" : it->second;
  }

  void start(const std::string& name) {
    std::vector<std::string> argv{test::build_dir() + "/kbrl-node", "--role", role_of(name),
                                  "--manifest", manifest, "--node", name,
                                  "run.dir=" + (dir / "runs"), "node.status_interval_s=60"};
    for (auto& o : overrides[name])
      argv.push_back(o);
    nodes[name] = test::child_process(argv, dir / (name + "." + std::to_string(starts[name]++)
                                                   + ".out"));
  }

  void wait_listening(const std::string& name) {
    auto& node = nodes.at(name);
    BOOST_REQUIRE_MESSAGE(test::eventually([&] { return node.output().find("listening on")
                                                          != std::string::npos
                                                        || !node.running(); },
                                           std::chrono::seconds(30))
                            && node.running(),
                          "node " << name << " did not start:\n" << node.output());
  }

  std::string address(const std::string& name) const {
    return "127.0.0.1:" + std::to_string(ports.at(name));
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(eval_cluster)

BOOST_AUTO_TEST_CASE(the_pool_fills_every_evaluator_and_then_waits) {
  evaluator_pool pool({{"ev1", "a:1", 1}, {"ev2", "a:2", 2}});
  std::vector<evaluator_pool::ticket> t;
  for (int i = 0; i < 5; ++i)
    t.push_back(pool.add());
  // ev2 has the most free evaluators; then the two are even and ev1 was sent fewer.
  auto a = pool.next(), b = pool.next(), c = pool.next();
  BOOST_REQUIRE(a && b && c);
  BOOST_CHECK_EQUAL(a->request, t[0]);
  BOOST_CHECK_EQUAL(a->node, 1u);
  BOOST_CHECK_EQUAL(b->node, 0u);
  BOOST_CHECK_EQUAL(c->node, 1u);
  BOOST_CHECK(!pool.next()); // three evaluators, three in flight
  BOOST_CHECK_EQUAL(pool.waiting(), 2u);
  auto retries = pool.answered(b->request, 0);
  BOOST_REQUIRE(retries);
  BOOST_CHECK_EQUAL(*retries, 0);
  auto d = pool.next();
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(d->request, t[3]); // first in, first out
  BOOST_CHECK_EQUAL(d->node, 0u);
  BOOST_CHECK(!pool.answered(b->request, 0)); // answered once only
}

BOOST_AUTO_TEST_CASE(a_lost_node_hands_its_requests_to_the_others_with_a_retry) {
  evaluator_pool pool({{"ev1", "a:1", 1}, {"ev2", "a:2", 1}});
  auto t1 = pool.add(), t2 = pool.add(), t3 = pool.add();
  auto a = pool.next(), b = pool.next();
  BOOST_REQUIRE(a && b && !pool.next());
  auto on_ev2 = a->node == 1 ? a->request : b->request;
  auto moved = pool.lose(1);
  BOOST_REQUIRE_EQUAL(moved.size(), 1u);
  BOOST_CHECK_EQUAL(moved.front(), on_ev2);
  BOOST_CHECK(pool.lose(1).empty()); // lost once
  BOOST_CHECK_EQUAL(pool.live_nodes(), 1u);
  BOOST_CHECK_EQUAL(pool.live_slots(), 1u);
  BOOST_CHECK(!pool.answered(on_ev2, 1)); // a late answer from the lost node is stale
  auto on_ev1 = on_ev2 == t1 ? t2 : t1;
  BOOST_REQUIRE(pool.answered(on_ev1, 0));
  auto again = pool.next();
  BOOST_REQUIRE(again);
  BOOST_CHECK_EQUAL(again->request, on_ev2); // ahead of t3, which never left
  BOOST_CHECK_EQUAL(again->node, 0u);
  auto retries = pool.answered(on_ev2, 0);
  BOOST_REQUIRE(retries);
  BOOST_CHECK_EQUAL(*retries, 1);
  auto last = pool.next();
  BOOST_REQUIRE(last);
  BOOST_CHECK_EQUAL(last->request, t3);
  BOOST_CHECK_EQUAL(*pool.answered(t3, 0), 0);
}

BOOST_AUTO_TEST_CASE(a_busy_node_is_held_and_a_pool_without_nodes_drains) {
  evaluator_pool pool({{"ev1", "a:1", 2}});
  auto t1 = pool.add();
  auto a = pool.next();
  BOOST_REQUIRE(a);
  pool.put_back(t1, 0);
  BOOST_CHECK(pool.held(0));
  BOOST_CHECK(!pool.next()); // held, though it has free evaluators
  pool.release_held();
  auto b = pool.next();
  BOOST_REQUIRE(b);
  BOOST_CHECK_EQUAL(b->request, t1);
  BOOST_CHECK_EQUAL(pool.retries(t1), 0); // busy is not a retry
  pool.add();
  BOOST_CHECK(pool.drain().empty()); // a live node can still take it
  pool.lose(0);
  BOOST_CHECK_EQUAL(pool.drain().size(), 2u);
  BOOST_CHECK_EQUAL(pool.waiting(), 0u);
  BOOST_CHECK(!pool.next());
}

BOOST_AUTO_TEST_CASE(the_record_says_where_it_was_evaluated) {
  report::sample_record r;
  r.problem = "level1/1_ReLU";
  r.node = "ev2";
  r.evaluator = "ev2/evaluator.0";
  r.retries = 1;
  json_writer w;
  report::write_record(w, r);
  auto back = report::parse_record(w.str(), "test");
  BOOST_REQUIRE_MESSAGE(back, test::why(back));
  BOOST_CHECK_EQUAL(back->node, "ev2");
  BOOST_CHECK_EQUAL(back->evaluator, "ev2/evaluator.0");
  BOOST_CHECK_EQUAL(back->retries, 1);
  // A record of an output folder written before these fields existed is still read.
  auto old = std::regex_replace(w.str(), std::regex(R"(,"node":.*\})"), "}");
  BOOST_REQUIRE(old.find("\"node\"") == std::string::npos);
  auto old_back = report::parse_record(old, "old");
  BOOST_REQUIRE_MESSAGE(old_back, test::why(old_back));
  BOOST_CHECK_EQUAL(old_back->node, "");
  BOOST_CHECK_EQUAL(old_back->retries, 0);
  // Present but of the wrong type is an error naming the field.
  auto bad = std::regex_replace(w.str(), std::regex(R"("retries":1)"), R"("retries":"x")");
  auto refused = report::parse_record(bad, "bad.json");
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_NE(test::why(refused).find("\"retries\""), std::string::npos);
}

BOOST_AUTO_TEST_CASE(two_nodes_give_the_local_metrics_and_both_evaluate) {
  evaluator_cluster cluster({"ev1", "ev2"}, {"ev3"});
  test::temp_dir dir;
  auto n = write_generations(dir / "gens", {"1_ReLU", "2_LeakyReLU", "3_Sigmoid"});
  BOOST_REQUIRE_EQUAL(n, 15u);

  auto local = test::run_command(eval_args(dir / "gens", dir / "local"), 120);
  BOOST_REQUIRE_MESSAGE(local.code == 0, local.output);
  auto remote =
    test::run_command(eval_args(dir / "gens", dir / "cluster", {"--manifest", cluster.manifest}),
                      120);
  BOOST_REQUIRE_MESSAGE(remote.code == 0, remote.output);
  BOOST_TEST_MESSAGE(remote.output);

  // (d) a manifest node where nothing listens: named with its address, and the run goes on.
  BOOST_CHECK_MESSAGE(remote.output.find("warning: node ev3 at " + cluster.address("ev3")
                                         + ": cannot connect")
                        != std::string::npos,
                      remote.output);
  // (a) the same metrics.
  BOOST_CHECK_EQUAL(aggregate_of(dir / "cluster/results.json"),
                    aggregate_of(dir / "local/results.json"));
  // (b) both nodes evaluated some, each record names its node and evaluator.
  std::map<std::string, size_t> per_node;
  auto records = samples_of(dir / "cluster/results.json");
  BOOST_CHECK_EQUAL(records.size(), n);
  for (auto& r : records) {
    if (r.error == "format")
      continue; // no program to evaluate: no evaluator saw it
    ++per_node[r.node];
    BOOST_CHECK_EQUAL(r.evaluator, r.node + "/evaluator.0");
    BOOST_CHECK_EQUAL(r.retries, 0);
  }
  BOOST_CHECK_GT(per_node["ev1"], 0u);
  BOOST_CHECK_GT(per_node["ev2"], 0u);
  BOOST_CHECK_EQUAL(per_node.size(), 2u);
  for (auto& r : samples_of(dir / "local/results.json"))
    if (r.error != "format")
      BOOST_CHECK_EQUAL(r.node, "kbrl-eval"); // the local run says so too
  BOOST_CHECK(test::read_file(dir / "cluster/results.json").find("cluster evaltest: ev1")
              != std::string::npos);

  // Nodes judging with other settings than the run's are not used (here: none is left).
  auto other = test::run_command(
    eval_args(dir / "gens", dir / "compiled", {"--manifest", cluster.manifest, "--reference",
                                               "compile"}),
    60);
  BOOST_CHECK_EQUAL(other.code, 1);
  BOOST_CHECK_MESSAGE(other.output.find("node ev1 at " + cluster.address("ev1")
                                        + ": it judges with other settings than this run "
                                          "(eval.reference_mode = \"eager\" there, "
                                          "\"compile\" here)")
                        != std::string::npos,
                      other.output);
}

BOOST_AUTO_TEST_CASE(a_builder_node_builds_each_source_once_for_the_evaluators) {
  // ev1 evaluates and builds nothing itself; bld (kbrl-node --role builder) builds for it.
  test::temp_dir caches;
  evaluator_cluster cluster(
    {"ev1", "bld"}, {}, {{"bld", "builder"}},
    {{"ev1", {"eval.cache_dir=" + (caches / "ev1")}},
     {"bld", {"eval.cache_dir=" + (caches / "bld"), "eval.build_workers=2"}}});
  auto& ev1 = cluster.nodes.at("ev1");
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ev1.output().find("builds go to bld/builds")
                                                        != std::string::npos; },
                                         std::chrono::seconds(30)),
                        ev1.output() << cluster.nodes.at("bld").output());
  // Two copies of a C++ extension, two of one that does not compile, a plain program.
  test::temp_dir dir;
  auto good = test::read_file(test::source_dir() + "/test/data/candidates_runtime/relu_load_inline_cpu.py");
  auto bad = test::read_file(test::source_dir() + "/test/data/candidates_runtime/relu_load_inline_bad.py");
  auto plain = std::string("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                           "    def forward(self, x):\n        return torch.relu(x)\n");
  std::vector<std::string> samples{good, good, bad, bad, plain};
  fs::create_directories(dir / "gens/level1/1_ReLU");
  for (size_t i = 0; i < samples.size(); ++i)
    test::write_file(dir / ("gens/level1/1_ReLU/sample_" + std::to_string(i) + ".py"), samples[i]);
  auto args = [&](const std::string& out, std::vector<std::string> extra) {
    auto argv = eval_args(dir / "gens", dir / out, std::move(extra));
    *std::find(argv.begin(), argv.end(), "120") = "600"; // builds on a 2-core machine
    return argv;
  };
  auto remote = test::run_command(args("cluster", {"--manifest", cluster.manifest}), 900);
  BOOST_REQUIRE_MESSAGE(remote.code == 0, remote.output);
  auto local = test::run_command(args("local", {}), 900);
  BOOST_REQUIRE_MESSAGE(local.code == 0, local.output);

  // Verdicts unchanged: sample by sample as in kbrl-eval's own process.
  auto there = samples_of(dir / "cluster/results.json");
  auto here = samples_of(dir / "local/results.json");
  BOOST_REQUIRE_EQUAL(there.size(), samples.size());
  BOOST_REQUIRE_EQUAL(here.size(), samples.size());
  std::sort(there.begin(), there.end(), [](auto& a, auto& b) { return a.sample < b.sample; });
  std::sort(here.begin(), here.end(), [](auto& a, auto& b) { return a.sample < b.sample; });
  for (size_t i = 0; i < samples.size(); ++i) {
    BOOST_TEST_CONTEXT("sample " << i) {
      BOOST_CHECK_EQUAL(there[i].correct, here[i].correct);
      BOOST_CHECK_EQUAL(there[i].compiled, here[i].compiled);
      BOOST_CHECK_MESSAGE(there[i].error == here[i].error,
                          there[i].error << ": " << there[i].error_excerpt << " / " << here[i].error);
      BOOST_CHECK_EQUAL(there[i].node, "ev1");
    }
  }
  BOOST_CHECK(there[0].correct && there[1].correct && there[4].correct);
  BOOST_CHECK_EQUAL(there[2].error, "compile");

  // Each source built once, on the builder node: three sources, three builds.
  auto bld_log = cluster.nodes.at("bld").output();
  BOOST_CHECK_MESSAGE(count_of(bld_log, "bld/builds: built ") == 3, bld_log);
  // ev1 loaded the builder's library: its build folder has the library and its record, and no
  // ninja file or object (it built nothing).
  auto folder = fs::path(caches / "ev1") / "extensions" / there[0].candidate_hash;
  std::vector<std::string> names;
  for (auto& e : fs::recursive_directory_iterator(folder))
    names.push_back(e.path().filename().string());
  auto has = [&](const std::string& n) { return std::count(names.begin(), names.end(), n) > 0; };
  BOOST_CHECK_MESSAGE(has("kbrl-library.json") && has("kbrl_test_relu_cpu.so"),
                      "ev1's build folder " << folder.string() << " lacks the builder's files");
  BOOST_CHECK(!has("build.ninja"));
  BOOST_CHECK(!has("main.o"));
}

BOOST_AUTO_TEST_CASE(a_node_killed_mid_run_loses_no_sample) {
  evaluator_cluster cluster({"ev1", "ev2"});
  test::temp_dir dir;
  auto n = write_generations(dir / "gens", {"1_ReLU", "3_Sigmoid", "4_Tanh", "5_Swish"},
                             /*slow=*/true);
  auto log = dir / "eval.out";
  test::child_process eval(eval_args(dir / "gens", dir / "out", {"--manifest", cluster.manifest}),
                           log);
  // Once ev2 has answered twice, it is killed while holding its next candidate.
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return count_of(test::read_file(log), " [ev2") >= 2
                                                        || !eval.running(); },
                                         std::chrono::seconds(60)),
                        test::read_file(log));
  BOOST_REQUIRE_MESSAGE(eval.running(), "finished before the node was killed:\n"
                                          << test::read_file(log));
  cluster.nodes.at("ev2").signal(SIGKILL);
  BOOST_REQUIRE_EQUAL(eval.wait_exit(std::chrono::seconds(90)), 0);
  auto out = test::read_file(log);
  BOOST_TEST_MESSAGE(out);
  BOOST_CHECK_MESSAGE(out.find("lost evaluator node ev2 at " + cluster.address("ev2"))
                        != std::string::npos,
                      out);
  auto records = samples_of(dir / "out/results.json");
  BOOST_CHECK_EQUAL(records.size(), n);
  size_t retried = 0;
  for (auto& r : records) {
    BOOST_CHECK_MESSAGE(r.error != "infrastructure", r.problem << " " << r.sample << ": "
                                                               << r.error_excerpt);
    if (r.retries > 0) {
      ++retried;
      BOOST_CHECK_EQUAL(r.node, "ev1");
    }
  }
  BOOST_CHECK_GE(retried, 1u);
}

BOOST_AUTO_TEST_CASE(every_node_lost_stops_with_the_finished_problems_kept) {
  evaluator_cluster cluster({"ev1"});
  test::temp_dir dir;
  auto n = write_generations(dir / "gens", {"1_ReLU", "3_Sigmoid", "4_Tanh"}, /*slow=*/true);
  auto log = dir / "eval.out";
  auto args = eval_args(dir / "gens", dir / "out", {"--manifest", cluster.manifest});
  test::child_process eval(args, log);
  // Once a problem is finished ("  level1/1_ReLU finished"), the node goes.
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return test::read_file(log).find(" finished\n")
                                                        != std::string::npos
                                                        || !eval.running(); },
                                         std::chrono::seconds(60)),
                        test::read_file(log));
  BOOST_REQUIRE(eval.running());
  cluster.nodes.at("ev1").signal(SIGKILL);
  BOOST_CHECK_EQUAL(eval.wait_exit(std::chrono::seconds(30)), 1);
  auto out = test::read_file(log);
  BOOST_CHECK_MESSAGE(out.find("every evaluator node is lost") != std::string::npos
                        && out.find("ev1 at " + cluster.address("ev1")) != std::string::npos
                        && out.find("run the same command again to continue")
                             != std::string::npos,
                      out);
  BOOST_CHECK(!fs::exists(dir / "out/results.json"));
  size_t kept = 0;
  for (auto& e : fs::recursive_directory_iterator(dir / "out/problems"))
    kept += e.is_regular_file() ? 1 : 0;
  BOOST_CHECK_GE(kept, 1u);

  // The node is back: the same command evaluates what is left.
  cluster.start("ev1");
  cluster.wait_listening("ev1");
  auto again = test::run_command(args, 90);
  BOOST_REQUIRE_MESSAGE(again.code == 0, again.output);
  BOOST_CHECK_MESSAGE(again.output.find("(" + std::to_string(kept) + " finished before)")
                        != std::string::npos,
                      again.output);
  BOOST_CHECK_EQUAL(samples_of(dir / "out/results.json").size(), n);
}

BOOST_AUTO_TEST_CASE(no_reachable_evaluator_node_is_a_clear_error) {
  evaluator_cluster cluster({}, {"ev1", "ev2"});
  test::temp_dir dir;
  write_generations(dir / "gens", {"1_ReLU"});
  auto r = test::run_command(eval_args(dir / "gens", dir / "out", {"--manifest", cluster.manifest}),
                             30);
  BOOST_CHECK_EQUAL(r.code, 1);
  for (auto node : {"ev1", "ev2"})
    BOOST_CHECK_MESSAGE(r.output.find(std::string("node ") + node + " at "
                                      + cluster.address(node) + ": cannot connect")
                          != std::string::npos,
                        r.output);
  BOOST_CHECK_MESSAGE(r.output.find("no evaluator node of cluster evaltest") != std::string::npos,
                      r.output);
  // --gpu and a manifest contradict each other.
  auto both = test::run_command(
    eval_args(dir / "gens", dir / "out2", {"--manifest", cluster.manifest, "--gpu", "0"}), 30);
  BOOST_CHECK_NE(both.code, 0);
}

BOOST_AUTO_TEST_SUITE_END()
