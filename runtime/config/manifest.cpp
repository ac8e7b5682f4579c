#include "runtime/config/manifest.hpp"

#include "runtime/config/toml_util.hpp"
#include "runtime/io/text.hpp"

#include "runtime/config/config_error.hpp"
#include "runtime/config/pem_files.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace kbrl::config {

namespace {

namespace fs = std::filesystem;

const char* const port_expected = "expected an integer from 1 to 65535";
const char* const name_expected = "expected a name made of letters, digits, '_', '.' and '-'";

bool is_valid_node_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
         });
}

/// True for the names under which a node bound to 127.0.0.1 can be reached.
bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

/// The machine a host name means, as far as the manifest alone can tell: every loopback
/// spelling (localhost, 127.x.x.x, ::1) is this machine, and names ignore case and a trailing
/// dot. Nodes listen on all of loopback or on every address, so two loopback spellings with one
/// port are one endpoint.
std::string machine_of(std::string host) {
  if (is_loopback_host(host))
    return "loopback";
  if (!host.empty() && host.back() == '.')
    host.pop_back();
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return host;
}

/// Reads one manifest, recording every problem in `errors` instead of stopping at the first.
class manifest_reader {
public:
  explicit manifest_reader(const std::string& path) : errors(path) {
    base_dir_ = fs::path(path).parent_path();
  }

  config_errors errors;

  /// Reports every key of `table` that is not in `allowed`; `prefix` is the dotted path of the
  /// table ("cluster", "node[1]").
  void check_keys(const toml::table& table, const std::string& prefix,
                  const std::vector<std::string>& allowed) {
    for (auto&& [key, value] : table) {
      const std::string name{key.str()};
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end())
        continue;
      std::vector<std::string> dotted;
      for (const auto& a : allowed)
        dotted.push_back(prefix.empty() ? a : prefix + "." + a);
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      errors.add(line_of(key), full, "unknown key" + did_you_mean(full, dotted));
    }
  }

  /// The node at `key`, or nullptr; reports it missing (at the table's line) if `required`.
  const toml::node* field(const toml::table& table, const char* key, const std::string& dotted,
                          bool required, const std::string& expected) {
    const toml::node* n = table.get(key);
    if (n == nullptr && required)
      errors.add(line_of(table), dotted, "required key is missing: " + expected);
    return n;
  }

  std::optional<std::string> read_string(const toml::node* n, const std::string& dotted,
                                         bool non_empty) {
    if (n == nullptr)
      return std::nullopt;
    const std::string expected = non_empty ? "expected a non-empty string" : "expected a string";
    if (!n->is_string() || (non_empty && n->as_string()->get().empty())) {
      errors.add(line_of(*n), dotted, expected + ", got " + got(*n));
      return std::nullopt;
    }
    return n->as_string()->get();
  }

  std::optional<bool> read_bool(const toml::node* n, const std::string& dotted) {
    if (n == nullptr)
      return std::nullopt;
    if (!n->is_boolean()) {
      errors.add(line_of(*n), dotted, "expected true or false, got " + got(*n));
      return std::nullopt;
    }
    return n->as_boolean()->get();
  }

  /// A float or integer that is finite and > 0.
  std::optional<double> read_positive_seconds(const toml::node* n, const std::string& dotted) {
    if (n == nullptr)
      return std::nullopt;
    std::optional<double> value;
    if (n->is_integer())
      value = static_cast<double>(n->as_integer()->get());
    else if (n->is_floating_point())
      value = n->as_floating_point()->get();
    if (!value || !std::isfinite(*value) || *value <= 0) {
      errors.add(line_of(*n), dotted, "expected a number of seconds > 0, got " + got(*n));
      return std::nullopt;
    }
    return value;
  }

  std::optional<uint16_t> read_port(const toml::node* n, const std::string& dotted) {
    if (n == nullptr)
      return std::nullopt;
    if (!n->is_integer() || n->as_integer()->get() < 1 || n->as_integer()->get() > 65535) {
      errors.add(line_of(*n), dotted, std::string{port_expected} + ", got " + got(*n));
      return std::nullopt;
    }
    return static_cast<uint16_t>(n->as_integer()->get());
  }

  /// A non-empty array of distinct role names.
  std::optional<std::vector<std::string>> read_roles(const toml::node* n,
                                                     const std::string& dotted) {
    if (n == nullptr)
      return std::nullopt;
    const std::string expected =
      "expected a non-empty array of roles (" + join(known_roles(), ", ") + ")";
    const toml::array* array = n->as_array();
    if (array == nullptr || array->empty()) {
      errors.add(line_of(*n), dotted, expected + ", got " + (array ? "[]" : got(*n)));
      return std::nullopt;
    }
    std::vector<std::string> roles;
    bool ok = true;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::string element_key = dotted + "[" + std::to_string(i) + "]";
      const auto& known = known_roles();
      if (!element.is_string()
          || std::find(known.begin(), known.end(), element.as_string()->get()) == known.end()) {
        std::string what = "expected one of " + join(known, ", ") + ", got " + got(element);
        if (element.is_string())
          what += did_you_mean(element.as_string()->get(), known);
        errors.add(line_of(element), element_key, what);
        ok = false;
        continue;
      }
      const std::string role = element.as_string()->get();
      if (std::find(roles.begin(), roles.end(), role) != roles.end()) {
        errors.add(line_of(element), element_key, "role \"" + role + "\" is listed twice");
        ok = false;
        continue;
      }
      roles.push_back(role);
    }
    return ok ? std::optional{roles} : std::nullopt;
  }

  /// An array of distinct device indices >= 0. Bad or repeated elements are reported and left
  /// out; the rest is returned so that later checks still see them.
  std::optional<std::vector<int>> read_gpus(const toml::node* n, const std::string& dotted) {
    if (n == nullptr)
      return std::vector<int>{};
    const toml::array* array = n->as_array();
    if (array == nullptr) {
      errors.add(line_of(*n), dotted,
                 "expected an array of GPU indices such as [0, 1], got " + got(*n));
      return std::nullopt;
    }
    std::vector<int> gpus;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::string element_key = dotted + "[" + std::to_string(i) + "]";
      if (!element.is_integer() || element.as_integer()->get() < 0
          || element.as_integer()->get() > std::numeric_limits<int>::max()) {
        errors.add(line_of(element), element_key,
                   "expected a GPU index (an integer >= 0), got " + got(element));
        continue;
      }
      const int gpu = static_cast<int>(element.as_integer()->get());
      if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
        errors.add(line_of(element), element_key,
                   "GPU " + std::to_string(gpu) + " is listed twice");
        continue;
      }
      gpus.push_back(gpu);
    }
    return gpus;
  }

  /// A file path, made absolute against the manifest's directory; with `must_exist`, the file
  /// must be a readable regular file. An empty string reads as "not set".
  /// A path (resolved against the manifest's folder); with must_exist the file must be a
  /// readable regular file, and with a pem kind hold that kind of PEM data.
  std::optional<std::string> read_path(const toml::node* n, const std::string& dotted,
                                       bool must_exist, std::optional<pem_kind> pem = {}) {
    auto text = read_string(n, dotted, /*non_empty=*/false);
    if (!text || text->empty())
      return text;
    const std::string resolved = resolve(*text);
    if (must_exist) {
      std::error_code ec;
      const auto status = fs::status(resolved, ec);
      if (!fs::exists(status)) {
        errors.add(line_of(*n), dotted, "file not found: " + resolved);
        return std::nullopt;
      }
      if (!fs::is_regular_file(status)) {
        errors.add(line_of(*n), dotted, "not a regular file: " + resolved);
        return std::nullopt;
      }
      std::ifstream in(resolved);
      if (!in) {
        errors.add(line_of(*n), dotted,
                   "file not readable: " + resolved + " (" + std::strerror(errno) + ")");
        return std::nullopt;
      }
      if (pem) {
        if (auto why = pem_problem(resolved, *pem)) {
          errors.add(line_of(*n), dotted, *why);
          return std::nullopt;
        }
      }
    }
    return resolved;
  }

  std::string resolve(const std::string& path) const {
    std::error_code ec;
    fs::path p = base_dir_ / path; // an absolute `path` replaces base_dir_
    fs::path absolute = fs::absolute(p, ec);
    return (ec ? p : absolute).lexically_normal().string();
  }

private:
  fs::path base_dir_;
};

const toml::table* as_section(manifest_reader& r, const toml::table& root, const char* key) {
  const toml::node* n = root.get(key);
  if (n == nullptr)
    return nullptr;
  if (!n->is_table()) {
    r.errors.add(line_of(*n), key,
                 "expected a table ([" + std::string{key} + "]), got " + got(*n));
    return nullptr;
  }
  return n->as_table();
}

void read_cluster(manifest_reader& r, const toml::table& root, cluster_manifest& m) {
  const toml::table* cluster = as_section(r, root, "cluster");
  if (cluster == nullptr) {
    if (root.get("cluster") == nullptr)
      r.errors.add(0, "cluster",
                   "required table [cluster] is missing (it needs name and coordinator)");
    return;
  }
  r.check_keys(*cluster, "cluster",
               {"name", "coordinator", "heartbeat_interval_s", "node_timeout_s"});
  if (auto v = r.read_string(r.field(*cluster, "name", "cluster.name", true,
                                     "expected a non-empty string"),
                             "cluster.name", /*non_empty=*/true))
    m.name = *v;
  if (auto v = r.read_string(r.field(*cluster, "coordinator", "cluster.coordinator", true,
                                     "expected the name of a [[node]]"),
                             "cluster.coordinator", /*non_empty=*/true))
    m.coordinator = *v;
  const toml::node* heartbeat = cluster->get("heartbeat_interval_s");
  const toml::node* timeout = cluster->get("node_timeout_s");
  const auto heartbeat_s = r.read_positive_seconds(heartbeat, "cluster.heartbeat_interval_s");
  const auto timeout_s = r.read_positive_seconds(timeout, "cluster.node_timeout_s");
  if (heartbeat_s)
    m.heartbeat_interval_s = *heartbeat_s;
  if (timeout_s)
    m.node_timeout_s = *timeout_s;
  // Compare only values that were read (or defaulted) without error.
  const bool heartbeat_ok = heartbeat == nullptr || heartbeat_s;
  const bool timeout_ok = timeout == nullptr || timeout_s;
  if (heartbeat_ok && timeout_ok && m.node_timeout_s <= m.heartbeat_interval_s) {
    const toml::node* at = timeout != nullptr ? timeout : heartbeat;
    r.errors.add(at ? line_of(*at) : line_of(*cluster), "cluster.node_timeout_s",
                 "expected a number of seconds > heartbeat_interval_s ("
                   + toml_real(m.heartbeat_interval_s) + "), got "
                   + toml_real(m.node_timeout_s) + (timeout ? "" : " (the default)"));
  }
}

/// Reads [security] and [shell]; returns whether TLS was asked for (ca_file given), even if the
/// CA file itself has a problem, so that later checks judge the nodes by the intended setup.
bool read_security(manifest_reader& r, const toml::table& root, cluster_manifest& m) {
  const toml::table* security = as_section(r, root, "security");
  const toml::table* shell = as_section(r, root, "shell");
  const toml::node* ca = nullptr;
  if (security != nullptr) {
    r.check_keys(*security, "security", {"allow_insecure", "ca_file"});
    if (auto v = r.read_bool(security->get("allow_insecure"), "security.allow_insecure"))
      m.security.allow_insecure = *v;
    ca = security->get("ca_file");
  }
  // The CA decides whether TLS is on; only then must the files exist.
  const bool tls = ca != nullptr && ca->is_string() && !ca->as_string()->get().empty();
  if (auto v = r.read_path(ca, "security.ca_file", tls, pem_kind::certificate))
    m.security.ca_file = *v;
  if (shell != nullptr) {
    r.check_keys(*shell, "shell", {"certificate", "key"});
    const toml::node* certificate = shell->get("certificate");
    const toml::node* key = shell->get("key");
    if (auto v = r.read_path(certificate, "shell.certificate", tls, pem_kind::certificate))
      m.security.shell_certificate = *v;
    if (auto v = r.read_path(key, "shell.key", tls, pem_kind::private_key))
      m.security.shell_key = *v;
    if ((certificate == nullptr) != (key == nullptr))
      r.errors.add(line_of(certificate ? *certificate : *key),
                   certificate ? "shell.key" : "shell.certificate",
                   "required key is missing: [shell] certificate and key go together");
  }
  return tls;
}

/// Reads every [[node]] and checks them against each other. `tls`: whether security.ca_file was
/// given. Sets `all_names_ok` to false if some node has no valid, unique name.
void read_nodes(manifest_reader& r, const toml::table& root, cluster_manifest& m, bool tls,
                bool& all_names_ok) {
  const toml::node* n = root.get("node");
  if (n == nullptr) {
    r.errors.add(0, "node", "at least one [[node]] is required");
    all_names_ok = false;
    return;
  }
  if (!n->is_array_of_tables() || n->as_array()->empty()) {
    r.errors.add(line_of(*n), "node",
                 "expected an array of tables, written [[node]] (one per node), got " + got(*n));
    all_names_ok = false;
    return;
  }
  const std::string cert_expected =
    "expected a path to a PEM file (required when security.ca_file is set)";
  // First index and line of each node name, host:port, and host GPU.
  std::map<std::string, std::pair<std::size_t, int>> names;
  std::map<std::pair<std::string, int>, std::size_t> endpoints;
  std::map<std::pair<std::string, int>, std::size_t> host_gpus;
  const toml::array& array = *n->as_array();
  for (std::size_t i = 0; i < array.size(); ++i) {
    const toml::table& table = *array.get(i)->as_table();
    const std::string prefix = "node[" + std::to_string(i) + "]";
    r.check_keys(table, prefix,
                 {"name", "host", "port", "roles", "gpus", "share_gpus", "certificate", "key"});
    node_spec spec;

    const toml::node* name = r.field(table, "name", prefix + ".name", true, name_expected);
    if (auto v = r.read_string(name, prefix + ".name", /*non_empty=*/false)) {
      if (!is_valid_node_name(*v)) {
        r.errors.add(line_of(*name), prefix + ".name",
                     std::string{name_expected} + ", got " + toml_quote(*v));
      } else if (auto it = names.find(*v); it != names.end()) {
        r.errors.add(line_of(*name), prefix + ".name",
                     "node name " + toml_quote(*v) + " is already used by node["
                       + std::to_string(it->second.first) + "] (line "
                       + std::to_string(it->second.second) + ")");
      } else {
        names.emplace(*v, std::pair{i, line_of(*name)});
        spec.name = *v;
      }
    }

    if (auto v = r.read_string(r.field(table, "host", prefix + ".host", true,
                                       "expected a host name or address"),
                               prefix + ".host", /*non_empty=*/true))
      spec.host = *v;

    const toml::node* port = r.field(table, "port", prefix + ".port", true, port_expected);
    if (auto v = r.read_port(port, prefix + ".port"))
      spec.port = *v;

    if (auto v = r.read_roles(r.field(table, "roles", prefix + ".roles", true,
                                      "expected a non-empty array of roles ("
                                        + join(known_roles(), ", ") + ")"),
                              prefix + ".roles"))
      spec.roles = *v;

    const toml::node* gpus = table.get("gpus");
    if (auto v = r.read_gpus(gpus, prefix + ".gpus"))
      spec.gpus = *v;
    if (auto v = r.read_bool(table.get("share_gpus"), prefix + ".share_gpus"))
      spec.share_gpus = *v;

    if (auto v = r.read_path(r.field(table, "certificate", prefix + ".certificate", tls,
                                     cert_expected),
                             prefix + ".certificate", tls, pem_kind::certificate))
      spec.certificate = *v;
    if (auto v = r.read_path(r.field(table, "key", prefix + ".key", tls,
                                     "expected a path to the certificate's private key (PEM)"),
                             prefix + ".key", tls, pem_kind::private_key))
      spec.key = *v;
    if (tls && !spec.certificate.empty() && !spec.key.empty())
      if (auto why = key_mismatch(spec.certificate, spec.key))
        r.errors.add(line_of(*table.get("key")), prefix + ".key", *why);
    if (tls) {
      for (const char* key : {"certificate", "key"}) {
        const toml::node* v = table.get(key);
        if (v != nullptr && v->is_string() && v->as_string()->get().empty())
          r.errors.add(line_of(*v), prefix + "." + key,
                       "expected a path to a PEM file (required when security.ca_file is set), "
                       "got \"\"");
      }
    }

    // Cross-node checks, each reported at the later node.
    if (!spec.host.empty() && spec.port != 0) {
      auto [it, fresh] = endpoints.emplace(std::pair{machine_of(spec.host), int{spec.port}}, i);
      if (!fresh)
        r.errors.add(line_of(*port), prefix + ".port",
                     spec.host + ":" + std::to_string(spec.port) + " is already used by node["
                       + std::to_string(it->second) + "] "
                       + toml_quote(m.nodes[it->second].name) + " ("
                       + m.nodes[it->second].host + ":" + std::to_string(spec.port) + ")");
    }
    if (!spec.host.empty() && gpus != nullptr && gpus->is_array()) {
      const toml::array& listed = *gpus->as_array();
      for (std::size_t g = 0; g < listed.size(); ++g) {
        const toml::value<int64_t>* element = listed.get(g)->as_integer();
        if (element == nullptr
            || std::find(spec.gpus.begin(), spec.gpus.end(), element->get()) == spec.gpus.end())
          continue; // not a valid index: reported above
        const int index = static_cast<int>(element->get());
        auto [it, fresh] = host_gpus.emplace(std::pair{machine_of(spec.host), index}, i);
        if (!fresh && it->second != i
            && !(spec.share_gpus && m.nodes[it->second].share_gpus))
          r.errors.add(line_of(*element), prefix + ".gpus[" + std::to_string(g) + "]",
                       "GPU " + std::to_string(index) + " on host " + toml_quote(spec.host)
                         + " is already assigned to node[" + std::to_string(it->second) + "] "
                         + toml_quote(m.nodes[it->second].name)
                         + " (set share_gpus = true on both nodes to share it)");
      }
    }
    if (!tls && !m.security.allow_insecure && !spec.host.empty()
        && !is_loopback_host(spec.host)) {
      r.errors.add(line_of(*table.get("host")), prefix + ".host",
                   "expected a loopback host (127.0.0.1, localhost, ::1), got "
                     + toml_quote(spec.host)
                     + ": without TLS nodes listen on 127.0.0.1 only; set security.ca_file to "
                       "use TLS, or security.allow_insecure = true");
    }
    if (spec.name.empty())
      all_names_ok = false;
    m.nodes.push_back(std::move(spec));
  }
}

} // namespace

const std::vector<std::string>& known_roles() {
  static const std::vector<std::string> roles{"learner", "sampler", "evaluator", "builder",
                                              "all"};
  return roles;
}

bool node_spec::has_role(const std::string& role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end()
         || (role != "builder" && std::find(roles.begin(), roles.end(), "all") != roles.end());
}

const node_spec* cluster_manifest::find(const std::string& node_name) const {
  for (const auto& node : nodes)
    if (node.name == node_name)
      return &node;
  return nullptr;
}

const node_spec& cluster_manifest::coordinator_node() const {
  if (const node_spec* node = find(coordinator))
    return *node;
  throw std::logic_error("cluster_manifest: coordinator '" + coordinator
                         + "' names no node (the manifest was not validated)");
}

bool operator==(const node_spec& a, const node_spec& b) {
  return a.name == b.name && a.host == b.host && a.port == b.port && a.roles == b.roles
         && a.gpus == b.gpus && a.share_gpus == b.share_gpus && a.certificate == b.certificate
         && a.key == b.key;
}

bool operator!=(const node_spec& a, const node_spec& b) {
  return !(a == b);
}

bool operator==(const security_spec& a, const security_spec& b) {
  return a.allow_insecure == b.allow_insecure && a.ca_file == b.ca_file
         && a.shell_certificate == b.shell_certificate && a.shell_key == b.shell_key;
}

bool operator!=(const security_spec& a, const security_spec& b) {
  return !(a == b);
}

bool operator==(const cluster_manifest& a, const cluster_manifest& b) {
  return a.path == b.path && a.name == b.name && a.coordinator == b.coordinator
         && a.heartbeat_interval_s == b.heartbeat_interval_s
         && a.node_timeout_s == b.node_timeout_s && a.security == b.security
         && a.nodes == b.nodes;
}

bool operator!=(const cluster_manifest& a, const cluster_manifest& b) {
  return !(a == b);
}

caf::expected<cluster_manifest> parse_manifest(std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view{path});
  } catch (const toml::parse_error& e) {
    return config_error(path, static_cast<int>(e.source().begin.line), "",
                        "TOML syntax error: " + std::string{e.description()});
  }
  manifest_reader r{path};
  cluster_manifest m;
  m.path = path;
  r.check_keys(root, "", {"cluster", "security", "shell", "node"});
  read_cluster(r, root, m);
  const bool tls = read_security(r, root, m);
  bool all_names_ok = true;
  read_nodes(r, root, m, tls, all_names_ok);
  // The coordinator check is only meaningful once every node name has been read.
  if (all_names_ok && !m.coordinator.empty() && m.find(m.coordinator) == nullptr) {
    std::vector<std::string> names;
    for (const auto& node : m.nodes)
      names.push_back(node.name);
    const toml::node* at = root.at_path("cluster.coordinator").node();
    r.errors.add(at ? line_of(*at) : 0, "cluster.coordinator",
                 "expected the name of a [[node]] (" + join(names, ", ") + "), got "
                   + toml_quote(m.coordinator) + did_you_mean(m.coordinator, names));
  }
  if (!r.errors.empty())
    return r.errors.to_error();
  return m;
}

caf::expected<cluster_manifest> load_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return config_error(path, 0, "", std::string{"cannot read the manifest: "}
                                       + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return config_error(path, 0, "", "cannot read the manifest: read error");
  return parse_manifest(text.str(), path);
}

cluster_manifest single_node_manifest(uint16_t port, std::vector<int> gpus) {
  cluster_manifest m;
  m.name = "kbrl-local";
  m.coordinator = "local";
  node_spec node;
  node.name = "local";
  node.host = "127.0.0.1";
  node.port = port;
  node.roles = {"all"};
  node.gpus = std::move(gpus);
  m.nodes.push_back(std::move(node));
  return m;
}

std::string render_manifest(const cluster_manifest& m) {
  auto string_array = [](const std::vector<std::string>& items) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i)
      out += (i ? ", " : "") + toml_quote(items[i]);
    return out + "]";
  };
  auto int_array = [](const std::vector<int>& items) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i)
      out += (i ? ", " : "") + std::to_string(items[i]);
    return out + "]";
  };
  std::ostringstream out;
  out << "# kbrl cluster manifest; config/cluster.example.toml documents every key.\n"
      << "[cluster]\n"
      << "name = " << toml_quote(m.name) << "\n"
      << "coordinator = " << toml_quote(m.coordinator) << "\n"
      << "heartbeat_interval_s = " << toml_real(m.heartbeat_interval_s) << "\n"
      << "node_timeout_s = " << toml_real(m.node_timeout_s) << "\n"
      << "\n[security]\n"
      << "allow_insecure = " << (m.security.allow_insecure ? "true" : "false") << "\n";
  if (!m.security.ca_file.empty())
    out << "ca_file = " << toml_quote(m.security.ca_file) << "\n";
  if (!m.security.shell_certificate.empty() || !m.security.shell_key.empty()) {
    out << "\n[shell]\n";
    out << "certificate = " << toml_quote(m.security.shell_certificate) << "\n";
    out << "key = " << toml_quote(m.security.shell_key) << "\n";
  }
  for (const auto& node : m.nodes) {
    out << "\n[[node]]\n"
        << "name = " << toml_quote(node.name) << "\n"
        << "host = " << toml_quote(node.host) << "\n"
        << "port = " << node.port << "\n"
        << "roles = " << string_array(node.roles) << "\n"
        << "gpus = " << int_array(node.gpus) << "\n";
    if (node.share_gpus)
      out << "share_gpus = true\n";
    if (!node.certificate.empty())
      out << "certificate = " << toml_quote(node.certificate) << "\n";
    if (!node.key.empty())
      out << "key = " << toml_quote(node.key) << "\n";
  }
  return out.str();
}

} // namespace kbrl::config
