#pragma once
// Text helpers shared by the cluster manifest and the run config loaders: the one format of a
// configuration error ("cluster.toml:12: node[1].port: expected ..."), a collector that gathers
// every error of a file and returns them as one caf::error, "did you mean" suggestions for
// misspelt keys, and TOML literals for values shown in errors and written back by renderers.

#include <caf/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::config {

/// Formats one configuration problem as `file:line: key: what`. A line of 0 (or less) is left out
/// (`file: key: what`), and so is an empty key (`file:line: what`). `file` is printed as given.
std::string format_config_error(const std::string& file, int line, const std::string& key,
                                const std::string& what);

/// Builds `kbrl::make_error(errc::invalid_config, format_config_error(file, line, key, what))`.
caf::error config_error(const std::string& file, int line, const std::string& key,
                        const std::string& what);

/// Collects every problem found in one file so that a loader can report them all at once.
/// Problems come out sorted by line (ties in the order they were added); those without a line
/// (whole-file problems such as "no [[node]]") come last.
class config_errors {
public:
  /// Creates a collector for problems in `file` (printed as given).
  explicit config_errors(std::string file);

  /// Records the problem `what` at `line` (0 = no line) about the dotted `key` (may be empty).
  void add(int line, const std::string& key, const std::string& what);

  /// True if nothing has been recorded.
  bool empty() const { return entries_.empty(); }

  /// Number of problems recorded.
  std::size_t size() const { return entries_.size(); }

  /// The file the problems are about.
  const std::string& file() const { return file_; }

  /// All problems, one per line, sorted as described above; no trailing newline.
  std::string text() const;

  /// An invalid_config error whose text is text(); an empty caf::error if nothing was recorded.
  caf::error to_error() const;

private:
  struct entry {
    int line;
    std::string text;
  };
  std::string file_;
  std::vector<entry> entries_;
};

/// Optimal-string-alignment distance between `a` and `b`: insertions, deletions, substitutions
/// and swaps of two neighbouring characters each cost 1 ("lgo" -> "log" is 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is at most `max_distance` edits away (the first one on a
/// tie), else an empty string. Exact matches count (distance 0).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates,
                          std::size_t max_distance = 2);

/// " (did you mean 'log.level'?)" for the closest candidate within 2 edits of `word` (within
/// word.size() / 2 edits for words shorter than 4 characters), else "". Meant to be appended to
/// an "unknown key" message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// `text` as a TOML basic string, quotes included: `say "hi"` becomes `"say \"hi\""`.
std::string toml_quote(std::string_view text);

/// `value` as a TOML float that reads back to the same double: the shortest round-trip digits,
/// with ".0" added to whole numbers (1 -> "1.0"); "inf", "-inf" and "nan" for the special values.
std::string toml_real(double value);

} // namespace kbrl::config
