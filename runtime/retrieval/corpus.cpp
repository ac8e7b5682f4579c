#include "runtime/retrieval/corpus.hpp"

#include "messages/errors.hpp"
#include "runtime/config/config_error.hpp"
#include "runtime/io/hash.hpp"
#include "runtime/io/text.hpp"
#include "runtime/retrieval/source_keys.hpp"

#include <simdjson.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace kbrl::retrieval {

namespace {

namespace fs = std::filesystem;
using simdjson::dom::element;
using simdjson::dom::element_type;

// -- reading fields of a row ----------------------------------------------------------------------

/// Why a row is malformed; thrown inside row reading only, caught per line.
struct row_error {
  std::string reason;
};

std::string type_name(element_type t) {
  switch (t) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "unknown";
}

/// The field, or nullopt when the row lacks it or it is null.
std::optional<element> field(const element& row, const std::string& key) {
  if (key.empty())
    return std::nullopt;
  element value;
  if (row[key].get(value) != simdjson::SUCCESS || value.type() == element_type::NULL_VALUE)
    return std::nullopt;
  return value;
}

std::string required_text(const element& row, const std::string& key) {
  auto v = field(row, key);
  if (!v)
    throw row_error{"field '" + key + "' is missing"};
  if (v->type() != element_type::STRING)
    throw row_error{"field '" + key + "' is " + type_name(v->type()) + ", expected a string"};
  std::string_view s = v->get_string().value_unsafe();
  if (s.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw row_error{"field '" + key + "' is empty"};
  return std::string{s};
}

/// A scalar as text, for ids and names: strings as they are, numbers and booleans written out.
std::optional<std::string> scalar_text(const element& row, const std::string& key) {
  auto v = field(row, key);
  if (!v)
    return std::nullopt;
  switch (v->type()) {
    case element_type::STRING: return std::string{v->get_string().value_unsafe()};
    case element_type::INT64: return std::to_string(v->get_int64().value_unsafe());
    case element_type::UINT64: return std::to_string(v->get_uint64().value_unsafe());
    case element_type::DOUBLE: {
      double d = v->get_double().value_unsafe();
      if (d == std::floor(d) && std::fabs(d) < 1e15)
        return std::to_string(static_cast<int64_t>(d));
      return std::to_string(d);
    }
    case element_type::BOOL: return v->get_bool().value_unsafe() ? "true" : "false";
    default:
      throw row_error{"field '" + key + "' is " + type_name(v->type()) + ", expected a scalar"};
  }
}

/// A number, or a string holding one.
std::optional<double> number(const element& row, const std::string& key) {
  auto v = field(row, key);
  if (!v)
    return std::nullopt;
  switch (v->type()) {
    case element_type::INT64: return static_cast<double>(v->get_int64().value_unsafe());
    case element_type::UINT64: return static_cast<double>(v->get_uint64().value_unsafe());
    case element_type::DOUBLE: return v->get_double().value_unsafe();
    case element_type::STRING: {
      std::string s{v->get_string().value_unsafe()};
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && errno == 0 && std::isfinite(d))
        return d;
      if (s.empty() || s == "nan" || s == "NaN" || s == "None")
        return std::nullopt; // pandas' spellings of a missing value
      throw row_error{"field '" + key + "' is \"" + s + "\", expected a number"};
    }
    default:
      throw row_error{"field '" + key + "' is " + type_name(v->type()) + ", expected a number"};
  }
}

std::optional<bool> boolean(const element& row, const std::string& key) {
  auto v = field(row, key);
  if (!v)
    return std::nullopt;
  if (v->type() == element_type::BOOL)
    return v->get_bool().value_unsafe();
  if (v->type() == element_type::INT64 || v->type() == element_type::UINT64) {
    int64_t i = v->type() == element_type::INT64
                  ? v->get_int64().value_unsafe()
                  : static_cast<int64_t>(v->get_uint64().value_unsafe());
    if (i == 0 || i == 1)
      return i == 1;
  }
  if (v->type() == element_type::STRING) {
    std::string s{v->get_string().value_unsafe()};
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    if (s == "true" || s == "1")
      return true;
    if (s == "false" || s == "0")
      return false;
  }
  throw row_error{"field '" + key + "' is " + type_name(v->type())
                  + ", expected a boolean (true/false, 0/1)"};
}

corpus_entry read_row(const element& row, const field_mapping& m, const std::string& file_name,
                      int64_t line) {
  if (row.type() != element_type::OBJECT)
    throw row_error{"the line is " + type_name(row.type()) + ", expected a JSON object"};
  corpus_entry e;
  e.line = line;
  e.reference_source = required_text(row, m.reference);
  e.kernel_source = required_text(row, m.kernel);
  std::vector<std::string> id_parts;
  for (const auto& key : m.id)
    if (auto t = scalar_text(row, key))
      id_parts.push_back(*t);
  e.id = id_parts.empty() ? file_name + ":" + std::to_string(line) : join(id_parts, "/");
  if (auto n = scalar_text(row, m.name_field))
    e.name = *n;
  e.backend = m.backend;
  if (auto b = scalar_text(row, m.backend_field)) {
    auto parsed = parse_backend(*b);
    if (!parsed)
      throw row_error{"field '" + m.backend_field + "' is \"" + *b + "\", expected one of "
                      + join(backend_names())};
    e.backend = *parsed;
  }
  if (auto level = number(row, m.level)) {
    if (*level != std::floor(*level) || *level < 0 || *level > 1000)
      throw row_error{"field '" + m.level + "' is " + std::to_string(*level)
                      + ", expected a level from 0 to 1000"};
    e.level = static_cast<int32_t>(*level);
  }
  e.correct = boolean(row, m.correct);
  if (auto s = number(row, m.speedup)) {
    if (!std::isfinite(*s) || *s < 0)
      throw row_error{"field '" + m.speedup + "' is " + std::to_string(*s)
                      + ", expected a speedup >= 0"};
    e.speedup = *s;
  }
  e.reference_hash = reference_hash(e.reference_source);
  e.reference_key = reference_key(e.reference_source);
  return e;
}

/// Which filter drops `e`, or nullptr.
int64_t* dropping_filter(const corpus_entry& e, const corpus_filters& f, corpus_report& r) {
  if (!f.backends.empty()
      && std::find(f.backends.begin(), f.backends.end(), e.backend) == f.backends.end())
    return &r.dropped_backend;
  if (f.require_correct && e.correct && !*e.correct)
    return &r.dropped_incorrect;
  if (f.min_speedup > 0 && (e.speedup <= 0 || e.speedup < f.min_speedup))
    return &r.dropped_speedup;
  if (!f.levels.empty() && std::find(f.levels.begin(), f.levels.end(), e.level) == f.levels.end())
    return &r.dropped_level;
  return nullptr;
}

std::string line_list(const std::vector<malformed_line>& lines, size_t most) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < lines.size() && i < most; ++i)
    parts.push_back(std::to_string(lines[i].line));
  auto text = join(parts, ", ");
  if (lines.size() > most)
    text += ", ...";
  return text;
}

// -- mapping files --------------------------------------------------------------------------------

int line_of(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

} // namespace

field_mapping kernelbook_mapping() {
  field_mapping m;
  m.name = "kernelbook";
  m.id = {"uuid"};
  m.name_field = "entry_point";
  m.reference = "python_code";
  m.kernel = "triton_code";
  m.backend = kernel_backend::triton;
  return m;
}

field_mapping sakana_mapping() {
  field_mapping m;
  m.name = "sakana";
  m.id = {"Level_ID", "Task_ID", "Kernel_Name"};
  m.name_field = "Op_Name";
  m.reference = "PyTorch_Code_Module";
  m.kernel = "CUDA_Code";
  m.backend = kernel_backend::cuda;
  m.level = "Level_ID";
  m.correct = "Correct";
  m.speedup = "CUDA_Speedup_Native";
  return m;
}

caf::expected<field_mapping> load_field_mapping(const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    const auto& src = err.source();
    return config::config_error(path, static_cast<int>(src.begin.line), "",
                                std::string{err.description()});
  }
  config::config_errors errors(path);
  field_mapping m;
  m.name = path;
  const std::vector<std::string> keys = {"reference", "kernel", "backend", "backend_field", "id",
                                         "name", "level", "correct", "speedup"};
  for (auto&& [key, value] : doc) {
    const std::string k{key.str()};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      errors.add(static_cast<int>(key.source().begin.line), k,
                 "unknown key" + config::did_you_mean(k, keys));
      continue;
    }
    if (k == "id") {
      const auto* arr = value.as_array();
      const auto* single = value.as_string();
      if (single != nullptr) {
        m.id = {single->get()};
      } else if (arr != nullptr) {
        for (auto& item : *arr) {
          if (const auto* s = item.as_string())
            m.id.push_back(s->get());
          else
            errors.add(line_of(item), "id", "expected field names (strings)");
        }
      } else {
        errors.add(line_of(value), "id", "expected a field name or an array of them");
      }
      continue;
    }
    const auto* s = value.as_string();
    if (s == nullptr) {
      errors.add(line_of(value), k, "expected a string");
      continue;
    }
    const std::string text = s->get();
    if (k == "reference")
      m.reference = text;
    else if (k == "kernel")
      m.kernel = text;
    else if (k == "backend") {
      if (auto b = parse_backend(text))
        m.backend = *b;
      else
        errors.add(line_of(value), k, "expected one of " + join(backend_names()) + ", got \""
                                        + text + "\"");
    } else if (k == "backend_field")
      m.backend_field = text;
    else if (k == "name")
      m.name_field = text;
    else if (k == "level")
      m.level = text;
    else if (k == "correct")
      m.correct = text;
    else if (k == "speedup")
      m.speedup = text;
  }
  for (const char* required : {"reference", "kernel"}) {
    const auto* v = doc.get(required);
    if (v == nullptr)
      errors.add(0, required, "required key is missing: the JSON field that holds the "
                                + std::string{required == std::string{"reference"}
                                                ? "PyTorch reference program"
                                                : "kernel source"});
    else if (const auto* s = v->as_string(); s != nullptr && s->get().empty())
      errors.add(line_of(*v), required, "expected a non-empty field name");
  }
  if (!errors.empty())
    return errors.to_error();
  return m;
}

caf::expected<field_mapping> resolve_field_mapping(const std::string& name_or_path) {
  if (name_or_path == "kernelbook")
    return kernelbook_mapping();
  if (name_or_path == "sakana")
    return sakana_mapping();
  std::error_code ec;
  if (!fs::is_regular_file(name_or_path, ec))
    return make_error(errc::invalid_argument,
                      "mapping '" + name_or_path
                        + "': expected kernelbook, sakana or the path of a TOML mapping file");
  return load_field_mapping(name_or_path);
}

int64_t corpus_report::skipped() const {
  return static_cast<int64_t>(malformed.size()) + dropped_backend + dropped_incorrect
         + dropped_speedup + dropped_level + duplicates;
}

std::string corpus_report::summary() const {
  std::vector<std::string> parts{std::to_string(kept) + " kept"};
  if (!malformed.empty())
    parts.push_back(std::to_string(malformed.size()) + " malformed (line"
                    + (malformed.size() > 1 ? "s " : " ") + line_list(malformed, 10) + ")");
  auto add = [&](int64_t n, const char* what) {
    if (n > 0)
      parts.push_back(std::to_string(n) + " " + what);
  };
  add(dropped_backend, "dropped for their backend");
  add(dropped_incorrect, "dropped as incorrect");
  add(dropped_speedup, "dropped below the minimum speedup");
  add(dropped_level, "dropped for their level");
  add(duplicates, duplicates == 1 ? "duplicate" : "duplicates");
  return std::to_string(lines) + " lines: " + join(parts, ", ");
}

caf::expected<corpus> load_corpus(const std::string& path, const field_mapping& mapping,
                                  const corpus_filters& filters) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure,
                      "corpus " + path + ": cannot open: " + std::strerror(errno));
  const std::string file_name = fs::path(path).filename().string();
  corpus out;
  auto& report = out.report;
  io::sha256_stream digest;
  simdjson::dom::parser parser;
  std::unordered_map<std::string, size_t> by_duplicate_key; // -> index in out.entries
  int64_t line_number = 0;

  auto handle_line = [&](std::string_view raw) {
    ++line_number;
    if (!raw.empty() && raw.back() == '\r')
      raw.remove_suffix(1);
    if (raw.find_first_not_of(" \t") == std::string_view::npos)
      return;
    ++report.lines;
    element row;
    if (auto err = parser.parse(raw.data(), raw.size()).get(row)) {
      report.malformed.push_back({line_number, std::string{"not JSON: "}
                                                 + simdjson::error_message(err)});
      return;
    }
    corpus_entry e;
    try {
      e = read_row(row, mapping, file_name, line_number);
    } catch (const row_error& err) {
      report.malformed.push_back({line_number, err.reason});
      return;
    }
    if (int64_t* counter = dropping_filter(e, filters, report)) {
      ++*counter;
      return;
    }
    auto key = duplicate_key(e.reference_source, e.kernel_source);
    auto [it, fresh] = by_duplicate_key.emplace(std::move(key), out.entries.size());
    if (!fresh) {
      ++report.duplicates;
      auto& kept = out.entries[it->second];
      if (e.speedup > kept.speedup) { // keep the best-labelled copy, at the first one's place
        e.line = kept.line;
        kept = std::move(e);
      }
      return;
    }
    out.entries.push_back(std::move(e));
  };

  std::string pending;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    std::string_view chunk(buf.data(), got);
    digest.update(chunk);
    size_t start = 0;
    while (true) {
      const size_t nl = chunk.find('\n', start);
      if (nl == std::string_view::npos) {
        pending.append(chunk.substr(start));
        break;
      }
      if (pending.empty()) {
        handle_line(chunk.substr(start, nl - start));
      } else {
        pending.append(chunk.substr(start, nl - start));
        handle_line(pending);
        pending.clear();
      }
      start = nl + 1;
    }
  }
  if (in.bad())
    return make_error(errc::io_failure, "corpus " + path + ": read failed");
  if (!pending.empty())
    handle_line(pending);
  out.sha256 = digest.hex();
  report.kept = static_cast<int64_t>(out.entries.size());

  if (report.lines == 0)
    return make_error(errc::invalid_argument, "corpus " + path + " has no lines");
  if (static_cast<int64_t>(report.malformed.size()) == report.lines) {
    std::string text = "corpus " + path + ": every line is malformed (mapping '" + mapping.name
                       + "'):";
    for (size_t i = 0; i < report.malformed.size() && i < 5; ++i)
      text += "\n  line " + std::to_string(report.malformed[i].line) + ": "
              + report.malformed[i].reason;
    if (report.malformed.size() > 5)
      text += "\n  ... and " + std::to_string(report.malformed.size() - 5) + " more";
    return make_error(errc::invalid_argument, std::move(text));
  }
  if (out.entries.empty())
    return make_error(errc::invalid_argument,
                      "corpus " + path + ": the filters left no entry (" + report.summary() + ")");
  return out;
}

} // namespace kbrl::retrieval
