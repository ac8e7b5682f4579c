#include "runtime/report/run_hparams.hpp"

#include <sstream>

namespace kbrl::report {

std::vector<hparam> hparams_of(const config::run_config& run) {
  std::vector<hparam> out;
  for (const auto& s : run.schema()) {
    hparam h;
    h.name = s.key;
    switch (s.kind) {
      case config::setting_kind::boolean:
        h.is_bool = true;
        h.flag = run.get_bool(s.key);
        break;
      case config::setting_kind::integer:
        h.is_number = true;
        h.number = static_cast<double>(run.get_int(s.key));
        break;
      case config::setting_kind::real:
        h.is_number = true;
        h.number = run.get_real(s.key);
        break;
      case config::setting_kind::string: h.text = run.get_string(s.key); break;
      default: h.text = run.get_toml(s.key); break;
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string config_markdown(const std::string& toml) {
  std::istringstream in(toml);
  std::string out;
  for (std::string line; std::getline(in, line);)
    out += "    " + line + "\n";
  return out;
}

} // namespace kbrl::report
