#include "runtime/shell/shell_names.hpp"

#include "messages/errors.hpp"

#include <caf/sec.hpp>

#include <sstream>
#include <vector>

namespace kbrl {

caf::expected<std::string> resolve_actor_name(const membership_view& view,
                                              const std::string& name) {
  if (name.find('/') != std::string::npos)
    return name;
  std::vector<std::string> found;
  for (auto& n : view.nodes)
    for (auto& a : n.info.actors) {
      const auto slash = a.name.find('/');
      if (slash != std::string::npos && a.name.substr(slash + 1) == name)
        found.push_back(a.name);
    }
  if (found.size() == 1)
    return found.front();
  if (found.empty())
    return make_error(errc::unknown_actor, "no actor named '" + name
                                             + "' on any node (`actors` lists them; names look "
                                               "like node/role)");
  std::string list;
  for (auto& f : found)
    list += (list.empty() ? "" : ", ") + f;
  return make_error(errc::unknown_actor, "'" + name + "' is on several nodes: " + list);
}

std::optional<std::string> toml_section(const std::string& toml, const std::string& section) {
  std::istringstream in(toml);
  std::string out;
  bool inside = false, found = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == '[') {
      const auto end = line.find(']');
      const std::string name = line.substr(1, end == std::string::npos ? 0 : end - 1);
      inside = name == section || name.rfind(section + ".", 0) == 0;
      found = found || inside;
    }
    if (inside)
      out += line + "\n";
  }
  if (!found)
    return std::nullopt;
  return out;
}

std::string failure_text(const caf::error& err, const std::string& rendered,
                         std::chrono::milliseconds timeout, const std::string& what) {
  if (err == caf::sec::request_timeout)
    return "no answer from " + what + " within "
           + std::to_string(timeout.count() / 1000.0).substr(0, 4)
           + " s: is that node still running? (`nodes` shows which are up)";
  return rendered;
}

} // namespace kbrl
