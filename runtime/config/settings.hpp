#pragma once
// The run config: every setting kbrl knows is declared once, with its type, default, meaning,
// unit and allowed values, in the table of all_settings() (settings.cpp). A run_config holds one
// value per declared setting: the defaults, overlaid by a TOML file and by command-line overrides
// ("log.level=debug"), each checked against the declaration with an error that names the file,
// line, key and what was allowed. render() writes the merged config back as documented TOML
// (config/run.example.toml is render() of the defaults).
//
// Adding a setting: append one line to the table in settings.cpp, regenerate
// config/run.example.toml (the settings tests say how), and read it with run_config::get_*().

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kbrl::config {

/// The type of a setting's value.
enum class setting_kind {
  boolean,     ///< true or false
  integer,     ///< a 64-bit integer
  real,        ///< a double; an integer is accepted too
  string,      ///< a string, possibly restricted to `allowed`
  string_list, ///< an array of strings, each restricted to `allowed` if it is non-empty
  int_list,    ///< an array of integers, each within [min, max]
};

/// Lower-case name of a kind, e.g. "string_list".
const char* to_string(setting_kind kind);

/// The declaration of one setting.
struct setting {
  /// Dotted key with at least one table, e.g. "log.level" ([log] level = ...).
  std::string key;
  /// Type of the value.
  setting_kind kind;
  /// The default as a TOML literal: "\"info\"", "4", "1.0", "true", "[]".
  std::string default_toml;
  /// Meaning and unit, one or two sentences; written as a comment by run_config::render().
  std::string doc;
  /// For string and string_list: the values allowed; empty means any string.
  std::vector<std::string> allowed = {};
  /// For integer, real and int_list: smallest value allowed (see min_exclusive).
  double min = -std::numeric_limits<double>::infinity();
  /// For integer, real and int_list: largest value allowed, inclusive.
  double max = std::numeric_limits<double>::infinity();
  /// If true, the value must be strictly greater than `min` (e.g. "> 0" for intervals).
  bool min_exclusive = false;
};

/// Every setting kbrl knows, in declaration order (which render() follows). Keys are unique.
const std::vector<setting>& all_settings();

/// The declaration of `key` in `schema`, or nullptr if no setting there has that key.
const setting* find_setting(const std::string& key,
                            const std::vector<setting>& schema = all_settings());

/// One setting's value; the alternative matches the setting's kind (in enum order).
using setting_value = std::variant<bool, int64_t, double, std::string, std::vector<std::string>,
                                   std::vector<int64_t>>;

/// A complete, validated run config: one value for every setting of a schema, all_settings()
/// unless another is given (tests pass their own to exercise every kind). A schema must outlive
/// the configs made from it; a schema whose keys clash or whose defaults fail their own checks is
/// a programming error (std::logic_error).
class run_config {
public:
  /// Every setting of all_settings() at its default; same as defaults().
  run_config();

  /// Every setting of `schema` at its default.
  static run_config defaults(const std::vector<setting>& schema = all_settings());

  /// Reads the TOML file at `path` and applies it over the defaults; a file may set only some
  /// keys. Fails with errc::invalid_config listing every problem, one per line, as
  /// `path:line: key: what was expected`: unknown keys (with a did-you-mean suggestion), wrong
  /// types, values outside `allowed` or [min, max].
  static caf::expected<run_config> load(const std::string& path,
                                        const std::vector<setting>& schema = all_settings());

  /// As load(), with `text` read from `path` (which only names the file in errors).
  static caf::expected<run_config> parse(std::string_view text, const std::string& path,
                                         const std::vector<setting>& schema = all_settings());

  /// Applies one command-line override `key=value`, e.g. "log.level=debug". The value is read by
  /// the setting's kind: strings bare or quoted, numbers and booleans as in TOML, lists as TOML
  /// arrays ("[0, 1]"). On error nothing changes and the text names the override:
  /// `override 'log.levle=debug': unknown key 'log.levle' (did you mean 'log.level'?)`.
  caf::error apply_override(const std::string& assignment);

  /// Applies several overrides in order; stops at the first error.
  caf::error apply_overrides(const std::vector<std::string>& assignments);

  /// The value of a boolean setting. Throws std::logic_error if `key` is not declared as one
  /// (a programming error, not a configuration error); so do the other getters.
  bool get_bool(const std::string& key) const;
  /// The value of an integer setting.
  int64_t get_int(const std::string& key) const;
  /// The value of a real setting.
  double get_real(const std::string& key) const;
  /// The value of a string setting.
  std::string get_string(const std::string& key) const;
  /// The value of a string_list setting.
  std::vector<std::string> get_string_list(const std::string& key) const;
  /// The value of an int_list setting.
  std::vector<int64_t> get_int_list(const std::string& key) const;

  /// The value of any declared setting as a TOML literal ("\"info\"", "1.0", "[0, 1]").
  /// Throws std::logic_error if `key` is not declared.
  std::string get_toml(const std::string& key) const;

  /// The full config as TOML: every setting (defaults filled in), grouped in tables, each with
  /// its doc, default and allowed values as comments. Written to runs/<name>/config.toml and
  /// shown by `kbrl-shell config`; parse(render()) gives back an equal config.
  std::string render() const;

  /// The settings this config holds values for.
  const std::vector<setting>& schema() const { return *schema_; }

  /// True if both have the same schema and the same value for every setting.
  friend bool operator==(const run_config& a, const run_config& b) {
    return a.schema_ == b.schema_ && a.values_ == b.values_;
  }
  /// Negation of ==.
  friend bool operator!=(const run_config& a, const run_config& b) { return !(a == b); }

private:
  run_config(const std::vector<setting>* schema, std::map<std::string, setting_value> values);

  /// The value of `key`, which must be declared with `kind` (else std::logic_error).
  const setting_value& value_of(const std::string& key, setting_kind kind) const;

  const std::vector<setting>* schema_;
  std::map<std::string, setting_value> values_;
};

} // namespace kbrl::config
