#include "runtime/episode/prompt_config.hpp"

#include "messages/errors.hpp"
#include "runtime/config/settings.hpp"

#include <utility>
#include <vector>

namespace kbrl::episode {

caf::expected<prompt_settings> prompt_settings_from(const config::run_config& config) {
  prompt_settings s;
  s.system_prompt = config.get_string("prompt.system");
  s.hardware_notes = config.get_string("prompt.hardware_notes");
  s.show_example = config.get_bool("prompt.show_example");
  s.history_token_budget = static_cast<size_t>(config.get_int("prompt.history_token_budget"));
  auto& f = s.format;
  f.require_think = config.get_bool("prompt.require_think");
  f.allow_fenced = config.get_bool("prompt.allow_fenced");
  std::vector<std::pair<const char*, std::string*>> tags{{"prompt.think_open", &f.think_open},
                                                          {"prompt.think_close", &f.think_close},
                                                          {"prompt.kernel_open", &f.kernel_open},
                                                          {"prompt.kernel_close", &f.kernel_close}};
  for (size_t i = 0; i < tags.size(); ++i) {
    *tags[i].second = config.get_string(tags[i].first);
    if (tags[i].second->empty())
      return make_error(errc::invalid_config,
                        std::string(tags[i].first) + ": a tag cannot be empty");
    for (size_t j = 0; j < i; ++j)
      if (*tags[j].second == *tags[i].second)
        return make_error(errc::invalid_config, std::string(tags[i].first) + ": \""
                                                  + *tags[i].second + "\" is also "
                                                  + tags[j].first + "; each tag must differ");
  }
  return s;
}

} // namespace kbrl::episode
