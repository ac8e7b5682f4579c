// Tests of kbrl-shell's text and JSON output without a cluster: command-line splitting, table
// layout, the renderings of nodes, actors and status (runtime/shell/shell_session.hpp), and the
// JSON writer behind every --json answer (runtime/io/json_writer.hpp), whose output is parsed
// back with simdjson.

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include "runtime/io/json_writer.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/shell/shell_session.hpp"

#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

using namespace kbrl;

namespace {

using words = std::vector<std::string>;
using kbrl::test::contains;
using kbrl::test::lines_of;

/// The line of `text` that starts with `prefix` ("" if none).
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0)
      return line;
  return "";
}

constexpr int64_t t0 = 1'700'000'000'000; // an arbitrary wall-clock time, in ms

/// A view with an up coordinator, an up worker and a down worker.
membership_view sample_view() {
  membership_view v;
  v.cluster = "test-cluster";
  v.coordinator = "head";
  v.revision = 7;

  node_record head;
  head.info.name = "head";
  head.info.host = "127.0.0.1";
  head.info.port = 4242;
  head.info.roles = {"learner"};
  head.info.gpus = {0};
  head.info.pid = 1234;
  head.info.devices = "1 CUDA device (gpu 0)";
  head.info.torch_version = "2.1.0";
  head.info.actors = {{"head/learner", "learner", caf::actor{}},
                      {"head/metrics", "metrics", caf::actor{}}};
  head.state = node_state::up;
  head.joined_unix_ms = t0;
  head.last_seen_unix_ms = t0 + 58'500;
  head.incarnation = 1;
  v.nodes.push_back(head);

  node_record gpu1;
  gpu1.info.name = "gpu1";
  gpu1.info.host = "localhost";
  gpu1.info.port = 4243;
  gpu1.info.roles = {"sampler", "evaluator"};
  gpu1.info.gpus = {1, 2};
  gpu1.info.pid = 99;
  gpu1.info.actors = {{"gpu1/sampler.0", "sampler", caf::actor{}},
                      {"gpu1/evaluator-supervisor", "evaluator-supervisor", caf::actor{}},
                      {"gpu1/evaluator.0", "evaluator", caf::actor{}}};
  gpu1.state = node_state::up;
  gpu1.joined_unix_ms = t0 + 1000;
  gpu1.last_seen_unix_ms = t0 + 59'000;
  gpu1.incarnation = 3;
  v.nodes.push_back(gpu1);

  node_record cpu1;
  cpu1.info.name = "cpu1";
  cpu1.info.host = "127.0.0.1";
  cpu1.info.port = 4244;
  cpu1.info.roles = {"evaluator"};
  cpu1.info.actors = {{"cpu1/evaluator.0", "evaluator", caf::actor{}}};
  cpu1.state = node_state::down;
  cpu1.joined_unix_ms = t0;
  cpu1.last_seen_unix_ms = t0 + 2000;
  cpu1.down_unix_ms = t0 + 7001;
  cpu1.incarnation = 1;
  cpu1.down_reason = "no heartbeat for 5.0 s";
  v.nodes.push_back(cpu1);
  return v;
}

actor_status sample_status() {
  actor_status st;
  st.name = "gpu1/evaluator.0";
  st.role = "evaluator";
  st.node = "gpu1";
  st.state = "running";
  st.mailbox_size = 3;
  st.messages_handled = 1234;
  st.restarts = 2;
  st.last_error = "worker crashed: \"illegal memory access\"\nsee log";
  st.since_unix_ms = t0;
  st.details = {{"queue", "5"}, {"policy version", "12"}};
  st.commands = {"restart", "drain"};
  return st;
}

std::string str(simdjson::dom::element e) {
  return std::string{std::string_view(e)};
}

std::vector<std::string> strings(simdjson::dom::array a) {
  std::vector<std::string> out;
  for (auto e : a)
    out.push_back(str(e));
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(shell)

// -- split_command_line ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(split_at_whitespace_runs) {
  BOOST_CHECK(split_command_line("nodes") == words{"nodes"});
  BOOST_CHECK((split_command_line("  status   head/learner\t ") == words{"status", "head/learner"}));
  BOOST_CHECK((split_command_line("watch\tgpu1/sampler.0\n2  5")
               == words{"watch", "gpu1/sampler.0", "2", "5"}));
  BOOST_CHECK(split_command_line("").empty());
  BOOST_CHECK(split_command_line(" \t \n ").empty());
}

BOOST_AUTO_TEST_CASE(split_honours_double_quotes) {
  BOOST_CHECK((split_command_line(R"(restart gpu1/evaluator.0 "a  b"  c)")
               == words{"restart", "gpu1/evaluator.0", "a  b", "c"}));
  // Quotes group inside a word and disappear.
  BOOST_CHECK((split_command_line(R"(set x"y z"w)") == words{"set", "xy zw"}));
  // An empty quoted word is still a word.
  BOOST_CHECK((split_command_line(R"(say "" x)") == words{"say", "", "x"}));
  BOOST_CHECK((split_command_line(R"("")") == words{""}));
  // An unterminated quote runs to the end of the line.
  BOOST_CHECK((split_command_line(R"(x "a b )") == words{"x", "a b "}));
}

// -- format_table ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(table_columns_are_aligned) {
  // Each column is as wide as its widest cell plus two spaces; the last column is not padded.
  BOOST_CHECK_EQUAL(format_table({"A", "BB", "C"}, {{"xxx", "y", "1"}, {"z", "longer", "22"}}),
                    "A    BB      C\n"
                    "xxx  y       1\n"
                    "z    longer  22\n");
  BOOST_CHECK_EQUAL(format_table({"NAME", "STATE"}, {}), "NAME  STATE\n");
  // A short row ends early instead of being padded.
  BOOST_CHECK_EQUAL(format_table({"NAME", "STATE"}, {{"averylongname"}}),
                    "NAME           STATE\n"
                    "averylongname\n");
}

// -- nodes, actors, status as text ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(render_nodes_shows_every_node) {
  auto view = sample_view();
  const int64_t now = t0 + 60'000;
  auto text = render_nodes(view, now);
  auto lines = lines_of(text);
  BOOST_REQUIRE_EQUAL(lines.size(), 5u); // title, header, three nodes
  BOOST_CHECK_EQUAL(lines[0], "cluster test-cluster (coordinator head marked *)");
  BOOST_CHECK_EQUAL(lines[1].rfind("NODE ", 0), 0u);

  auto head = line_starting(text, "head *");
  auto gpu1 = line_starting(text, "gpu1 ");
  auto cpu1 = line_starting(text, "cpu1 ");
  BOOST_REQUIRE(!head.empty() && !gpu1.empty() && !cpu1.empty());
  BOOST_CHECK(line_starting(text, "gpu1 *").empty()); // only the coordinator is marked

  BOOST_CHECK(contains(head, " up "));
  BOOST_CHECK(contains(head, " learner "));
  BOOST_CHECK(contains(head, " 127.0.0.1:4242 "));
  BOOST_CHECK(contains(head, "(1 min 0 s ago)"));            // since it joined
  BOOST_CHECK(contains(head, "last heard 1.5 s ago"));
  BOOST_CHECK(contains(gpu1, " sampler,evaluator "));
  BOOST_CHECK(contains(gpu1, " 1,2 "));
  BOOST_CHECK(contains(gpu1, " localhost:4243 "));
  BOOST_CHECK(contains(gpu1, " 3 "));                         // incarnation
  BOOST_CHECK(contains(gpu1, "last heard 1.0 s ago"));
  BOOST_CHECK(contains(cpu1, " down "));
  BOOST_CHECK(contains(cpu1, " - "));                         // no GPUs
  BOOST_CHECK(contains(cpu1, "(53.0 s ago)"));                // since it went down
  BOOST_CHECK(contains(cpu1, "no heartbeat for 5.0 s"));      // the reason as the note
  BOOST_CHECK(!contains(cpu1, "last heard"));

  // Every column starts at the same offset in every line.
  for (const char* column : {"STATE", "ROLES", "GPUS", "ADDRESS", "INCARNATION", "SINCE"}) {
    const auto at = lines[1].find(column);
    BOOST_REQUIRE(at != std::string::npos);
    for (size_t i = 2; i < lines.size(); ++i) {
      BOOST_CHECK_MESSAGE(lines[i][at - 1] == ' ' && lines[i][at - 2] == ' ' && lines[i][at] != ' ',
                          "column " << column << " misaligned in: " << lines[i]);
    }
  }
  const auto state_at = lines[1].find("STATE");
  BOOST_CHECK_EQUAL(head.substr(state_at, 3), "up ");
  BOOST_CHECK_EQUAL(cpu1.substr(state_at, 5), "down ");
}

BOOST_AUTO_TEST_CASE(render_actors_lists_actors_with_node_state) {
  auto view = sample_view();
  auto text = render_actors(view, "");
  auto lines = lines_of(text);
  BOOST_REQUIRE_EQUAL(lines.size(), 1u + 6u); // header + every actor
  BOOST_CHECK_EQUAL(lines[0].rfind("ACTOR ", 0), 0u);
  BOOST_CHECK(contains(lines[0], "NODE STATE"));
  auto ev = line_starting(text, "gpu1/evaluator.0 ");
  BOOST_CHECK(contains(ev, " evaluator "));
  BOOST_CHECK(contains(ev, " gpu1 "));
  BOOST_CHECK(ev.size() >= 2 && ev.substr(ev.size() - 2) == "up");
  auto down = line_starting(text, "cpu1/evaluator.0 ");
  BOOST_CHECK(down.size() >= 4 && down.substr(down.size() - 4) == "down");
  // Columns line up: the longest actor name sets the width of the first.
  const auto role_at = lines[0].find("ROLE");
  BOOST_CHECK_EQUAL(role_at, std::string{"gpu1/evaluator-supervisor"}.size() + 2);
  BOOST_CHECK_EQUAL(line_starting(text, "head/learner").substr(role_at, 8), "learner ");

  // One node only.
  auto only = lines_of(render_actors(view, "gpu1"));
  BOOST_REQUIRE_EQUAL(only.size(), 1u + 3u);
  for (size_t i = 1; i < only.size(); ++i)
    BOOST_CHECK_EQUAL(only[i].rfind("gpu1/", 0), 0u);
  // An unknown node: just the header.
  BOOST_CHECK_EQUAL(lines_of(render_actors(view, "nobody")).size(), 1u);
}

BOOST_AUTO_TEST_CASE(render_status_lists_every_field) {
  auto st = sample_status();
  auto text = render_status(st, t0 + 192'000);
  auto value_of = [&](const std::string& key) {
    auto line = line_starting(text, key + ":");
    BOOST_REQUIRE_MESSAGE(!line.empty(), "no line " << key << " in:\n" << text);
    auto rest = line.substr(key.size() + 1);
    return rest.substr(rest.find_first_not_of(' '));
  };
  BOOST_CHECK_EQUAL(value_of("actor"), "gpu1/evaluator.0");
  BOOST_CHECK_EQUAL(value_of("role"), "evaluator");
  BOOST_CHECK_EQUAL(value_of("node"), "gpu1");
  BOOST_CHECK_EQUAL(value_of("state"), "running");
  BOOST_CHECK_EQUAL(value_of("up since"), format_time_of_day(t0) + " (3 min 12 s)");
  BOOST_CHECK_EQUAL(value_of("mailbox"), "3");
  BOOST_CHECK_EQUAL(value_of("messages handled"), "1234");
  BOOST_CHECK_EQUAL(value_of("restarts"), "2");
  BOOST_CHECK_EQUAL(value_of("last error"), "worker crashed: \"illegal memory access\"");
  BOOST_CHECK_EQUAL(value_of("queue"), "5");
  BOOST_CHECK_EQUAL(value_of("policy version"), "12");
  BOOST_CHECK_EQUAL(value_of("commands"), "restart, drain");
  // Values line up after the longest key ("messages handled").
  const size_t value_at = std::string{"messages handled:"}.size() + 2;
  for (const char* key : {"actor", "state", "messages handled", "policy version", "commands"})
    BOOST_CHECK_EQUAL(line_starting(text, std::string{key} + ":").find_first_not_of(' ', value_at - 1),
                      value_at);

  // No error, no commands: a dash, and no commands line.
  st.last_error.clear();
  st.commands.clear();
  text = render_status(st, t0);
  BOOST_CHECK_EQUAL(value_of("last error"), "-");
  BOOST_CHECK(line_starting(text, "commands:").empty());
}

// -- the same as JSON -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(render_nodes_json_parses) {
  auto view = sample_view();
  view.nodes[2].down_reason = "connection lost (\"killed\"\\\n)"; // needs escaping
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(render_nodes_json(view));
  BOOST_CHECK_EQUAL(str(doc["cluster"]), "test-cluster");
  BOOST_CHECK_EQUAL(str(doc["coordinator"]), "head");
  BOOST_CHECK_EQUAL(uint64_t(doc["revision"]), 7u);
  simdjson::dom::array nodes = doc["nodes"];
  BOOST_REQUIRE_EQUAL(nodes.size(), 3u);

  simdjson::dom::element head = nodes.at(0);
  BOOST_CHECK_EQUAL(str(head["name"]), "head");
  BOOST_CHECK_EQUAL(str(head["state"]), "up");
  BOOST_CHECK_EQUAL(str(head["host"]), "127.0.0.1");
  BOOST_CHECK_EQUAL(int64_t(head["port"]), 4242);
  BOOST_CHECK_EQUAL(int64_t(head["pid"]), 1234);
  BOOST_CHECK_EQUAL(int64_t(head["incarnation"]), 1);
  BOOST_CHECK_EQUAL(int64_t(head["joined_unix_ms"]), t0);
  BOOST_CHECK_EQUAL(int64_t(head["last_seen_unix_ms"]), t0 + 58'500);
  BOOST_CHECK_EQUAL(int64_t(head["down_unix_ms"]), 0);
  BOOST_CHECK_EQUAL(str(head["down_reason"]), "");
  BOOST_CHECK_EQUAL(str(head["devices"]), "1 CUDA device (gpu 0)");
  BOOST_CHECK_EQUAL(str(head["torch_version"]), "2.1.0");
  BOOST_CHECK(strings(head["roles"]) == words{"learner"});
  BOOST_CHECK((strings(head["actors"]) == words{"head/learner", "head/metrics"}));
  simdjson::dom::array head_gpus = head["gpus"];
  BOOST_REQUIRE_EQUAL(head_gpus.size(), 1u);
  BOOST_CHECK_EQUAL(int64_t(head_gpus.at(0)), 0);

  simdjson::dom::element gpu1 = nodes.at(1);
  BOOST_CHECK_EQUAL(str(gpu1["name"]), "gpu1");
  BOOST_CHECK_EQUAL(int64_t(gpu1["incarnation"]), 3);
  BOOST_CHECK((strings(gpu1["roles"]) == words{"sampler", "evaluator"}));
  simdjson::dom::array gpus = gpu1["gpus"];
  BOOST_REQUIRE_EQUAL(gpus.size(), 2u);
  BOOST_CHECK_EQUAL(int64_t(gpus.at(0)), 1);
  BOOST_CHECK_EQUAL(int64_t(gpus.at(1)), 2);
  BOOST_CHECK_EQUAL(strings(gpu1["actors"]).size(), 3u);

  simdjson::dom::element cpu1 = nodes.at(2);
  BOOST_CHECK_EQUAL(str(cpu1["state"]), "down");
  BOOST_CHECK_EQUAL(str(cpu1["down_reason"]), "connection lost (\"killed\"\\\n)");
  BOOST_CHECK_EQUAL(int64_t(cpu1["down_unix_ms"]), t0 + 7001);
  BOOST_CHECK_EQUAL(simdjson::dom::array(cpu1["gpus"]).size(), 0u);
}

BOOST_AUTO_TEST_CASE(render_nodes_json_of_an_empty_view) {
  membership_view v;
  v.cluster = "c";
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(render_nodes_json(v));
  BOOST_CHECK_EQUAL(str(doc["cluster"]), "c");
  BOOST_CHECK_EQUAL(simdjson::dom::array(doc["nodes"]).size(), 0u);
}

BOOST_AUTO_TEST_CASE(render_actors_json_parses) {
  auto view = sample_view();
  simdjson::dom::parser parser;
  simdjson::dom::array all = parser.parse(render_actors_json(view, ""));
  BOOST_REQUIRE_EQUAL(all.size(), 6u);
  simdjson::dom::element first = all.at(0);
  BOOST_CHECK_EQUAL(str(first["name"]), "head/learner");
  BOOST_CHECK_EQUAL(str(first["role"]), "learner");
  BOOST_CHECK_EQUAL(str(first["node"]), "head");
  BOOST_CHECK_EQUAL(str(first["node_state"]), "up");
  simdjson::dom::element last = all.at(5);
  BOOST_CHECK_EQUAL(str(last["name"]), "cpu1/evaluator.0");
  BOOST_CHECK_EQUAL(str(last["node_state"]), "down");

  simdjson::dom::parser parser2;
  simdjson::dom::array one = parser2.parse(render_actors_json(view, "gpu1"));
  BOOST_REQUIRE_EQUAL(one.size(), 3u);
  for (auto a : one)
    BOOST_CHECK_EQUAL(str(a["node"]), "gpu1");
  BOOST_CHECK_EQUAL(str(one.at(1)["role"]), "evaluator-supervisor");

  BOOST_CHECK_EQUAL(render_actors_json(view, "nobody"), "[]");
}

BOOST_AUTO_TEST_CASE(render_status_json_parses) {
  auto st = sample_status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(render_status_json(st));
  BOOST_CHECK_EQUAL(str(doc["name"]), "gpu1/evaluator.0");
  BOOST_CHECK_EQUAL(str(doc["role"]), "evaluator");
  BOOST_CHECK_EQUAL(str(doc["node"]), "gpu1");
  BOOST_CHECK_EQUAL(str(doc["state"]), "running");
  BOOST_CHECK_EQUAL(uint64_t(doc["mailbox_size"]), 3u);
  BOOST_CHECK_EQUAL(uint64_t(doc["messages_handled"]), 1234u);
  BOOST_CHECK_EQUAL(uint64_t(doc["restarts"]), 2u);
  BOOST_CHECK_EQUAL(str(doc["last_error"]), st.last_error); // quotes and newline survive
  BOOST_CHECK_EQUAL(int64_t(doc["since_unix_ms"]), t0);
  simdjson::dom::object details = doc["details"];
  BOOST_CHECK_EQUAL(details.size(), 2u);
  BOOST_CHECK_EQUAL(str(details["queue"]), "5");
  BOOST_CHECK_EQUAL(str(details["policy version"]), "12");
  BOOST_CHECK((strings(doc["commands"]) == words{"restart", "drain"}));

  // Empty details and commands are still an object and an array.
  st.details.clear();
  st.commands.clear();
  simdjson::dom::parser parser2;
  simdjson::dom::element bare = parser2.parse(render_status_json(st));
  BOOST_CHECK_EQUAL(simdjson::dom::object(bare["details"]).size(), 0u);
  BOOST_CHECK_EQUAL(simdjson::dom::array(bare["commands"]).size(), 0u);
}

// -- json_writer ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(json_writer_commas_in_nested_containers) {
  json_writer w;
  w.begin_object()
    .field("a", int64_t{1})
    .field("b", "x");
  w.key("list").begin_array();
  w.value(int64_t{1}).value(true);
  w.begin_object().end_object();
  w.begin_object().field("k", false).key("n").null().end_object();
  w.begin_array().end_array();
  w.begin_array().value("in").begin_array().value(uint64_t{2}).end_array().end_array();
  w.end_array();
  w.key("empty").begin_object().end_object();
  w.field("last", "z").end_object();
  const std::string expected =
    R"({"a":1,"b":"x","list":[1,true,{},{"k":false,"n":null},[],["in",[2]]],"empty":{},"last":"z"})";
  BOOST_CHECK_EQUAL(w.str(), expected);

  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(w.str());
  BOOST_CHECK_EQUAL(int64_t(doc["a"]), 1);
  simdjson::dom::array list = doc["list"];
  BOOST_REQUIRE_EQUAL(list.size(), 6u);
  BOOST_CHECK(list.at(3)["n"].is_null());
  BOOST_CHECK_EQUAL(uint64_t(list.at(5).at(1).at(0)), 2u);
  BOOST_CHECK_EQUAL(str(doc["last"]), "z");
}

BOOST_AUTO_TEST_CASE(json_writer_top_level_array_of_objects) {
  json_writer w;
  w.begin_array();
  for (int i = 0; i < 3; ++i)
    w.begin_object().field("i", i).end_object();
  w.end_array();
  BOOST_CHECK_EQUAL(w.str(), R"([{"i":0},{"i":1},{"i":2}])");
}

BOOST_AUTO_TEST_CASE(json_writer_escapes_strings) {
  const std::string nasty = std::string{"say \"hi\" \\ path\\to\n\t\r"} + '\x01' + '\x1f' + '\b'
                            + '\f' + std::string(1, '\0') + "end";
  json_writer w;
  w.begin_object().field(nasty, nasty).end_object();
  // Quotes and backslashes escaped, the usual controls by name, the others as \u00XX.
  const std::string quoted =
    R"("say \"hi\" \\ path\\to\n\t\r\u0001\u001f\u0008\u000c\u0000end")";
  BOOST_CHECK_EQUAL(w.str(), "{" + quoted + ":" + quoted + "}");
  for (char c : w.str())
    BOOST_CHECK(static_cast<unsigned char>(c) >= 0x20); // no raw control character left

  simdjson::dom::parser parser;
  simdjson::dom::object doc = parser.parse(w.str());
  BOOST_REQUIRE_EQUAL(doc.size(), 1u);
  for (auto [key, value] : doc) {
    BOOST_CHECK(std::string{key} == nasty);
    BOOST_CHECK(str(value) == nasty);
  }
}

BOOST_AUTO_TEST_CASE(json_writer_passes_utf8_through) {
  const std::string text = "µs → ✓ 日本";
  std::string out;
  append_json_string(out, text);
  BOOST_CHECK_EQUAL(out, "\"" + text + "\"");
  simdjson::dom::parser parser;
  BOOST_CHECK_EQUAL(str(parser.parse(out)), text);
}

BOOST_AUTO_TEST_CASE(json_writer_numbers) {
  const double inf = std::numeric_limits<double>::infinity();
  json_writer w;
  w.begin_array()
    .value(std::nan(""))
    .value(inf)
    .value(-inf)
    .value(0.1)
    .value(-2.5)
    .value(1e300)
    .value(1.0)
    .value(std::numeric_limits<int64_t>::min())
    .value(std::numeric_limits<uint64_t>::max())
    .value(int32_t{-7})
    .value(uint32_t{4'000'000'000u})
    .end_array();
  // Non-finite doubles have no JSON spelling: null.
  BOOST_CHECK_EQUAL(w.str().rfind("[null,null,null,", 0), 0u);

  simdjson::dom::parser parser;
  simdjson::dom::array a = parser.parse(w.str());
  BOOST_REQUIRE_EQUAL(a.size(), 11u);
  BOOST_CHECK(a.at(0).is_null());
  BOOST_CHECK(a.at(1).is_null());
  BOOST_CHECK(a.at(2).is_null());
  // Doubles are written with 17 significant digits: they read back exactly (tolerance 0).
  BOOST_CHECK_EQUAL(double(a.at(3)), 0.1);
  BOOST_CHECK_EQUAL(double(a.at(4)), -2.5);
  BOOST_CHECK_EQUAL(double(a.at(5)), 1e300);
  BOOST_CHECK_EQUAL(double(a.at(6)), 1.0);
  BOOST_CHECK_EQUAL(int64_t(a.at(7)), std::numeric_limits<int64_t>::min());
  BOOST_CHECK_EQUAL(uint64_t(a.at(8)), std::numeric_limits<uint64_t>::max());
  BOOST_CHECK_EQUAL(int64_t(a.at(9)), -7);
  BOOST_CHECK_EQUAL(uint64_t(a.at(10)), 4'000'000'000u);
}

BOOST_AUTO_TEST_CASE(json_writer_field_shorthand) {
  json_writer a, b;
  a.begin_object().field("x", 1.5).field("y", std::string{"s"}).end_object();
  b.begin_object().key("x").value(1.5).key("y").value("s").end_object();
  BOOST_CHECK_EQUAL(a.str(), b.str());
  BOOST_CHECK_EQUAL(a.str(), R"({"x":1.5,"y":"s"})");
}

BOOST_AUTO_TEST_SUITE_END()
