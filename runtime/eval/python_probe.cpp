#include "runtime/eval/python_probe.hpp"

#include <cstdlib>
#include <vector>

namespace kbrl::eval {

std::string find_python_with_torch() {
  static const std::string found = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("KBRL_PYTHON"))
      candidates.push_back(env);
    candidates.push_back("python3");
    candidates.push_back("/usr/bin/python3");
    for (auto& py : candidates) {
      auto cmd = "'" + py + "' -c 'import torch' >/dev/null 2>&1";
      if (std::system(cmd.c_str()) == 0)
        return py;
    }
    return std::string{};
  }();
  return found;
}

std::string resolve_python(const std::string& setting) {
  if (setting != "auto")
    return setting;
  auto found = find_python_with_torch();
  return found.empty() ? "/usr/bin/python3" : found;
}

} // namespace kbrl::eval
