#include "runtime/retrieval/source_keys.hpp"

#include "runtime/eval/eval_engine.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/retrieval/python_lexer.hpp"

#include <cctype>

namespace kbrl::retrieval {

std::string normalized_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i <= text.size()) {
    size_t end = text.find_first_of("\r\n", i);
    if (end == std::string_view::npos)
      end = text.size();
    auto line = text.substr(i, end - i);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (!line.empty()) {
      if (!out.empty())
        out += '\n';
      out += line;
    }
    if (end == text.size())
      break;
    i = end + 1;
  }
  return out;
}

std::string reference_hash(std::string_view python_source) {
  return eval::normalized_source_hash(std::string{python_source});
}

std::string reference_key(std::string_view python_source) {
  std::string joined;
  joined.reserve(python_source.size());
  for (const auto& t : lex_python(python_source)) {
    if (t.kind == py_token_kind::comment || t.kind == py_token_kind::newline
        || (t.kind == py_token_kind::string && t.statement_string))
      continue;
    if (!joined.empty())
      joined += ' ';
    joined += t.text;
  }
  return eval::source_hash(joined);
}

std::string duplicate_key(std::string_view reference_source, std::string_view kernel_source) {
  auto text = normalized_whitespace(reference_source);
  text += '\0';
  text += normalized_whitespace(kernel_source);
  return eval::source_hash(text);
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (auto b : {kernel_backend::cuda, kernel_backend::triton, kernel_backend::torch,
                   kernel_backend::hip, kernel_backend::cute, kernel_backend::tilelang,
                   kernel_backend::thunderkittens})
      out.emplace_back(to_string(b));
    return out;
  }();
  return names;
}

std::optional<kernel_backend> parse_backend(std::string_view name) {
  std::string lower;
  for (char c : name)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto& names = backend_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == lower)
      return static_cast<kernel_backend>(i);
  return std::nullopt;
}

} // namespace kbrl::retrieval
