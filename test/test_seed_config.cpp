// Moving over from the seed projects: kernelbench-tinker's and kernel-rl's published configs
// (default, Kevin multi-turn, RA-ICL; test/data/seed_configs/, written from their repositories)
// converted by kbrl-config from-yaml into run configs that load and that kbrl-node's plan
// accepts; the values that carry over, the keys without an equivalent, and the hint a seed key
// name gets in a kbrl run config.

#include "cluster_fixture.hpp"
#include "test_support.hpp"
#include "runtime/config/seed_config.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/node/node_plan.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <string>

using namespace kbrl;
using kbrl::test::contains;
using kbrl::test::why;

namespace {

const std::string seeds = std::string(KBRL_TEST_DATA) + "/seed_configs/";

/// The conversion of test/data/seed_configs/<name>.
config::seed_conversion convert(const std::string& name) {
  auto seed = config::read_seed_yaml(test::read_file(seeds + name), name);
  BOOST_REQUIRE_MESSAGE(seed, why(seed));
  auto c = config::convert_seed(*seed);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  return *c;
}

std::map<std::string, std::string> values(const config::seed_conversion& c) {
  std::map<std::string, std::string> out;
  for (auto& s : c.settings)
    out[s.key] = s.toml_value;
  return out;
}

bool lists(const std::vector<std::string>& notes, const std::string& part) {
  for (auto& n : notes)
    if (contains(n, part))
      return true;
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(seed_config)

BOOST_AUTO_TEST_CASE(every_published_config_converts_to_one_kbrl_node_accepts) {
  test::temp_dir dir;
  const std::string problems = dir.write("kb/level1/1_relu.py", "# a problem\n");
  for (const char* name : {"kernelbench_tinker_default.yaml", "kernel_rl_default.yaml",
                           "kernel_rl_kevin.yaml", "kernel_rl_raicl.yaml"}) {
    BOOST_TEST_CONTEXT(name) {
      auto c = convert(name);
      const std::string toml = c.toml(name);
      auto path = dir.write(std::string(name) + ".toml", toml);
      auto loaded = config::run_config::load(path);
      BOOST_REQUIRE_MESSAGE(loaded, why(loaded));
      BOOST_CHECK(loaded->get_bool("rl.enabled"));
      // kbrl-node's plan: the whole config checked, the run directory and problems redirected.
      node_launch launch;
      launch.roles = {"all"};
      launch.config_path = path;
      launch.overrides = {"run.dir=" + (dir.path / "runs").string(),
                          "problems.root=" + (dir.path / "kb").string()};
      auto plan = plan_node(launch);
      BOOST_CHECK_MESSAGE(plan, why(plan));
      BOOST_CHECK(!c.no_equivalent.empty()); // every seed config has wandb or Modal keys
    }
  }
}

BOOST_AUTO_TEST_CASE(kernelbench_tinker_values_carry_over) {
  auto c = convert("kernelbench_tinker_default.yaml");
  auto v = values(c);
  BOOST_CHECK_EQUAL(v["sampler.model"], "\"Qwen/Qwen3-30B-A3B\"");
  BOOST_CHECK_EQUAL(v["learner.lora_r"], "64");
  BOOST_CHECK_EQUAL(v["learner.lr"], "2e-06");
  BOOST_CHECK_EQUAL(v["rl.max_new_tokens"], "16384");
  BOOST_CHECK_EQUAL(v["learner.loss"], "\"pg\""); // importance_sampling
  BOOST_CHECK_EQUAL(v["rl.max_turns"], "1");       // multiturn.enabled: false
  BOOST_CHECK_EQUAL(v["rl.problems_per_step"], "8");
  BOOST_CHECK_EQUAL(v["rl.group_size"], "16");
  BOOST_CHECK_EQUAL(v["problems.levels"], "[1]");
  BOOST_CHECK_EQUAL(v["problems.backend"], "\"triton\"");
  BOOST_CHECK_EQUAL(v["reward.correct"], "0.3");
  BOOST_CHECK_EQUAL(v["reward.speed"], "1.0");
  BOOST_CHECK_EQUAL(v["reward.speed_kind"], "\"linear\"");
  BOOST_CHECK_EQUAL(v["reward.speed_cap"], "10.0");
  // 22 epochs of ceil(90 training problems / 8) = 12 steps.
  BOOST_CHECK_EQUAL(v["rl.steps"], "264");
  BOOST_CHECK_EQUAL(v["run.dir"], "\"./runs\"");
  BOOST_CHECK_EQUAL(v["run.name"], "\"default\"");
  BOOST_CHECK_EQUAL(v["prompt.show_example"], "true"); // one_shot
  BOOST_CHECK(lists(c.no_equivalent, "wandb_project: kernelbench-tinker: kbrl writes TensorBoard"));
  BOOST_CHECK(lists(c.no_equivalent, "num_substeps"));
  BOOST_CHECK(lists(c.no_equivalent, "modal_gpu_type"));
  BOOST_CHECK(lists(c.assumptions, "rl.steps = 264"));
}

BOOST_AUTO_TEST_CASE(kevin_multi_turn_and_raicl_carry_over) {
  auto kevin = values(convert("kernel_rl_kevin.yaml"));
  BOOST_CHECK_EQUAL(kevin["rl.max_turns"], "4");
  BOOST_CHECK_EQUAL(kevin["rl.gamma"], "0.4");
  auto raicl = values(convert("kernel_rl_raicl.yaml"));
  BOOST_CHECK_EQUAL(raicl["retrieval.index_dir"], "\"./kernel_rag_index\"");
  BOOST_CHECK_EQUAL(raicl["retrieval.k"], "3");
  BOOST_CHECK_EQUAL(raicl["rl.max_turns"], "");   // no mode key: the seed's default single turn
  BOOST_CHECK_EQUAL(raicl["learner.lora_r"], "256");
}

BOOST_AUTO_TEST_CASE(bad_seed_values_and_yaml_name_the_key) {
  auto seed = config::read_seed_yaml("mode: \"three_turn\"\nlearning_rate: fast\n", "s.yaml");
  BOOST_REQUIRE_MESSAGE(seed, why(seed));
  auto c = config::convert_seed(*seed);
  BOOST_REQUIRE(!c);
  const auto text = describe(c.error());
  BOOST_CHECK_MESSAGE(contains(text, "mode: three_turn: expected single_turn or multi_turn"), text);
  BOOST_CHECK_MESSAGE(contains(text, "learning_rate: fast: expected a number"), text);
  auto broken = config::read_seed_yaml("a: [1, 2\n", "broken.yaml");
  BOOST_REQUIRE(!broken);
  BOOST_CHECK_MESSAGE(contains(describe(broken.error()), "broken.yaml:"), describe(broken.error()));
}

BOOST_AUTO_TEST_CASE(a_seed_key_in_a_kbrl_config_says_what_it_is_called_here) {
  auto r = config::run_config::parse("[learner]\nlearning_rate = 1e-5\n", "run.toml");
  BOOST_REQUIRE(!r);
  const auto text = describe(r.error());
  BOOST_CHECK_MESSAGE(contains(text, "kbrl's is learner.lr"), text);
  auto o = config::run_config{}.apply_override("dataset_builder.batch_size=8");
  BOOST_REQUIRE(o);
  BOOST_CHECK_MESSAGE(contains(describe(o), "kbrl's is rl.problems_per_step"), describe(o));
  BOOST_CHECK_EQUAL(config::seed_key_hint("wandb_project").find("no equivalent") != std::string::npos,
                    true);
  BOOST_CHECK_EQUAL(config::seed_key_hint("learner.nonsense"), "");
}

BOOST_AUTO_TEST_CASE(the_tool_writes_a_config_and_lists_what_has_no_equivalent) {
  test::temp_dir dir;
  const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-config";
  auto out = (dir.path / "run.toml").string();
  auto r = test::run_command({tool, "from-yaml", seeds + "kernel_rl_kevin.yaml", "-o", out}, 30);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  BOOST_CHECK_MESSAGE(contains(r.output, "no equivalent: num_substeps: 2"), r.output);
  auto check = test::run_command({tool, "check", out}, 30);
  BOOST_CHECK_MESSAGE(check.code == 0 && contains(check.output, "is a valid kbrl run config"),
                      check.output);
  auto bad = test::run_command({tool, "check", out, "learner.learning_rate=1"}, 30);
  BOOST_CHECK_EQUAL(bad.code, 1);
  BOOST_CHECK_MESSAGE(contains(bad.output, "kbrl's is learner.lr"), bad.output);
}

BOOST_AUTO_TEST_CASE(the_migration_page_lists_every_seed_key) {
  const auto page = test::read_file(std::string(KBRL_SOURCE_DIR) + "/MIGRATING.md");
  BOOST_REQUIRE(!page.empty());
  for (auto& key : config::seed_key_names())
    BOOST_CHECK_MESSAGE(contains(page, "`" + key + "`"), key << " is missing from MIGRATING.md");
}

BOOST_AUTO_TEST_SUITE_END()
