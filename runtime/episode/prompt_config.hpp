#pragma once
// The run config's prompt.* keys (runtime/config/settings.cpp documents each) as the
// prompt_settings of an episode. The warm start (kbrl-warmstart) and the RL episodes read the
// same keys, so a policy warm-started on a config's prompts is trained on the prompts it will see.

#include "runtime/episode/prompts.hpp"

#include <caf/expected.hpp>

namespace kbrl::config {
class run_config;
}

namespace kbrl::episode {

/// The prompt.* values of `config`. Fails with errc::invalid_config naming the key when a tag is
/// empty or two tags are the same (the answer parser could not tell the blocks apart).
caf::expected<prompt_settings> prompt_settings_from(const config::run_config& config);

} // namespace kbrl::episode
