#pragma once
// A small streaming JSON writer for logs, metrics.jsonl and `--json` output.
// (simdjson parses; it does not write.) Commas and escaping are handled here so callers only
// say what goes where:  json_writer w; w.begin_object().key("a").value(1).end_object();

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl {

class json_writer {
public:
  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();
  json_writer& key(std::string_view k);
  json_writer& value(std::string_view v);
  json_writer& value(const char* v) { return value(std::string_view{v}); }
  json_writer& value(const std::string& v) { return value(std::string_view{v}); }
  json_writer& value(bool v);
  json_writer& value(int64_t v);
  json_writer& value(uint64_t v);
  json_writer& value(int32_t v) { return value(static_cast<int64_t>(v)); }
  json_writer& value(uint32_t v) { return value(static_cast<uint64_t>(v)); }
  json_writer& value(double v); ///< NaN and infinities become null (JSON has no spelling)
  json_writer& null();

  /// key(k).value(v) in one call.
  template <class T>
  json_writer& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  /// The text written so far.
  const std::string& str() const { return out_; }

private:
  void separate();
  std::string out_;
  std::vector<bool> first_; ///< per open container: nothing written in it yet
  bool after_key_ = false;
};

/// Appends s to out as a quoted JSON string (UTF-8 passes through; controls are escaped).
void append_json_string(std::string& out, std::string_view s);

} // namespace kbrl
