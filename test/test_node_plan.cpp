// Tests of what a node runs: the actors planned for its roles and GPUs
// (runtime/node/role_plan.hpp), and the checks of a kbrl-node launch against manifest and run
// config (plan_node in runtime/node/node_plan.hpp), with the exact text of each error.

#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include "messages/errors.hpp"
#include "runtime/node/node_plan.hpp"
#include "runtime/node/role_plan.hpp"

#include <caf/atom.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kbrl;
using kbrl::test::temp_dir;
using kbrl::test::why;

namespace {


/// The text of the invalid_config error of a launch that must be refused.
std::string plan_error(const node_launch& launch) {
  auto plan = plan_node(launch);
  BOOST_REQUIRE_MESSAGE(!plan, "the launch was accepted but should not have been");
  const caf::error& err = plan.error();
  BOOST_CHECK(err.category() == caf::atom("kbrl"));
  BOOST_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::invalid_config));
  BOOST_REQUIRE(err.context().match_elements<std::string>());
  return err.context().get_as<std::string>(0);
}

/// Three nodes on loopback (no TLS): one learner, two sampler+evaluator nodes, the last without
/// GPUs.
const char* const manifest_text = R"([cluster]
name = "plan-cluster"
coordinator = "head"

[[node]]
name = "head"
host = "127.0.0.1"
port = 4242
roles = ["learner"]
gpus = [0]

[[node]]
name = "gpu1"
host = "127.0.0.1"
port = 4243
roles = ["sampler", "evaluator"]
gpus = [1, 2]

[[node]]
name = "cpu1"
host = "127.0.0.1"
port = 4244
roles = ["sampler", "evaluator"]
)";

/// A temp dir with the manifest above in it, and a launch that uses it.
struct manifest_fixture {
  temp_dir dir;
  std::string manifest = dir.write("cluster.toml", manifest_text);

  node_launch launch(std::vector<std::string> roles, std::string node = "") const {
    node_launch l;
    l.roles = std::move(roles);
    l.manifest_path = manifest;
    l.node_name = std::move(node);
    return l;
  }
};

std::string describe_plan(const std::vector<planned_actor>& plan) {
  std::string out;
  for (auto& a : plan)
    out += a.role + "(" + std::to_string(a.index) + "," + std::to_string(a.gpu) + ") ";
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(node_plan)

// -- roles to actors ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(expand_roles_expands_all_and_deduplicates) {
  using roles = std::vector<std::string>;
  BOOST_CHECK((expand_roles({"all"}) == roles{"learner", "sampler", "evaluator"}));
  BOOST_CHECK((expand_roles({"sampler", "all"}) == roles{"learner", "sampler", "evaluator"}));
  BOOST_CHECK((expand_roles({"evaluator", "sampler", "evaluator"})
               == roles{"sampler", "evaluator"})); // known_roles() order, once each
  BOOST_CHECK((expand_roles({"evaluator"}) == roles{"evaluator"}));
  BOOST_CHECK(expand_roles({}).empty());
  BOOST_CHECK(expand_roles({"bogus"}).empty()); // plan_node refuses unknown roles before this
  // A builder node is named on its own: "all" is one machine's RL loop.
  BOOST_CHECK((expand_roles({"all", "builder"})
               == roles{"learner", "sampler", "evaluator", "builder"}));
  BOOST_CHECK((expand_roles({"builder"}) == roles{"builder"}));
}

BOOST_AUTO_TEST_CASE(a_builder_node_runs_one_build_service_and_no_gpu_actor) {
  auto plan = plan_role_actors({"builder"}, {});
  BOOST_REQUIRE_MESSAGE(plan.size() == 1u, describe_plan(plan));
  BOOST_CHECK_EQUAL(plan[0].role, "builds");
  BOOST_CHECK_EQUAL(plan[0].gpu, -1);
  plan = plan_role_actors({"evaluator", "builder"}, {0});
  BOOST_REQUIRE_MESSAGE(plan.size() == 3u, describe_plan(plan));
  BOOST_CHECK_EQUAL(plan[2].role, "builds");
  BOOST_CHECK_EQUAL(plan_role_actors({"all"}, {0}).back().role, "evaluator");
}

BOOST_AUTO_TEST_CASE(learner_gets_a_metrics_sink) {
  auto plan = plan_role_actors({"learner"}, {});
  BOOST_REQUIRE_EQUAL(plan.size(), 2u);
  BOOST_CHECK_EQUAL(plan[0].role, "learner");
  BOOST_CHECK_EQUAL(plan[0].index, -1);
  BOOST_CHECK_EQUAL(plan[0].gpu, -1); // CPU without GPUs
  BOOST_CHECK_EQUAL(plan[1].role, "metrics");
  BOOST_CHECK_EQUAL(plan[1].index, -1);
  BOOST_CHECK_EQUAL(plan[1].gpu, -1);
  BOOST_CHECK(plan[0].gpus.empty());
  // With GPUs the learner takes all of them (one data-parallel replica each, the first one
  // primary); metrics never takes one.
  plan = plan_role_actors({"learner"}, {3, 5});
  BOOST_REQUIRE_EQUAL(plan.size(), 2u);
  BOOST_CHECK_EQUAL(plan[0].gpu, 3);
  BOOST_CHECK(plan[0].gpus == (std::vector<int>{3, 5}));
  BOOST_CHECK_EQUAL(plan[1].gpu, -1);
  BOOST_CHECK(plan[1].gpus.empty());
  // Per-GPU roles beside it keep their one GPU each.
  plan = plan_role_actors({"learner", "sampler"}, {3, 5});
  BOOST_REQUIRE_MESSAGE(plan.size() == 4u, describe_plan(plan));
  BOOST_CHECK(plan[2].gpus.empty());
  BOOST_CHECK_EQUAL(plan[3].gpu, 5);
}

BOOST_AUTO_TEST_CASE(per_gpu_roles_get_one_slot_per_gpu) {
  auto plan = plan_role_actors({"evaluator", "sampler"}, {2, 5});
  BOOST_REQUIRE_MESSAGE(plan.size() == 5u, describe_plan(plan));
  // Samplers before evaluators whatever the order given; the supervisor before its evaluators.
  BOOST_CHECK_EQUAL(plan[0].role, "sampler");
  BOOST_CHECK_EQUAL(plan[0].index, 0);
  BOOST_CHECK_EQUAL(plan[0].gpu, 2);
  BOOST_CHECK_EQUAL(plan[1].role, "sampler");
  BOOST_CHECK_EQUAL(plan[1].index, 1);
  BOOST_CHECK_EQUAL(plan[1].gpu, 5);
  BOOST_CHECK_EQUAL(plan[2].role, "evaluator-supervisor");
  BOOST_CHECK_EQUAL(plan[2].index, -1);
  BOOST_CHECK_EQUAL(plan[2].gpu, -1);
  BOOST_CHECK_EQUAL(plan[3].role, "evaluator");
  BOOST_CHECK_EQUAL(plan[3].index, 0); // slot index, not the device index
  BOOST_CHECK_EQUAL(plan[3].gpu, 2);
  BOOST_CHECK_EQUAL(plan[4].role, "evaluator");
  BOOST_CHECK_EQUAL(plan[4].index, 1);
  BOOST_CHECK_EQUAL(plan[4].gpu, 5);
}

BOOST_AUTO_TEST_CASE(per_gpu_roles_without_gpus_get_one_cpu_slot) {
  auto plan = plan_role_actors({"sampler", "evaluator"}, {});
  BOOST_REQUIRE_MESSAGE(plan.size() == 3u, describe_plan(plan));
  BOOST_CHECK_EQUAL(plan[0].role, "sampler");
  BOOST_CHECK_EQUAL(plan[0].index, 0);
  BOOST_CHECK_EQUAL(plan[0].gpu, -1);
  BOOST_CHECK_EQUAL(plan[1].role, "evaluator-supervisor");
  BOOST_CHECK_EQUAL(plan[2].role, "evaluator");
  BOOST_CHECK_EQUAL(plan[2].index, 0);
  BOOST_CHECK_EQUAL(plan[2].gpu, -1);
}

BOOST_AUTO_TEST_CASE(all_roles_in_stable_order) {
  auto plan = plan_role_actors({"all", "evaluator"}, {0});
  BOOST_REQUIRE_MESSAGE(plan.size() == 5u, describe_plan(plan));
  const char* expected[] = {"learner", "metrics", "sampler", "evaluator-supervisor", "evaluator"};
  for (size_t i = 0; i < plan.size(); ++i)
    BOOST_CHECK_EQUAL(plan[i].role, expected[i]);
  BOOST_CHECK_EQUAL(plan[0].gpu, 0);
  BOOST_CHECK_EQUAL(plan[2].gpu, 0);
  BOOST_CHECK_EQUAL(plan[4].gpu, 0);
  BOOST_CHECK(plan_role_actors({}, {0}).empty());
}

// -- plan_node: launches refused ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(unknown_role_is_refused) {
  node_launch l;
  l.roles = {"sampler", "trainer"};
  BOOST_CHECK_EQUAL(plan_error(l),
                    "--role trainer: expected one of learner, sampler, evaluator, builder, all");
}

BOOST_AUTO_TEST_CASE(missing_role_is_refused) {
  node_launch l;
  BOOST_CHECK_EQUAL(plan_error(l), "--role is required (one of learner, sampler, evaluator, builder, all)");
  manifest_fixture f; // also with a manifest
  BOOST_CHECK_EQUAL(plan_error(f.launch({}, "head")),
                    "--role is required (one of learner, sampler, evaluator, builder, all)");
}

BOOST_FIXTURE_TEST_CASE(several_fitting_nodes_need_node, manifest_fixture) {
  BOOST_CHECK_EQUAL(plan_error(launch({"sampler"})),
                    manifest + ": 2 nodes fit --role sampler; say which one this is with "
                               "--node NAME (one of head, gpu1, cpu1)");
  // No node fits: the message says so and lists every node.
  BOOST_CHECK_EQUAL(plan_error(launch({"learner", "sampler"})),
                    manifest + ": no node has the roles --role learner,sampler (nodes: head, "
                               "gpu1, cpu1)");
}

BOOST_FIXTURE_TEST_CASE(the_only_fitting_node_is_picked, manifest_fixture) {
  auto plan = plan_node(launch({"learner"}));
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK_EQUAL(plan->self.name, "head");
}

BOOST_FIXTURE_TEST_CASE(node_not_in_manifest_is_refused, manifest_fixture) {
  BOOST_CHECK_EQUAL(plan_error(launch({"sampler"}, "gpu9")),
                    manifest + ": --node gpu9: no such node (the manifest has head, gpu1, cpu1)");
}

BOOST_FIXTURE_TEST_CASE(role_not_declared_for_node_is_refused, manifest_fixture) {
  BOOST_CHECK_EQUAL(plan_error(launch({"learner"}, "gpu1")),
                    manifest + ": --role learner: node gpu1 is declared with roles "
                               "[sampler, evaluator] in the manifest");
  BOOST_CHECK_EQUAL(plan_error(launch({"all"}, "gpu1")),
                    manifest + ": --role all: node gpu1 is declared with roles "
                               "[sampler, evaluator] in the manifest");
}

BOOST_FIXTURE_TEST_CASE(gpu_not_listed_for_node_is_refused, manifest_fixture) {
  auto l = launch({"evaluator"}, "gpu1");
  l.gpus = {1, 0};
  l.gpus_given = true;
  BOOST_CHECK_EQUAL(plan_error(l),
                    manifest + ": --gpu 0: node gpu1 does not list that GPU in the manifest");
  // A node declared without GPUs ("Default: [] (no GPU)") may not take one either: GPU 0 of
  // this host belongs to head.
  l = launch({"evaluator"}, "cpu1");
  l.gpus = {0};
  l.gpus_given = true;
  BOOST_CHECK_EQUAL(plan_error(l),
                    manifest + ": --gpu 0: node cpu1 does not list that GPU in the manifest");
}

BOOST_FIXTURE_TEST_CASE(gpu_listed_twice_is_refused, manifest_fixture) {
  auto l = launch({"evaluator"}, "gpu1");
  l.gpus = {2, 1, 2};
  l.gpus_given = true;
  BOOST_CHECK_EQUAL(plan_error(l), "--gpu: a GPU is listed twice");
  // Without a manifest as well.
  node_launch alone;
  alone.roles = {"all"};
  alone.gpus = {0, 0};
  alone.gpus_given = true;
  BOOST_CHECK_EQUAL(plan_error(alone), "--gpu: a GPU is listed twice");
}

BOOST_AUTO_TEST_CASE(port_zero_without_manifest_is_refused) {
  node_launch l;
  l.roles = {"all"};
  l.port = 0;
  BOOST_CHECK_EQUAL(plan_error(l), "--port: expected a port from 1 to 65535");
}

BOOST_FIXTURE_TEST_CASE(bad_override_is_refused_naming_it, manifest_fixture) {
  auto l = launch({"learner"}, "head");
  l.overrides = {"run.name=ok", "log.levle=debug"};
  auto text = plan_error(l);
  BOOST_CHECK_MESSAGE(text.find("override 'log.levle=debug'") != std::string::npos, text);
  BOOST_CHECK_MESSAGE(text.find("unknown key 'log.levle'") != std::string::npos, text);
  BOOST_CHECK_MESSAGE(text.find("log.level") != std::string::npos, text); // did you mean
  l.overrides = {"log.level=loud"};
  text = plan_error(l);
  BOOST_CHECK_MESSAGE(text.find("override 'log.level=loud'") != std::string::npos, text);
  l.overrides = {"run.name"};
  text = plan_error(l);
  BOOST_CHECK_MESSAGE(text.find("override 'run.name'") != std::string::npos, text);
}

BOOST_FIXTURE_TEST_CASE(bad_config_file_and_manifest_are_refused, manifest_fixture) {
  auto l = launch({"learner"}, "head");
  l.config_path = dir.write("run.toml", "[run]\nnmae = \"x\"\n");
  auto text = plan_error(l);
  BOOST_CHECK_MESSAGE(text.find(l.config_path + ":2: run.nmae: unknown key") == 0, text);
  l = launch({"learner"}, "head");
  l.manifest_path = (dir.path / "missing.toml").string();
  text = plan_error(l);
  BOOST_CHECK_MESSAGE(text.find(l.manifest_path + ": cannot read the manifest") == 0, text);
}

// -- plan_node: launches accepted -----------------------------------------------------------------

BOOST_FIXTURE_TEST_CASE(good_launch_with_manifest, manifest_fixture) {
  auto l = launch({"evaluator"}, "cpu1");
  l.overrides = {"run.dir=" + (dir.path / "runs").string(), "run.name=exp-7"};
  auto plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK_EQUAL(plan->manifest.name, "plan-cluster");
  BOOST_CHECK_EQUAL(plan->manifest.nodes.size(), 3u);
  BOOST_CHECK_EQUAL(plan->self.name, "cpu1");
  BOOST_CHECK_EQUAL(plan->self.port, 4244);
  BOOST_CHECK((plan->self.roles == std::vector<std::string>{"evaluator"})); // as launched
  BOOST_CHECK(plan->self.gpus.empty());
  BOOST_CHECK_EQUAL(plan->run.get_string("run.name"), "exp-7");
  BOOST_CHECK_EQUAL(plan->run_dir, (dir.path / "runs").string() + "/exp-7");
  // Planning writes nothing.
  BOOST_CHECK(!fs::exists(dir.path / "runs"));
}

BOOST_FIXTURE_TEST_CASE(good_launch_takes_manifest_gpus_or_a_subset, manifest_fixture) {
  auto l = launch({"learner"}, "head");
  l.cuda_devices = 3; // as kbrl-node would find on a three-GPU machine
  auto plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK((plan->self.gpus == std::vector<int>{0})); // no --gpu: the manifest's list
  // The defaults of run.dir and run.name, made absolute (workers change their directory).
  BOOST_CHECK_EQUAL(plan->run_dir, (std::filesystem::current_path() / "runs/kbrl").string());
  l = launch({"sampler", "evaluator"}, "gpu1");
  l.cuda_devices = 3;
  l.gpus = {2};
  l.gpus_given = true;
  plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK((plan->self.gpus == std::vector<int>{2}));
  BOOST_CHECK((plan->self.roles == std::vector<std::string>{"sampler", "evaluator"}));
  // GPUs come out sorted whatever order they were given in.
  l.gpus = {2, 1};
  plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK((plan->self.gpus == std::vector<int>{1, 2}));
}

BOOST_FIXTURE_TEST_CASE(gpu_past_the_machines_last_is_refused, manifest_fixture) {
  auto l = launch({"sampler"}, "gpu1");
  l.gpus = {2};
  l.gpus_given = true;
  l.cuda_devices = 2;
  BOOST_CHECK_EQUAL(plan_error(l), "gpu 2 requested, but this machine has 2 CUDA device(s) "
                                   "(indices 0..1)");
  // Without any CUDA device the GPU slots run on the CPU: accepted.
  l.cuda_devices = 0;
  auto plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK((plan->self.gpus == std::vector<int>{2}));
}

BOOST_FIXTURE_TEST_CASE(config_file_then_overrides, manifest_fixture) {
  auto l = launch({"evaluator"}, "cpu1");
  l.config_path = dir.write("run.toml", "[run]\nname = \"from-file\"\ndir = \"/srv/kbrl\"\n");
  auto plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK_EQUAL(plan->run_dir, "/srv/kbrl/from-file");
  l.overrides = {"run.name=from-flag"}; // an override wins over the file
  plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK_EQUAL(plan->run_dir, "/srv/kbrl/from-flag");
  BOOST_CHECK_EQUAL(plan->run.get_string("run.dir"), "/srv/kbrl");
}

BOOST_AUTO_TEST_CASE(good_launch_without_manifest_is_a_single_local_node) {
  node_launch l;
  l.roles = {"sampler", "evaluator"};
  l.port = 5555;
  auto plan = plan_node(l);
  BOOST_REQUIRE_MESSAGE(plan, why(plan));
  BOOST_CHECK_EQUAL(plan->manifest.name, "kbrl-local");
  BOOST_CHECK_EQUAL(plan->manifest.coordinator, "local");
  BOOST_REQUIRE_EQUAL(plan->manifest.nodes.size(), 1u);
  BOOST_CHECK_EQUAL(plan->self.name, "local");
  BOOST_CHECK_EQUAL(plan->self.host, "127.0.0.1");
  BOOST_CHECK_EQUAL(plan->self.port, 5555);
  BOOST_CHECK((plan->self.roles == std::vector<std::string>{"sampler", "evaluator"}));
  BOOST_CHECK((plan->manifest.nodes.front().roles == plan->self.roles));
  BOOST_CHECK(plan->self.gpus.empty());
  BOOST_CHECK_EQUAL(plan->run_dir, (std::filesystem::current_path() / "runs/kbrl").string());
}

BOOST_AUTO_TEST_SUITE_END()
