#include "runtime/config/config_error.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kbrl::config {

std::string format_config_error(const std::string& file, int line, const std::string& key,
                                const std::string& what) {
  std::string out = file;
  if (line > 0)
    out += ":" + std::to_string(line);
  out += ": ";
  if (!key.empty())
    out += key + ": ";
  out += what;
  return out;
}

caf::error config_error(const std::string& file, int line, const std::string& key,
                        const std::string& what) {
  return make_error(errc::invalid_config, format_config_error(file, line, key, what));
}

config_errors::config_errors(std::string file) : file_(std::move(file)) {
}

void config_errors::add(int line, const std::string& key, const std::string& what) {
  entries_.push_back(entry{line, format_config_error(file_, line, key, what)});
}

std::string config_errors::text() const {
  auto sorted = entries_;
  // Line 0 means "no line": sort those after every numbered line.
  auto rank = [](int line) { return line > 0 ? line : std::numeric_limits<int>::max(); };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const entry& a, const entry& b) { return rank(a.line) < rank(b.line); });
  std::string out;
  for (const auto& e : sorted) {
    if (!out.empty())
      out += '\n';
    out += e.text;
  }
  return out;
}

caf::error config_errors::to_error() const {
  if (entries_.empty())
    return caf::error{};
  return make_error(errc::invalid_config, text());
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] = distance between the first i characters of a and the first j of b.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i)
    d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j)
    d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates,
                          std::size_t max_distance) {
  const std::string* best = nullptr;
  std::size_t best_distance = max_distance + 1;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = &candidate;
      best_distance = distance;
    }
  }
  return best != nullptr ? *best : std::string{};
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // Up to 2 edits, but fewer for short words: "w" is no typo of "x".
  const std::size_t max_distance = std::min<std::size_t>(2, word.size() / 2);
  const std::string match = closest_match(word, candidates, max_distance);
  if (match.empty())
    return {};
  return " (did you mean '" + match + "'?)";
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string toml_real(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  std::string out(buf, ec == std::errc{} ? end : buf);
  // TOML needs a fraction or an exponent to read a float back as a float; to_chars writes
  // exponents as "1e+300", which TOML accepts.
  if (out.find_first_of(".e") == std::string::npos)
    out += ".0";
  return out;
}

} // namespace kbrl::config
