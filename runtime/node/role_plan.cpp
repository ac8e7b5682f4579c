#include "runtime/node/role_plan.hpp"

#include "runtime/config/manifest.hpp"

#include <algorithm>

namespace kbrl {

std::vector<std::string> expand_roles(const std::vector<std::string>& roles) {
  auto has = [&](const std::string& r) {
    return std::find(roles.begin(), roles.end(), r) != roles.end()
           || std::find(roles.begin(), roles.end(), "all") != roles.end();
  };
  std::vector<std::string> out;
  for (auto& r : config::known_roles()) {
    // "all" is one machine's RL loop; a builder node is named on its own (a CPU machine that
    // builds for the cluster's evaluator nodes).
    const bool named = std::find(roles.begin(), roles.end(), r) != roles.end();
    if (r != "all" && (r == "builder" ? named : has(r)))
      out.push_back(r);
  }
  return out;
}

std::vector<planned_actor> plan_role_actors(const std::vector<std::string>& roles,
                                            const std::vector<int>& gpus) {
  auto expanded = expand_roles(roles);
  auto has = [&](const char* r) {
    return std::find(expanded.begin(), expanded.end(), r) != expanded.end();
  };
  std::vector<planned_actor> plan;
  if (has("learner")) {
    plan.push_back({"learner", -1, gpus.empty() ? -1 : gpus.front(), gpus});
    plan.push_back({"metrics", -1, -1, {}});
  }
  auto per_gpu = [&](const char* role) {
    if (gpus.empty()) {
      plan.push_back({role, 0, -1, {}});
      return;
    }
    for (size_t i = 0; i < gpus.size(); ++i)
      plan.push_back({role, static_cast<int>(i), gpus[i], {}});
  };
  if (has("sampler"))
    per_gpu("sampler");
  if (has("evaluator")) {
    plan.push_back({"evaluator-supervisor", -1, -1, {}});
    per_gpu("evaluator");
  }
  if (has("builder"))
    plan.push_back({"builds", -1, -1, {}}); // the build service; it owns the CPU builders
  return plan;
}

} // namespace kbrl
