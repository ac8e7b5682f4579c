#pragma once
// What kbrl-shell makes of what a person types and of what goes wrong: short actor names
// ("coordinator" for "head/coordinator"), one section of the run config, and failures said in
// words ("no answer within 15 s" instead of CAF's request_timeout).

#include "messages/data.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace kbrl {

/// The full name ("node/role.i") of the actor `name` means: itself when it names a node; else
/// the one actor of the view whose name ends in "/<name>". errc::unknown_actor when none does,
/// naming the candidates when several do.
caf::expected<std::string> resolve_actor_name(const membership_view& view,
                                              const std::string& name);

/// The lines of table [section] (and its subtables [section.x]) of a run config's TOML; nullopt
/// when it has none.
std::optional<std::string> toml_section(const std::string& toml, const std::string& section);

/// `err` for a person: a request that timed out says how long was waited and what to check;
/// anything else is `rendered` (the actor system's text of it).
std::string failure_text(const caf::error& err, const std::string& rendered,
                         std::chrono::milliseconds timeout, const std::string& what);

} // namespace kbrl
