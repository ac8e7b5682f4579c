#include "runtime/hub/hub_options.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace kbrl::hub {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string{} : std::string{v};
}

bool truthy(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string trimmed(std::string s) {
  const char* space = " \t\r\n";
  s.erase(s.find_last_not_of(space) + 1);
  s.erase(0, s.find_first_not_of(space));
  return s;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

/// One part of a repo id, by huggingface_hub's rules.
bool is_valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 96 && std::all_of(s.begin(), s.end(), is_name_char)
         && s.find("--") == std::string::npos && s.find("..") == std::string::npos
         && s.front() != '-' && s.front() != '.' && s.back() != '-' && s.back() != '.';
}

} // namespace

hub_options hub_options_from_environment() {
  hub_options o;
  if (auto e = env("HF_ENDPOINT"); !e.empty()) {
    while (!e.empty() && e.back() == '/')
      e.pop_back();
    o.endpoint = e;
  }
  const std::string home_env = env("HOME");
  fs::path hf_home;
  if (auto h = env("HF_HOME"); !h.empty())
    hf_home = h;
  else if (auto x = env("XDG_CACHE_HOME"); !x.empty())
    hf_home = fs::path(x) / "huggingface";
  else
    hf_home = fs::path(home_env.empty() ? "/tmp" : home_env) / ".cache" / "huggingface";
  if (auto c = env("HF_HUB_CACHE"); !c.empty())
    o.cache_dir = c;
  else if (auto legacy = env("HUGGINGFACE_HUB_CACHE"); !legacy.empty())
    o.cache_dir = legacy;
  else
    o.cache_dir = hf_home / "hub";
  o.token = trimmed(env("HF_TOKEN"));
  if (o.token.empty()) {
    fs::path token_file = env("HF_TOKEN_PATH").empty() ? hf_home / "token" : fs::path(env("HF_TOKEN_PATH"));
    std::ifstream in(token_file);
    std::string line;
    if (in && std::getline(in, line))
      o.token = trimmed(line);
  }
  o.offline = truthy(env("HF_HUB_OFFLINE"));
  return o;
}

bool looks_like_model_id(const std::string& text) {
  if (text.empty() || text.front() == '.' || text.front() == '/' || text.front() == '~')
    return false;
  const auto id = text.substr(0, text.find('@'));
  const auto slash = id.find('/');
  if (slash == std::string::npos)
    return is_valid_name(id);
  return id.find('/', slash + 1) == std::string::npos && is_valid_name(id.substr(0, slash))
         && is_valid_name(id.substr(slash + 1));
}

caf::expected<model_ref> parse_model_ref(const std::string& text) {
  const std::string form =
    "expected a hub model id \"Org/Name\" or \"Org/Name@revision\" (names of letters, digits, "
    "'_', '-' and '.', at most 96 characters, without \"--\" or \"..\")";
  model_ref ref;
  const auto at = text.find('@');
  ref.repo_id = text.substr(0, at);
  if (at != std::string::npos) {
    ref.revision = text.substr(at + 1);
    const bool bad_revision =
      ref.revision.empty() || ref.revision.find("..") != std::string::npos
      || ref.revision.front() == '/' || ref.revision.back() == '/'
      || std::any_of(ref.revision.begin(), ref.revision.end(), [](unsigned char c) {
           return std::isspace(c) || std::iscntrl(c) || c == '@' || c == '\\';
         });
    if (bad_revision)
      return make_error(errc::invalid_argument,
                        "'" + text + "': bad revision '" + ref.revision + "': " + form);
  }
  if (!looks_like_model_id(ref.repo_id))
    return make_error(errc::invalid_argument, "'" + text + "' is not a model id: " + form);
  return ref;
}

std::string to_string(const model_ref& ref) {
  return ref.revision == "main" ? ref.repo_id : ref.repo_id + "@" + ref.revision;
}

bool is_commit_hash(const std::string& text) {
  return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

} // namespace kbrl::hub
