#pragma once
// The cluster manifest: which nodes form a kbrl cluster, where they listen, which roles and GPUs
// each one has, which node coordinates, and how the nodes authenticate each other (TLS).
// config/cluster.example.toml documents every key. A manifest is loaded and validated as a
// whole: load_manifest() reports every problem it finds, one per line, each naming the file, the
// line, the dotted key (`node[1].port`) and what was expected.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::config {

/// The role names a [[node]] may list: "learner", "sampler", "evaluator", "builder", and "all"
/// (every role but builder).
const std::vector<std::string>& known_roles();

/// One [[node]] of the manifest: a kbrl-node process.
struct node_spec {
  /// Unique name of the node, made of [A-Za-z0-9_.-]. Required.
  std::string name;
  /// Host name or address other nodes use to reach this node. Required, non-empty.
  std::string host;
  /// TCP port the node listens on, 1..65535; (host, port) is unique in the cluster. Required.
  uint16_t port = 0;
  /// Roles the node runs, each one of known_roles(); non-empty. Required.
  std::vector<std::string> roles;
  /// CUDA device indices (>= 0, distinct) this node may use; a (host, index) pair belongs to one
  /// node only, unless every node listing it sets share_gpus. Default: none.
  std::vector<int> gpus;
  /// True: this node's GPUs may also be listed by other nodes of its host that set it too (on a
  /// small box, an evaluator node beside the learner's GPU). Default: false.
  bool share_gpus = false;
  /// This node's certificate (PEM), as an absolute path. Required when TLS is on, else may be
  /// empty.
  std::string certificate;
  /// The private key of `certificate` (PEM), as an absolute path. Required when TLS is on.
  std::string key;

  /// True if `roles` contains `role` or "all".
  bool has_role(const std::string& role) const;
};

/// The [security] and [shell] sections: how nodes and the shell authenticate.
struct security_spec {
  /// Without TLS: if true, nodes listen on all interfaces; if false (default), on 127.0.0.1 only,
  /// and the manifest may then only name loopback hosts. Ignored when TLS is on.
  bool allow_insecure = false;
  /// CA certificate (PEM) that signs every node certificate, as an absolute path; setting it
  /// turns TLS on. Default: empty (no TLS).
  std::string ca_file;
  /// Certificate kbrl-shell presents when TLS is on ([shell] certificate), absolute; may be empty.
  std::string shell_certificate;
  /// Private key of shell_certificate ([shell] key), absolute; may be empty.
  std::string shell_key;

  /// True if nodes talk TLS, i.e. ca_file is set.
  bool tls() const { return !ca_file.empty(); }
};

/// A validated cluster manifest. File paths inside it are absolute: relative paths in the file
/// were resolved against the manifest file's directory.
struct cluster_manifest {
  /// The file it was loaded from, as given to load_manifest() (empty for single_node_manifest()).
  std::string path;
  /// Name of the cluster ([cluster] name). Required.
  std::string name;
  /// Name of the node that coordinates the run; one of `nodes`. Required.
  std::string coordinator;
  /// Seconds between two heartbeats a node sends; > 0. Default 1.0.
  double heartbeat_interval_s = 1.0;
  /// Seconds of silence after which a node is marked down; > heartbeat_interval_s. Default 5.0.
  double node_timeout_s = 5.0;
  /// TLS and listening settings.
  security_spec security;
  /// Every [[node]], in file order; at least one.
  std::vector<node_spec> nodes;

  /// The node called `name`, or nullptr.
  const node_spec* find(const std::string& name) const;

  /// The coordinator's node. Precondition: the manifest was validated (throws std::logic_error
  /// if `coordinator` names no node).
  const node_spec& coordinator_node() const;
};

/// Field-wise equality.
bool operator==(const node_spec& a, const node_spec& b);
/// Field-wise inequality.
bool operator!=(const node_spec& a, const node_spec& b);
/// Field-wise equality.
bool operator==(const security_spec& a, const security_spec& b);
/// Field-wise inequality.
bool operator!=(const security_spec& a, const security_spec& b);
/// Field-wise equality, `path` included.
bool operator==(const cluster_manifest& a, const cluster_manifest& b);
/// Field-wise inequality, `path` included.
bool operator!=(const cluster_manifest& a, const cluster_manifest& b);

/// Reads and validates the manifest file at `path`. Fails with errc::invalid_config if the file
/// cannot be read or has any problem; the error text lists every problem, one per line, as
/// `path:line: key: what was expected`.
caf::expected<cluster_manifest> load_manifest(const std::string& path);

/// Validates the manifest `text` as if read from `path`: `path` names the file in errors and its
/// directory resolves relative certificate paths (the current directory if it has none).
caf::expected<cluster_manifest> parse_manifest(std::string_view text, const std::string& path);

/// The manifest used when none is given: cluster "kbrl-local" with one node "local" on
/// 127.0.0.1:`port`, roles ["all"], the given `gpus`, coordinating itself; no TLS, loopback only.
cluster_manifest single_node_manifest(uint16_t port, std::vector<int> gpus = {});

/// The manifest as TOML (written into the run directory as manifest.toml), with absolute paths;
/// parse_manifest(render_manifest(m), m.path) == m for every valid m.
std::string render_manifest(const cluster_manifest& manifest);

} // namespace kbrl::config
