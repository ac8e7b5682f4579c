#pragma once
// Settings of Hugging Face hub downloads, and model references ("Org/Name@revision").
// The defaults follow huggingface_hub's environment variables, so kbrl and Python share one
// cache and one login:
//   HF_ENDPOINT      hub URL                               default https://huggingface.co
//   HF_TOKEN         access token (gated/private models)   else the file $HF_TOKEN_PATH, else
//                                                          $HF_HOME/token (huggingface-cli login)
//   HF_HUB_CACHE     cache directory                       else $HF_HOME/hub, else
//                                                          $XDG_CACHE_HOME/huggingface/hub, else
//                                                          ~/.cache/huggingface/hub
//   HF_HOME          see above                             default ~/.cache/huggingface
//   HF_HUB_OFFLINE   1/true/yes/on: use the cache only     default off

#include <caf/expected.hpp>

#include <filesystem>
#include <string>

namespace kbrl::hub {

/// How download progress is shown on stderr.
enum class progress_mode {
  automatic, ///< a live bar if stderr is a terminal, else one log line per file
  bar,       ///< always the live bar
  lines,     ///< always one log line per file
  none,      ///< nothing
};

/// Settings of hub downloads. hub_options_from_environment() fills them from the environment;
/// the struct's own defaults ignore it (tests set every field explicitly).
struct hub_options {
  /// Base URL of the hub, without a trailing slash. Default "https://huggingface.co".
  std::string endpoint = "https://huggingface.co";
  /// Access token, sent as "Authorization: Bearer <token>"; empty: none. Never logged.
  std::string token;
  /// Root of the cache (models--Org--Name/ folders live in it). Required for hub ids.
  std::filesystem::path cache_dir;
  /// Use only the cache; fail naming what is missing from it. Default false.
  bool offline = false;
  /// Tries per request; a failed download resumes where it stopped. >= 1. Default 3.
  int attempts = 3;
  /// Seconds between tries, doubled after each. Default 1.
  double retry_backoff_s = 1.0;
  /// Seconds to wait for a connection. Default 30.
  long connect_timeout_s = 30;
  /// A transfer that receives nothing for this many seconds is abandoned (and retried).
  /// Default 60.
  long stall_timeout_s = 60;
  /// Check each weight file's SHA-256 (its LFS id) after downloading it. Default true.
  bool verify_sha256 = true;
  /// Progress on stderr. Default automatic.
  progress_mode progress = progress_mode::automatic;
};

/// hub_options with endpoint, token, cache_dir and offline taken from the environment (see the
/// top of this file); other fields keep their defaults.
hub_options hub_options_from_environment();

/// A model on the hub: repository id and revision.
struct model_ref {
  std::string repo_id;             ///< "Org/Name" (or a bare "Name" of a legacy model)
  std::string revision = "main";   ///< branch, tag or 40-hex commit
};

/// True if `text` is shaped like a hub id with an optional "@revision" rather than a path:
/// one or two names of [A-Za-z0-9_.-] separated by '/', not starting with '.', '/' or '~'.
bool looks_like_model_id(const std::string& text);

/// Parses "Org/Name" or "Org/Name@revision". Fails with errc::invalid_argument explaining the
/// allowed form (names of [A-Za-z0-9_.-], at most 96 characters, no "--" or "..", a revision
/// without whitespace or "..").
caf::expected<model_ref> parse_model_ref(const std::string& text);

/// "Org/Name@revision" (or "Org/Name" for main) as a person reads it.
std::string to_string(const model_ref& ref);

/// True for a 40-character lower-case hex string (a git commit).
bool is_commit_hash(const std::string& text);

} // namespace kbrl::hub
