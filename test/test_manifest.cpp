// Tests of the cluster manifest: what a good manifest reads as, and the exact error text (file,
// line, key, what was expected) for every kind of mistake the loader detects.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "test_support.hpp"
#include "runtime/config/manifest.hpp"
#include "cluster_fixture.hpp"

#include <caf/atom.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using namespace kbrl::config;
using kbrl::test::temp_dir;
using kbrl::test::why;

namespace {

/// A CA and certificates for `names` (plus the shell's) in `out`, as users make them.
void make_certificates(const std::filesystem::path& out, std::vector<std::string> names) {
  std::vector<std::string> argv{kbrl::test::source_dir() + "/tools/make-certs.sh", out.string()};
  argv.insert(argv.end(), names.begin(), names.end());
  auto made = kbrl::test::run_command(argv, 60);
  BOOST_REQUIRE_MESSAGE(made.code == 0, made.output);
}

} // namespace

namespace {

/// The text of an invalid_config error (without the "invalid_config: " prefix).
std::string error_text(const caf::error& err) {
  BOOST_REQUIRE(err);
  BOOST_CHECK(err.category() == caf::atom("kbrl"));
  BOOST_CHECK_EQUAL(err.code(), static_cast<uint8_t>(kbrl::errc::invalid_config));
  BOOST_REQUIRE(err.context().match_elements<std::string>());
  return err.context().get_as<std::string>(0);
}

/// The error text of a manifest that must not parse.
std::string parse_error(const std::string& text) {
  auto m = parse_manifest(text, "cluster.toml");
  BOOST_REQUIRE_MESSAGE(!m, "the manifest parsed but should not have:\n" + text);
  return error_text(m.error());
}

const char* const good = R"([cluster]
name = "test-cluster"
coordinator = "head"
heartbeat_interval_s = 2
node_timeout_s = 10.5

[[node]]
name = "head"
host = "127.0.0.1"
port = 4242
roles = ["learner"]
gpus = [0, 1]

[[node]]
name = "worker-1"
host = "localhost"
port = 4243
roles = ["sampler", "evaluator"]
)";

} // namespace

BOOST_AUTO_TEST_SUITE(manifest)

BOOST_AUTO_TEST_CASE(good_manifest_reads_every_value) {
  auto m = parse_manifest(good, "dir/cluster.toml");
  BOOST_REQUIRE_MESSAGE(m, why(m));
  BOOST_CHECK_EQUAL(m->path, "dir/cluster.toml");
  BOOST_CHECK_EQUAL(m->name, "test-cluster");
  BOOST_CHECK_EQUAL(m->coordinator, "head");
  BOOST_CHECK_EQUAL(m->heartbeat_interval_s, 2.0); // an integer is accepted for seconds
  BOOST_CHECK_EQUAL(m->node_timeout_s, 10.5);
  BOOST_CHECK(!m->security.allow_insecure);
  BOOST_CHECK(!m->security.tls());
  BOOST_REQUIRE_EQUAL(m->nodes.size(), 2u);
  const node_spec& head = m->nodes[0];
  BOOST_CHECK_EQUAL(head.name, "head");
  BOOST_CHECK_EQUAL(head.host, "127.0.0.1");
  BOOST_CHECK_EQUAL(head.port, 4242);
  BOOST_CHECK(head.roles == std::vector<std::string>{"learner"});
  BOOST_CHECK(head.gpus == (std::vector<int>{0, 1}));
  BOOST_CHECK(head.certificate.empty() && head.key.empty());
  const node_spec& worker = m->nodes[1];
  BOOST_CHECK_EQUAL(worker.name, "worker-1");
  BOOST_CHECK(worker.roles == (std::vector<std::string>{"sampler", "evaluator"}));
  BOOST_CHECK(worker.gpus.empty()); // default
  BOOST_CHECK_EQUAL(&m->coordinator_node(), &m->nodes[0]);
  BOOST_CHECK_EQUAL(m->find("worker-1"), &m->nodes[1]);
  BOOST_CHECK(m->find("nobody") == nullptr);
}

BOOST_AUTO_TEST_CASE(defaults_apply_when_optional_keys_are_left_out) {
  auto m = parse_manifest(R"([cluster]
name = "c"
coordinator = "a"
[[node]]
name = "a"
host = "127.0.0.1"
port = 1
roles = ["all"]
)",
                          "cluster.toml");
  BOOST_REQUIRE_MESSAGE(m, why(m));
  BOOST_CHECK_EQUAL(m->heartbeat_interval_s, 1.0);
  BOOST_CHECK_EQUAL(m->node_timeout_s, 5.0);
  BOOST_CHECK(!m->security.allow_insecure);
  BOOST_CHECK(m->security.ca_file.empty());
}

BOOST_AUTO_TEST_CASE(has_role_honours_all) {
  node_spec n;
  n.roles = {"sampler"};
  BOOST_CHECK(n.has_role("sampler"));
  BOOST_CHECK(!n.has_role("learner"));
  n.roles = {"all"};
  BOOST_CHECK(n.has_role("learner") && n.has_role("evaluator") && n.has_role("sampler"));
}

BOOST_AUTO_TEST_CASE(example_manifest_loads) {
  const std::string path = std::string{KBRL_SOURCE_DIR} + "/config/cluster.example.toml";
  auto m = load_manifest(path);
  BOOST_REQUIRE_MESSAGE(m, why(m));
  BOOST_CHECK_EQUAL(m->coordinator_node().name, "head");
  BOOST_CHECK_EQUAL(m->nodes.size(), 2u);
  // The example documents every key (ca_file, certificate, ... as comments).
  std::ifstream in(path);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (const char* key : {"name", "coordinator", "heartbeat_interval_s", "node_timeout_s",
                          "allow_insecure", "ca_file", "[shell]", "certificate", "key", "host",
                          "port", "roles", "gpus", "share_gpus"})
    BOOST_CHECK_MESSAGE(text.find(key) != std::string::npos, key);
}

BOOST_AUTO_TEST_CASE(missing_file_is_an_error) {
  auto m = load_manifest("/nonexistent/kbrl/cluster.toml");
  BOOST_REQUIRE(!m);
  BOOST_CHECK_EQUAL(error_text(m.error()),
                    "/nonexistent/kbrl/cluster.toml: cannot read the manifest: "
                    "No such file or directory");
}

BOOST_AUTO_TEST_CASE(syntax_error_names_line) {
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \n"),
                    "cluster.toml:3: TOML syntax error: Error while parsing key-value pair: "
                    "expected value, saw '\\n'");
}

BOOST_AUTO_TEST_CASE(wrong_type_names_line_key_and_value) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
name = "c"
coordinator = "head"

[[node]]
name = "head"
host = "127.0.0.1"
port = 4242
roles = ["all"]
[[node]]
name = "worker"
port = "abc"
host = "127.0.0.1"
roles = ["sampler"]
)"),
                    "cluster.toml:12: node[1].port: expected an integer from 1 to 65535, "
                    "got \"abc\"");
}

BOOST_AUTO_TEST_CASE(more_wrong_types_and_values) {
  const std::string head = "[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"
                           "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\nroles = [\"all\"]\n";
  BOOST_CHECK_EQUAL(parse_error(head + "port = 70000\n"),
                    "cluster.toml:8: node[0].port: expected an integer from 1 to 65535, "
                    "got 70000");
  BOOST_CHECK_EQUAL(parse_error(head + "port = 1\ngpus = [0, -1]\n"),
                    "cluster.toml:9: node[0].gpus[1]: expected a GPU index (an integer >= 0), "
                    "got -1");
  BOOST_CHECK_EQUAL(parse_error(head + "port = 1\ngpus = 0\n"),
                    "cluster.toml:9: node[0].gpus: expected an array of GPU indices such as "
                    "[0, 1], got 0");
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = 3\ncoordinator = \"a\"\n"
                                "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\nport = 1\n"
                                "roles = [\"all\"]\n"),
                    "cluster.toml:2: cluster.name: expected a non-empty string, got 3");
  BOOST_CHECK_EQUAL(parse_error(head + "port = 1\n[security]\nallow_insecure = \"yes\"\n"),
                    "cluster.toml:10: security.allow_insecure: expected true or false, "
                    "got \"yes\"");
  BOOST_CHECK_EQUAL(parse_error("cluster = 1\n[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\n"
                                "port = 1\nroles = [\"all\"]\n"),
                    "cluster.toml:1: cluster: expected a table ([cluster]), got 1");
}

BOOST_AUTO_TEST_CASE(bad_node_names_and_roles) {
  const std::string cluster = "[cluster]\nname = \"c\"\ncoordinator = \"a\"\n";
  BOOST_CHECK_EQUAL(parse_error(cluster + "[[node]]\nname = \"a b\"\nhost = \"127.0.0.1\"\n"
                                          "port = 1\nroles = [\"all\"]\n"),
                    "cluster.toml:5: node[0].name: expected a name made of letters, digits, "
                    "'_', '.' and '-', got \"a b\"");
  BOOST_CHECK_EQUAL(parse_error(cluster + "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\n"
                                          "port = 1\nroles = [\"sampler\", \"learnr\"]\n"),
                    "cluster.toml:8: node[0].roles[1]: expected one of learner, sampler, "
                    "evaluator, builder, all, got \"learnr\" (did you mean 'learner'?)");
  BOOST_CHECK_EQUAL(parse_error(cluster + "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\n"
                                          "port = 1\nroles = []\n"),
                    "cluster.toml:8: node[0].roles: expected a non-empty array of roles "
                    "(learner, sampler, evaluator, builder, all), got []");
  BOOST_CHECK_EQUAL(parse_error(cluster + "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\n"
                                          "port = 1\nroles = [\"all\", \"all\"]\n"),
                    "cluster.toml:8: node[0].roles[1]: role \"all\" is listed twice");
}

BOOST_AUTO_TEST_CASE(unknown_keys_suggest_the_closest_key) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
nmae = "c"
name = "c"
coordinator = "a"
[[node]]
name = "a"
host = "127.0.0.1"
port = 1
prot = 2
roles = ["all"]
[clutser]
x = 1
[unrelated]
)"),
                    "cluster.toml:2: cluster.nmae: unknown key (did you mean 'cluster.name'?)\n"
                    "cluster.toml:9: node[0].prot: unknown key (did you mean 'node[0].port'?)\n"
                    "cluster.toml:11: clutser: unknown key (did you mean 'cluster'?)\n"
                    "cluster.toml:13: unrelated: unknown key");
}

BOOST_AUTO_TEST_CASE(missing_required_keys_name_the_enclosing_table) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
coordinator = "a"

[[node]]
name = "a"
roles = ["all"]
)"),
                    "cluster.toml:1: cluster.name: required key is missing: expected a "
                    "non-empty string\n"
                    "cluster.toml:4: node[0].host: required key is missing: expected a host "
                    "name or address\n"
                    "cluster.toml:4: node[0].port: required key is missing: expected an "
                    "integer from 1 to 65535");
  BOOST_CHECK_EQUAL(parse_error("[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\nport = 1\n"
                                "roles = [\"all\"]\n"),
                    "cluster.toml: cluster: required table [cluster] is missing (it needs name "
                    "and coordinator)");
}

BOOST_AUTO_TEST_CASE(no_nodes_is_an_error) {
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"),
                    "cluster.toml: node: at least one [[node]] is required");
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \"a\"\n[node]\n"
                                "name = \"a\"\n"),
                    "cluster.toml:4: node: expected an array of tables, written [[node]] (one "
                    "per node), got a table");
}

BOOST_AUTO_TEST_CASE(duplicate_names_endpoints_and_gpus) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
name = "c"
coordinator = "a"
[[node]]
name = "a"
host = "127.0.0.1"
port = 4242
roles = ["all"]
gpus = [0, 1, 0]
[[node]]
name = "a"
host = "127.0.0.1"
port = 4242
roles = ["sampler"]
gpus = [1]
[[node]]
name = "b"
host = "localhost"
port = 4242
roles = ["sampler"]
gpus = [0]
)"),
                    "cluster.toml:9: node[0].gpus[2]: GPU 0 is listed twice\n"
                    "cluster.toml:11: node[1].name: node name \"a\" is already used by node[0] "
                    "(line 5)\n"
                    "cluster.toml:13: node[1].port: 127.0.0.1:4242 is already used by node[0] "
                    "\"a\" (127.0.0.1:4242)\n"
                    "cluster.toml:15: node[1].gpus[0]: GPU 1 on host \"127.0.0.1\" is already "
                    "assigned to node[0] \"a\" (set share_gpus = true on both nodes to share "
                    "it)\n"
                    // localhost and 127.0.0.1 are one machine: one endpoint, one GPU 0
                    "cluster.toml:19: node[2].port: localhost:4242 is already used by node[0] "
                    "\"a\" (127.0.0.1:4242)\n"
                    "cluster.toml:21: node[2].gpus[0]: GPU 0 on host \"localhost\" is already "
                    "assigned to node[0] \"a\" (set share_gpus = true on both nodes to share "
                    "it)");
}

// A small box: an evaluator node on both GPUs beside the learner's node on GPU 0. Sharing is
// allowed only where every node listing the GPU says so.
BOOST_AUTO_TEST_CASE(nodes_of_a_host_share_a_gpu_only_when_both_say_so) {
  const std::string nodes = R"([cluster]
name = "c"
coordinator = "head"
[[node]]
name = "head"
host = "127.0.0.1"
port = 4242
roles = ["learner", "sampler"]
gpus = [0]
share_gpus = true
[[node]]
name = "ev"
host = "127.0.0.1"
port = 4243
roles = ["evaluator"]
gpus = [0, 1]
)";
  auto shared = parse_manifest(nodes + "share_gpus = true\n", "cluster.toml");
  BOOST_REQUIRE_MESSAGE(shared, why(shared));
  BOOST_CHECK(shared->nodes[0].share_gpus && shared->nodes[1].share_gpus);
  BOOST_CHECK(shared->nodes[1].gpus == (std::vector<int>{0, 1}));
  // Written out and read back, the key survives.
  auto again = parse_manifest(render_manifest(*shared), "cluster.toml");
  BOOST_REQUIRE_MESSAGE(again, why(again));
  BOOST_CHECK(again->nodes == shared->nodes);

  BOOST_CHECK_EQUAL(parse_error(nodes),
                    "cluster.toml:16: node[1].gpus[0]: GPU 0 on host \"127.0.0.1\" is already "
                    "assigned to node[0] \"head\" (set share_gpus = true on both nodes to share "
                    "it)");
  // A malformed share_gpus is its own error, and the GPU then counts as not shared.
  BOOST_CHECK_EQUAL(parse_error(nodes + "share_gpus = 1\n"),
                    "cluster.toml:16: node[1].gpus[0]: GPU 0 on host \"127.0.0.1\" is already "
                    "assigned to node[0] \"head\" (set share_gpus = true on both nodes to share "
                    "it)\n"
                    "cluster.toml:17: node[1].share_gpus: expected true or false, got 1");
}

BOOST_AUTO_TEST_CASE(same_gpu_index_on_different_hosts_is_fine) {
  auto m = parse_manifest(R"([cluster]
name = "c"
coordinator = "a"
[security]
allow_insecure = true
[[node]]
name = "a"
host = "10.0.0.1"
port = 4242
roles = ["all"]
gpus = [0]
[[node]]
name = "b"
host = "10.0.0.2"
port = 4242
roles = ["all"]
gpus = [0]
)",
                          "cluster.toml");
  BOOST_CHECK_MESSAGE(m, why(m));
}

BOOST_AUTO_TEST_CASE(coordinator_must_name_a_node) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
name = "c"
coordinator = "haed"
[[node]]
name = "head"
host = "127.0.0.1"
port = 1
roles = ["all"]
[[node]]
name = "tail"
host = "127.0.0.1"
port = 2
roles = ["all"]
)"),
                    "cluster.toml:3: cluster.coordinator: expected the name of a [[node]] "
                    "(head, tail), got \"haed\" (did you mean 'head'?)");
}

BOOST_AUTO_TEST_CASE(node_timeout_must_exceed_heartbeat) {
  const std::string node = "[[node]]\nname = \"a\"\nhost = \"127.0.0.1\"\nport = 1\n"
                           "roles = [\"all\"]\n";
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"
                                "heartbeat_interval_s = 2.0\nnode_timeout_s = 2\n" + node),
                    "cluster.toml:5: cluster.node_timeout_s: expected a number of seconds > "
                    "heartbeat_interval_s (2.0), got 2.0");
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"
                                "heartbeat_interval_s = 6\n" + node),
                    "cluster.toml:4: cluster.node_timeout_s: expected a number of seconds > "
                    "heartbeat_interval_s (6.0), got 5.0 (the default)");
  BOOST_CHECK_EQUAL(parse_error("[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"
                                "heartbeat_interval_s = 0\n" + node),
                    "cluster.toml:4: cluster.heartbeat_interval_s: expected a number of seconds "
                    "> 0, got 0");
}

BOOST_AUTO_TEST_CASE(remote_hosts_need_tls_or_allow_insecure) {
  const std::string text = R"([cluster]
name = "c"
coordinator = "a"
[[node]]
name = "a"
host = "gpu-box-1"
port = 1
roles = ["all"]
)";
  BOOST_CHECK_EQUAL(parse_error(text),
                    "cluster.toml:6: node[0].host: expected a loopback host (127.0.0.1, "
                    "localhost, ::1), got \"gpu-box-1\": without TLS nodes listen on 127.0.0.1 "
                    "only; set security.ca_file to use TLS, or security.allow_insecure = true");
  auto m = parse_manifest(text + "[security]\nallow_insecure = true\n", "cluster.toml");
  BOOST_REQUIRE_MESSAGE(m, why(m));
  BOOST_CHECK(m->security.allow_insecure);
}

BOOST_AUTO_TEST_CASE(tls_paths_resolve_against_the_manifest_directory) {
  temp_dir dir;
  make_certificates(dir.path / "certs", {"a"});
  const std::string path = dir.write("conf/cluster.toml", R"([cluster]
name = "c"
coordinator = "a"
[security]
ca_file = "../certs/ca.pem"
[shell]
certificate = "../certs/shell.pem"
key = ")" + (dir.path / "certs/shell.key").string() + R"("
[[node]]
name = "a"
host = "gpu-box-1"
port = 1
roles = ["all"]
certificate = "../certs/a.pem"
key = "../certs/a.key"
)");
  auto m = load_manifest(path);
  BOOST_REQUIRE_MESSAGE(m, why(m));
  const std::string certs = (dir.path / "certs").string();
  BOOST_CHECK(m->security.tls());
  BOOST_CHECK_EQUAL(m->security.ca_file, certs + "/ca.pem");
  BOOST_CHECK_EQUAL(m->security.shell_certificate, certs + "/shell.pem");
  BOOST_CHECK_EQUAL(m->security.shell_key, certs + "/shell.key"); // absolute stays as is
  BOOST_CHECK_EQUAL(m->nodes[0].certificate, certs + "/a.pem");
  BOOST_CHECK_EQUAL(m->nodes[0].key, certs + "/a.key");
  // Rendered with absolute paths, it reads back the same from anywhere.
  auto copy = parse_manifest(render_manifest(*m), path);
  BOOST_REQUIRE_MESSAGE(copy, why(copy));
  BOOST_CHECK(*copy == *m);
}

BOOST_AUTO_TEST_CASE(tls_files_must_exist_and_nodes_need_them) {
  temp_dir dir;
  make_certificates(dir.path, {"a"});
  const std::string path = dir.write("cluster.toml", R"([cluster]
name = "c"
coordinator = "a"
[security]
ca_file = "ca.pem"
[[node]]
name = "a"
host = "127.0.0.1"
port = 1
roles = ["all"]
certificate = "a.pem"
key = "missing.key"
[[node]]
name = "b"
host = "127.0.0.1"
port = 2
roles = ["all"]
)");
  auto m = load_manifest(path);
  BOOST_REQUIRE(!m);
  BOOST_CHECK_EQUAL(error_text(m.error()),
                    path + ":12: node[0].key: file not found: "
                      + (dir.path / "missing.key").string() + "\n" + path
                      + ":13: node[1].certificate: required key is missing: expected a path to "
                        "a PEM file (required when security.ca_file is set)\n"
                      + path + ":13: node[1].key: required key is missing: expected a path to "
                      "the certificate's private key (PEM)");
  // Without TLS, certificate paths are not checked.
  const std::string plain = dir.write("plain.toml", R"([cluster]
name = "c"
coordinator = "a"
[[node]]
name = "a"
host = "127.0.0.1"
port = 1
roles = ["all"]
key = "missing.key"
)");
  BOOST_CHECK_MESSAGE(load_manifest(plain), "without TLS the key file need not exist");
}

BOOST_AUTO_TEST_CASE(tls_files_must_hold_what_their_key_says) {
  temp_dir dir;
  make_certificates(dir.path / "good", {"a", "b"});
  dir.write("noise.pem", std::string("\x13\x9c random bytes, not PEM \xff\x01", 34));
  auto manifest = [&](const std::string& ca, const std::string& cert, const std::string& key) {
    return dir.write("cluster.toml", "[cluster]\nname = \"c\"\ncoordinator = \"a\"\n"
                                     "[security]\nca_file = \"" + ca + "\"\n[[node]]\n"
                                     "name = \"a\"\nhost = \"127.0.0.1\"\nport = 1\n"
                                     "roles = [\"all\"]\ncertificate = \"" + cert + "\"\n"
                                     "key = \"" + key + "\"\n");
  };
  auto error_of = [&](const std::string& path) {
    auto m = load_manifest(path);
    BOOST_REQUIRE_MESSAGE(!m, "accepted: " + path);
    return error_text(m.error());
  };
  auto path = manifest("noise.pem", "good/a.pem", "good/a.key");
  auto text = error_of(path);
  BOOST_CHECK_MESSAGE(text.find(path + ":5: security.ca_file: " + (dir.path / "noise.pem").string()
                                + ": not a PEM certificate") != std::string::npos, text);
  text = error_of(manifest("good/ca.pem", "good/a.pem", "noise.pem"));
  BOOST_CHECK_MESSAGE(text.find("node[0].key: ") != std::string::npos
                        && text.find("not a PEM private key") != std::string::npos, text);
  text = error_of(manifest("good/ca.pem", "good/a.key", "good/a.key")); // a key as certificate
  BOOST_CHECK_MESSAGE(text.find("node[0].certificate: ") != std::string::npos, text);
  text = error_of(manifest("good/ca.pem", "good/a.pem", "good/b.key")); // another node's key
  BOOST_CHECK_MESSAGE(text.find("is not the private key of the certificate") != std::string::npos,
                      text);
  auto fine = load_manifest(manifest("good/ca.pem", "good/a.pem", "good/a.key"));
  BOOST_CHECK_MESSAGE(fine, why(fine));
}

BOOST_AUTO_TEST_CASE(shell_certificate_and_key_go_together) {
  BOOST_CHECK_EQUAL(parse_error(R"([cluster]
name = "c"
coordinator = "a"
[shell]
certificate = "shell.pem"
[[node]]
name = "a"
host = "127.0.0.1"
port = 1
roles = ["all"]
)"),
                    "cluster.toml:5: shell.key: required key is missing: [shell] certificate "
                    "and key go together");
}

BOOST_AUTO_TEST_CASE(all_errors_are_reported_in_file_order) {
  const std::string text = parse_error(R"([cluster]
name = ""
coordinator = "a"
heartbeat_interval_s = -1

[[node]]
name = "a"
host = ""
port = 0
roles = ["cook"]
)");
  BOOST_CHECK_EQUAL(text,
                    "cluster.toml:2: cluster.name: expected a non-empty string, got \"\"\n"
                    "cluster.toml:4: cluster.heartbeat_interval_s: expected a number of seconds "
                    "> 0, got -1\n"
                    "cluster.toml:8: node[0].host: expected a non-empty string, got \"\"\n"
                    "cluster.toml:9: node[0].port: expected an integer from 1 to 65535, got 0\n"
                    "cluster.toml:10: node[0].roles[0]: expected one of learner, sampler, "
                    "evaluator, builder, all, got \"cook\"");
}

BOOST_AUTO_TEST_CASE(render_round_trips) {
  auto m = parse_manifest(good, "cluster.toml");
  BOOST_REQUIRE_MESSAGE(m, why(m));
  const std::string text = render_manifest(*m);
  auto copy = parse_manifest(text, "cluster.toml");
  BOOST_REQUIRE_MESSAGE(copy, why(copy) + "\n" + text);
  BOOST_CHECK(*copy == *m);
  // Odd but valid values survive too.
  m->name = "quote \" and backslash \\ and tab \t";
  m->heartbeat_interval_s = 0.1;
  m->node_timeout_s = 1e-300 + 0.30000000000000004;
  m->security.allow_insecure = true;
  copy = parse_manifest(render_manifest(*m), "cluster.toml");
  BOOST_REQUIRE_MESSAGE(copy, why(copy));
  BOOST_CHECK(*copy == *m);
}

BOOST_AUTO_TEST_CASE(single_node_manifest_is_valid) {
  const cluster_manifest m = single_node_manifest(4321, {0, 2});
  BOOST_CHECK_EQUAL(m.coordinator_node().name, "local");
  BOOST_CHECK_EQUAL(m.nodes.at(0).host, "127.0.0.1");
  BOOST_CHECK_EQUAL(m.nodes.at(0).port, 4321);
  BOOST_CHECK(m.nodes.at(0).has_role("learner"));
  BOOST_CHECK(!m.security.tls() && !m.security.allow_insecure);
  auto copy = parse_manifest(render_manifest(m), m.path);
  BOOST_REQUIRE_MESSAGE(copy, why(copy));
  BOOST_CHECK(*copy == m);
  BOOST_CHECK(copy->nodes.at(0).gpus == (std::vector<int>{0, 2}));
}

BOOST_AUTO_TEST_SUITE_END()
