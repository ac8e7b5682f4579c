// Tests of the run config: kbrl's own settings and their example file, and the schema mechanism
// (every kind, range and allowed list) through a small test schema; errors are checked by text.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "runtime/config/config_error.hpp"
#include "runtime/config/settings.hpp"
#include "test_support.hpp"

#include <caf/atom.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using namespace kbrl::config;
using kbrl::test::read_file_bytes;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// A schema with one setting of every kind, a nested table, and both kinds of range.
const std::vector<setting>& test_schema() {
  static const std::vector<setting> schema{
    {"a.flag", setting_kind::boolean, "false", "A flag."},
    {"a.count", setting_kind::integer, "4", "A count.", {}, 1, 8},
    {"a.ratio", setting_kind::real, "0.5", "A ratio.", {}, 0, 1, /*min_exclusive=*/true},
    {"b.mode", setting_kind::string, "\"fast\"", "A mode.", {"fast", "slow"}},
    {"b.names", setting_kind::string_list, "[\"x\"]", "Names.", {"x", "y", "z"}},
    {"b.ids", setting_kind::int_list, "[]", "Device ids.", {}, 0},
    {"b.c.text", setting_kind::string, "\"\"", "Any text, in a nested table."},
  };
  return schema;
}

/// Why `x` failed, for a check's message ("" if it holds a value: Boost.Test builds messages even
/// when the check passes).
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string{} : kbrl::describe(x.error());
}

/// The text of an invalid_config error (without the "invalid_config: " prefix).
std::string error_text(const caf::error& err) {
  BOOST_REQUIRE_MESSAGE(err, "expected an error");
  BOOST_CHECK(err.category() == caf::atom("kbrl"));
  BOOST_CHECK_EQUAL(err.code(), static_cast<uint8_t>(kbrl::errc::invalid_config));
  BOOST_REQUIRE(err.context().match_elements<std::string>());
  return err.context().get_as<std::string>(0);
}

/// The error text of a run config that must not parse.
std::string parse_error(const std::string& text,
                        const std::vector<setting>& schema = all_settings()) {
  auto config = run_config::parse(text, "run.toml", schema);
  BOOST_REQUIRE_MESSAGE(!config, "the config parsed but should not have:\n" + text);
  return error_text(config.error());
}

/// The error text of an override that must fail; checks that it changed nothing.
std::string override_error(const std::string& assignment,
                           const std::vector<setting>& schema = all_settings()) {
  run_config config = run_config::defaults(schema);
  const caf::error err = config.apply_override(assignment);
  BOOST_CHECK_MESSAGE(config == run_config::defaults(schema), "a failed override changed "
                                                              "the config");
  return error_text(err);
}

} // namespace

BOOST_AUTO_TEST_SUITE(settings)

BOOST_AUTO_TEST_CASE(defaults_hold_the_declared_values) {
  const run_config config = run_config::defaults();
  BOOST_CHECK_EQUAL(config.get_string("run.name"), "kbrl");
  BOOST_CHECK_EQUAL(config.get_string("run.dir"), "runs");
  BOOST_CHECK_EQUAL(config.get_int("run.seed"), 0);
  BOOST_CHECK_EQUAL(config.get_string("log.level"), "info");
  BOOST_CHECK_EQUAL(config.get_bool("log.console"), true);
  BOOST_CHECK_EQUAL(config.get_real("log.flush_s"), 1.0);
  BOOST_CHECK_EQUAL(config.get_real("node.stop_after_s"), 0.0);
  BOOST_CHECK_EQUAL(config.get_real("node.status_interval_s"), 10.0);
  BOOST_CHECK(run_config{} == config);
  BOOST_CHECK_EQUAL(config.get_toml("log.level"), "\"info\"");
}

BOOST_AUTO_TEST_CASE(every_setting_is_documented) {
  for (const auto& s : all_settings()) {
    BOOST_CHECK_MESSAGE(s.doc.size() > 10, s.key << " needs a doc: meaning and unit");
    BOOST_CHECK_EQUAL(find_setting(s.key), &s);
    if (s.key.size() > 2 && s.key.substr(s.key.size() - 2) == "_s")
      BOOST_CHECK_MESSAGE(s.doc.find("econds") != std::string::npos,
                          s.key << " is in seconds: say so in its doc");
  }
  BOOST_CHECK(find_setting("log.nothing") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_partial_file_overlays_the_defaults) {
  auto config = run_config::parse(R"(# a comment
[log]
level = "debug"
flush_s = 2       # an integer is accepted for a real setting

[run]
seed = 7
node.stop_after_s = 30.5
)",
                                  "run.toml");
  // `node.stop_after_s` under [run] is run.node.stop_after_s: unknown.
  BOOST_REQUIRE(!config);
  BOOST_CHECK_EQUAL(error_text(config.error()),
                    "run.toml:8: run.node: unknown table (did you mean 'run.name'?)");

  config = run_config::parse(R"(node.stop_after_s = 30.5
[log]
level = "debug"
flush_s = 2

[run]
seed = 7
)",
                             "run.toml");
  BOOST_REQUIRE_MESSAGE(config, why(config));
  BOOST_CHECK_EQUAL(config->get_string("log.level"), "debug");
  BOOST_CHECK_EQUAL(config->get_real("log.flush_s"), 2.0);
  BOOST_CHECK_EQUAL(config->get_int("run.seed"), 7);
  BOOST_CHECK_EQUAL(config->get_real("node.stop_after_s"), 30.5);
  BOOST_CHECK_EQUAL(config->get_string("run.name"), "kbrl"); // default kept
  BOOST_CHECK_EQUAL(config->get_bool("log.console"), true);
}

BOOST_AUTO_TEST_CASE(example_run_config_equals_the_defaults) {
  // config/run.example.toml is run_config::defaults().render(). After adding or changing a
  // setting, regenerate it: KBRL_REGENERATE_EXAMPLES=1 kbrl-tests --run_test=settings
  const std::string path = std::string{KBRL_SOURCE_DIR} + "/config/run.example.toml";
  const std::string rendered = run_config::defaults().render();
  if (std::getenv("KBRL_REGENERATE_EXAMPLES") != nullptr)
    std::ofstream(path) << rendered;
  auto example = run_config::load(path);
  BOOST_REQUIRE_MESSAGE(example, why(example));
  BOOST_CHECK(*example == run_config::defaults());
  const std::string text = read_file_bytes(path);
  for (const auto& s : all_settings()) {
    const auto dot = s.key.rfind('.');
    const std::string table = "[" + s.key.substr(0, dot) + "]";
    const std::string line = "\n" + s.key.substr(dot + 1) + " = ";
    const auto at = text.find(table);
    BOOST_CHECK_MESSAGE(at != std::string::npos && text.find(line, at) != std::string::npos,
                        "config/run.example.toml does not set " << s.key);
    BOOST_CHECK_MESSAGE(text.find(s.doc.substr(0, 20)) != std::string::npos,
                        "config/run.example.toml does not document " << s.key);
  }
  BOOST_CHECK_MESSAGE(text == rendered,
                      "config/run.example.toml is stale; regenerate it with "
                      "KBRL_REGENERATE_EXAMPLES=1 kbrl-tests --run_test=settings");
}

BOOST_AUTO_TEST_CASE(verdict_and_low_coverage_settings) {
  // Issue 16: the strict and KernelBench verdicts, the time coverage and its reward policy.
  const run_config config = run_config::defaults();
  BOOST_CHECK_EQUAL(config.get_string("eval.correctness"), "strict");
  BOOST_CHECK_EQUAL(config.get_real("eval.strict_rtol"), -1.0);
  BOOST_CHECK_EQUAL(config.get_real("eval.strict_floor"), -1.0);
  BOOST_CHECK_EQUAL(config.get_real("eval.strict_norm_tol"), -1.0);
  BOOST_CHECK_EQUAL(config.get_real("eval.min_time_coverage"), 0.05);
  BOOST_CHECK(config.get_bool("eval.profile_coverage"));
  BOOST_CHECK_EQUAL(config.get_string("reward.low_coverage"), "zero");
  auto parsed = run_config::parse("[eval]\ncorrectness = \"kernelbench\"\nstrict_rtol = 0.001\n"
                                  "strict_floor = 0\nstrict_norm_tol = 1e-3\n"
                                  "min_time_coverage = 0.5\nprofile_coverage = false\n"
                                  "[reward]\nlow_coverage = \"keep\"\n",
                                  "run.toml");
  BOOST_REQUIRE_MESSAGE(parsed, why(parsed));
  BOOST_CHECK_EQUAL(parsed->get_string("eval.correctness"), "kernelbench");
  BOOST_CHECK_EQUAL(parsed->get_real("eval.strict_rtol"), 0.001);
  BOOST_CHECK_EQUAL(parsed->get_real("eval.strict_floor"), 0.0);
  BOOST_CHECK_EQUAL(parsed->get_real("eval.min_time_coverage"), 0.5);
  BOOST_CHECK(!parsed->get_bool("eval.profile_coverage"));
  BOOST_CHECK_EQUAL(parsed->get_string("reward.low_coverage"), "keep");
  // Bad values name the key and what is allowed.
  BOOST_CHECK_EQUAL(override_error("eval.correctness=allclose"),
                    "override 'eval.correctness=allclose': eval.correctness: expected one of "
                    "strict, kernelbench, got \"allclose\"");
  BOOST_CHECK_EQUAL(override_error("reward.low_coverage=half"),
                    "override 'reward.low_coverage=half': reward.low_coverage: expected one of "
                    "zero, keep, got \"half\"");
  for (auto bad : {"eval.strict_rtol=-2", "eval.strict_floor=-1.5", "eval.strict_norm_tol=-3",
                   "eval.min_time_coverage=1.5", "eval.min_time_coverage=-0.1",
                   "eval.profile_coverage=sometimes"}) {
    std::string key = bad;
    key = key.substr(0, key.find('='));
    auto text = override_error(bad);
    BOOST_CHECK_MESSAGE(text.find(": " + key + ": expected") != std::string::npos, text);
  }
  auto in_file = parse_error("[eval]\nmin_time_coverage = 2\n");
  BOOST_CHECK_MESSAGE(in_file.find("run.toml:2: eval.min_time_coverage") != std::string::npos,
                      in_file);
}

BOOST_AUTO_TEST_CASE(unknown_keys_suggest_the_closest_key) {
  BOOST_CHECK_EQUAL(parse_error(R"([log]
levle = "debug"
[lgo]
level = "debug"
[whatever]
x = 1
[run]
sede = 1
)"),
                    "run.toml:2: log.levle: unknown key (did you mean 'log.level'?)\n"
                    "run.toml:3: lgo: unknown table (did you mean 'log'?)\n"
                    "run.toml:5: whatever: unknown table\n"
                    "run.toml:8: run.sede: unknown key (did you mean 'run.seed'?)");
}

BOOST_AUTO_TEST_CASE(wrong_types_and_values_name_line_key_and_expectation) {
  BOOST_CHECK_EQUAL(parse_error(R"([log]
level = "verbose"
console = 1
flush_s = 0
[run]
seed = -3
name = 5
[node]
stop_after_s = "10"
status_interval_s = nan
)"),
                    "run.toml:2: log.level: expected one of trace, debug, info, warn, error, off, "
                    "got \"verbose\"\n"
                    "run.toml:3: log.console: expected true or false, got 1\n"
                    "run.toml:4: log.flush_s: expected a number > 0, got 0\n"
                    "run.toml:6: run.seed: expected an integer >= 0, got -3\n"
                    "run.toml:7: run.name: expected a string, got 5\n"
                    "run.toml:9: node.stop_after_s: expected a number >= 0, got \"10\"\n"
                    "run.toml:10: node.status_interval_s: expected a number > 0, got nan");
  BOOST_CHECK_EQUAL(parse_error("[log]\nlevel = \"inof\"\n"),
                    "run.toml:2: log.level: expected one of trace, debug, info, warn, error, off, "
                    "got \"inof\" (did you mean 'info'?)");
  BOOST_CHECK_EQUAL(parse_error("log = 3\n"),
                    "run.toml:1: log: expected a table of settings ([log]), got 3");
  BOOST_CHECK_EQUAL(parse_error("[log.level]\nx = 1\n"),
                    "run.toml:1: log.level: expected one of trace, debug, info, warn, error, off, "
                    "got a table");
}

BOOST_AUTO_TEST_CASE(syntax_errors_and_missing_files) {
  BOOST_CHECK_EQUAL(parse_error("[log]\nlevel = debug\n"),
                    "run.toml:2: TOML syntax error: Error while parsing value: could not "
                    "determine value type");
  auto config = run_config::load("/nonexistent/kbrl/run.toml");
  BOOST_REQUIRE(!config);
  BOOST_CHECK_EQUAL(error_text(config.error()), "/nonexistent/kbrl/run.toml: cannot read the run "
                                                "config: No such file or directory");
}

BOOST_AUTO_TEST_CASE(overrides_parse_by_kind) {
  run_config config = run_config::defaults();
  BOOST_CHECK(!config.apply_override("log.level=debug")); // bare string
  BOOST_CHECK_EQUAL(config.get_string("log.level"), "debug");
  BOOST_CHECK(!config.apply_override("log.level=\"warn\"")); // quoted string
  BOOST_CHECK_EQUAL(config.get_string("log.level"), "warn");
  BOOST_CHECK(!config.apply_override("run.name = my run ")); // spaces around are trimmed
  BOOST_CHECK_EQUAL(config.get_string("run.name"), "my run");
  BOOST_CHECK(!config.apply_override("run.seed=42"));
  BOOST_CHECK_EQUAL(config.get_int("run.seed"), 42);
  BOOST_CHECK(!config.apply_override("log.flush_s=0.25"));
  BOOST_CHECK_EQUAL(config.get_real("log.flush_s"), 0.25);
  BOOST_CHECK(!config.apply_override("node.stop_after_s=3")); // integer for a real
  BOOST_CHECK_EQUAL(config.get_real("node.stop_after_s"), 3.0);
  BOOST_CHECK(!config.apply_override("log.console=false"));
  BOOST_CHECK_EQUAL(config.get_bool("log.console"), false);
  BOOST_CHECK(!config.apply_overrides({"run.seed=1", "log.level=error"}));
  BOOST_CHECK_EQUAL(config.get_int("run.seed"), 1);
  BOOST_CHECK_EQUAL(config.get_string("log.level"), "error");
}

BOOST_AUTO_TEST_CASE(override_errors_name_the_override) {
  BOOST_CHECK_EQUAL(override_error("log.levle=debug"),
                    "override 'log.levle=debug': unknown key 'log.levle' (did you mean "
                    "'log.level'?)");
  BOOST_CHECK_EQUAL(override_error("nothing.here=1"),
                    "override 'nothing.here=1': unknown key 'nothing.here'");
  BOOST_CHECK_EQUAL(override_error("log=1"),
                    "override 'log=1': 'log' is a table of settings, not a setting");
  BOOST_CHECK_EQUAL(override_error("log.level"),
                    "override 'log.level': expected key=value, e.g. log.level=debug");
  BOOST_CHECK_EQUAL(override_error("run.seed=abc"),
                    "override 'run.seed=abc': run.seed: expected an integer >= 0, got \"abc\"");
  BOOST_CHECK_EQUAL(override_error("run.seed=1.5"),
                    "override 'run.seed=1.5': run.seed: expected an integer >= 0, got 1.5");
  BOOST_CHECK_EQUAL(override_error("run.seed=-1"),
                    "override 'run.seed=-1': run.seed: expected an integer >= 0, got -1");
  BOOST_CHECK_EQUAL(override_error("log.flush_s=0"),
                    "override 'log.flush_s=0': log.flush_s: expected a number > 0, got 0");
  BOOST_CHECK_EQUAL(override_error("log.console=yes"),
                    "override 'log.console=yes': log.console: expected true or false, "
                    "got \"yes\"");
  BOOST_CHECK_EQUAL(override_error("log.level=verbose"),
                    "override 'log.level=verbose': log.level: expected one of trace, debug, "
                    "info, warn, error, off, got \"verbose\"");
  // The config error helper formats the same way for a caller that reports its own problems.
  BOOST_CHECK_EQUAL(error_text(config_error("override 'x=1'", 0, "", "unknown key 'x'")),
                    "override 'x=1': unknown key 'x'");
}

BOOST_AUTO_TEST_CASE(every_kind_through_a_test_schema) {
  const auto& schema = test_schema();
  const run_config defaults = run_config::defaults(schema);
  BOOST_CHECK_EQUAL(defaults.get_bool("a.flag"), false);
  BOOST_CHECK_EQUAL(defaults.get_int("a.count"), 4);
  BOOST_CHECK_EQUAL(defaults.get_real("a.ratio"), 0.5);
  BOOST_CHECK_EQUAL(defaults.get_string("b.mode"), "fast");
  BOOST_CHECK(defaults.get_string_list("b.names") == std::vector<std::string>{"x"});
  BOOST_CHECK(defaults.get_int_list("b.ids").empty());
  BOOST_CHECK_EQUAL(defaults.get_string("b.c.text"), "");

  auto config = run_config::parse(R"([a]
flag = true
count = 8
ratio = 1
[b]
mode = "slow"
names = ["z", "y"]
ids = [3, 0, 7]
c.text = "hello"
)",
                                  "test.toml", schema);
  BOOST_REQUIRE_MESSAGE(config, why(config));
  BOOST_CHECK_EQUAL(config->get_bool("a.flag"), true);
  BOOST_CHECK_EQUAL(config->get_int("a.count"), 8);
  BOOST_CHECK_EQUAL(config->get_real("a.ratio"), 1.0);
  BOOST_CHECK_EQUAL(config->get_string("b.mode"), "slow");
  BOOST_CHECK(config->get_string_list("b.names") == (std::vector<std::string>{"z", "y"}));
  BOOST_CHECK(config->get_int_list("b.ids") == (std::vector<int64_t>{3, 0, 7}));
  BOOST_CHECK_EQUAL(config->get_string("b.c.text"), "hello");
  BOOST_CHECK_EQUAL(config->get_toml("b.ids"), "[3, 0, 7]");

  BOOST_CHECK_EQUAL(parse_error(R"([a]
count = 9
ratio = 0
[b]
names = ["x", "w", 3]
ids = [1, -1]
mode = ["fast"]
[b.c]
txt = ""
)",
                                schema),
                    "run.toml:2: a.count: expected an integer from 1 to 8, got 9\n"
                    "run.toml:3: a.ratio: expected a number > 0 and <= 1, got 0\n"
                    "run.toml:5: b.names[1]: expected one of x, y, z, got \"w\"\n"
                    "run.toml:5: b.names[2]: expected one of x, y, z, got 3\n"
                    "run.toml:6: b.ids[1]: expected an integer >= 0, got -1\n"
                    "run.toml:7: b.mode: expected one of fast, slow, got an array\n"
                    "run.toml:9: b.c.txt: unknown key (did you mean 'b.c.text'?)");
}

BOOST_AUTO_TEST_CASE(list_overrides) {
  const auto& schema = test_schema();
  run_config config = run_config::defaults(schema);
  BOOST_CHECK(!config.apply_override("b.ids=[0, 3]"));
  BOOST_CHECK(config.get_int_list("b.ids") == (std::vector<int64_t>{0, 3}));
  BOOST_CHECK(!config.apply_override("b.ids=[]"));
  BOOST_CHECK(config.get_int_list("b.ids").empty());
  BOOST_CHECK(!config.apply_override("b.names=[\"y\", 'z']"));
  BOOST_CHECK(config.get_string_list("b.names") == (std::vector<std::string>{"y", "z"}));
  BOOST_CHECK(!config.apply_override("a.ratio=1e-3"));
  BOOST_CHECK_EQUAL(config.get_real("a.ratio"), 1e-3);
  BOOST_CHECK(!config.apply_override("b.c.text=two words"));
  BOOST_CHECK_EQUAL(config.get_string("b.c.text"), "two words");
  BOOST_CHECK_EQUAL(override_error("b.ids=[1,-1]", schema),
                    "override 'b.ids=[1,-1]': b.ids[1]: expected an integer >= 0, got -1");
  BOOST_CHECK_EQUAL(override_error("b.ids=1", schema),
                    "override 'b.ids=1': b.ids: expected an array of integers >= 0, got 1");
  BOOST_CHECK_EQUAL(override_error("b.names=x", schema),
                    "override 'b.names=x': b.names: expected an array of strings from x, y, z, "
                    "got \"x\"");
  BOOST_CHECK_EQUAL(override_error("a.count=0", schema),
                    "override 'a.count=0': a.count: expected an integer from 1 to 8, got 0");
  BOOST_CHECK_EQUAL(override_error("a.ratio=2.5", schema),
                    "override 'a.ratio=2.5': a.ratio: expected a number > 0 and <= 1, got 2.5");
}

BOOST_AUTO_TEST_CASE(render_round_trips) {
  run_config config = run_config::defaults();
  BOOST_CHECK(!config.apply_override("run.name=\"quote \\\" and tab \\t\""));
  BOOST_CHECK(!config.apply_override("log.flush_s=0.1"));
  BOOST_CHECK(!config.apply_override("node.stop_after_s=1e300"));
  BOOST_CHECK(!config.apply_override("run.seed=9007199254740993"));
  const std::string text = config.render();
  auto copy = run_config::parse(text, "config.toml");
  BOOST_REQUIRE_MESSAGE(copy, why(copy) + "\n" + text);
  BOOST_CHECK(*copy == config);
  BOOST_CHECK_EQUAL(copy->get_string("run.name"), "quote \" and tab \t");
  // Each setting is documented above its line, with its default.
  BOOST_CHECK(text.find("# Seconds between flushes of buffered log messages to disk.\n"
                        "# default: 1.0; range: > 0\n"
                        "flush_s = 0.1\n")
              != std::string::npos);

  run_config other = run_config::defaults(test_schema());
  BOOST_CHECK(!other.apply_overrides({"b.names=[\"z\"]", "b.ids=[5]", "b.c.text=x"}));
  auto other_copy = run_config::parse(other.render(), "config.toml", test_schema());
  BOOST_REQUIRE_MESSAGE(other_copy, why(other_copy) + "\n" + other.render());
  BOOST_CHECK(*other_copy == other);
  BOOST_CHECK(!(other == run_config::defaults())); // different schemas
}

BOOST_AUTO_TEST_CASE(load_reads_a_file) {
  std::string dir = (fs::temp_directory_path() / "kbrl-settings-XXXXXX").string();
  BOOST_REQUIRE(mkdtemp(dir.data()) != nullptr);
  const std::string path = dir + "/run.toml";
  std::ofstream(path) << "[log]\nlevel = \"trace\"\nconsole = \"no\"\n";
  auto config = run_config::load(path);
  std::ofstream(path) << "[log]\nlevel = \"trace\"\n";
  auto good = run_config::load(path);
  fs::remove_all(dir);
  BOOST_REQUIRE(!config);
  BOOST_CHECK_EQUAL(error_text(config.error()),
                    path + ":3: log.console: expected true or false, got \"no\"");
  BOOST_REQUIRE_MESSAGE(good, why(good));
  BOOST_CHECK_EQUAL(good->get_string("log.level"), "trace");
}

BOOST_AUTO_TEST_CASE(misuse_of_the_getters_and_schema_is_a_logic_error) {
  const run_config config = run_config::defaults();
  BOOST_CHECK_THROW(config.get_int("log.level"), std::logic_error);
  BOOST_CHECK_THROW(config.get_bool("log.nothing"), std::logic_error);
  BOOST_CHECK_THROW(config.get_real("run.seed"), std::logic_error); // declared integer
  BOOST_CHECK_THROW(config.get_toml("nothing"), std::logic_error);
  const std::vector<setting> bad_default{{"a.b", setting_kind::integer, "\"x\"", "Doc."}};
  BOOST_CHECK_THROW(run_config::defaults(bad_default), std::logic_error);
  const std::vector<setting> out_of_range{{"a.b", setting_kind::integer, "0", "Doc.", {}, 1}};
  BOOST_CHECK_THROW(run_config::defaults(out_of_range), std::logic_error);
  const std::vector<setting> no_table{{"b", setting_kind::integer, "0", "Doc."}};
  BOOST_CHECK_THROW(run_config::defaults(no_table), std::logic_error);
  const std::vector<setting> twice{{"a.b", setting_kind::integer, "0", "Doc."},
                                   {"a.b", setting_kind::integer, "0", "Doc."}};
  BOOST_CHECK_THROW(run_config::defaults(twice), std::logic_error);
  const std::vector<setting> clash{{"a.b", setting_kind::integer, "0", "Doc."},
                                   {"a.b.c", setting_kind::integer, "0", "Doc."}};
  BOOST_CHECK_THROW(run_config::defaults(clash), std::logic_error);
}

BOOST_AUTO_TEST_CASE(did_you_mean_and_edit_distance) {
  BOOST_CHECK_EQUAL(edit_distance("log.level", "log.level"), 0u);
  BOOST_CHECK_EQUAL(edit_distance("log.levle", "log.level"), 1u); // a swap counts once
  BOOST_CHECK_EQUAL(edit_distance("", "abc"), 3u);
  BOOST_CHECK_EQUAL(edit_distance("kitten", "sitting"), 3u);
  const std::vector<std::string> keys{"log.level", "log.console", "run.seed"};
  BOOST_CHECK_EQUAL(did_you_mean("log.lvl", keys), " (did you mean 'log.level'?)");
  BOOST_CHECK_EQUAL(did_you_mean("log.lv", keys), ""); // 3 edits away
  BOOST_CHECK_EQUAL(closest_match("run.sed", keys), "run.seed");
  BOOST_CHECK_EQUAL(format_config_error("cluster.toml", 12, "node[1].port", "bad"),
                    "cluster.toml:12: node[1].port: bad");
  BOOST_CHECK_EQUAL(format_config_error("cluster.toml", 0, "node", "bad"),
                    "cluster.toml: node: bad");
  BOOST_CHECK_EQUAL(toml_real(1.0), "1.0");
  BOOST_CHECK_EQUAL(toml_real(0.1), "0.1");
  BOOST_CHECK_EQUAL(toml_real(-2.5e-7), "-2.5e-07");
  BOOST_CHECK_EQUAL(toml_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

BOOST_AUTO_TEST_SUITE_END()
