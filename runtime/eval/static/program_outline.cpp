#include "runtime/eval/static/program_outline.hpp"

namespace kbrl::eval::static_impl {

outline make_outline(std::string_view code) {
  outline out;
  std::vector<int> stack;
  std::vector<std::string> decorators;
  size_t n = code.size();
  size_t k = 0;
  int depth = 0;
  auto word_after = [](std::string_view text, std::string_view kw) -> std::string {
    if (text.substr(0, kw.size()) != kw || text.size() == kw.size()
        || !(text[kw.size()] == ' ' || text[kw.size()] == '\t'))
      return {};
    size_t p = kw.size();
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t'))
      ++p;
    size_t b = p;
    while (p < text.size() && is_ident_byte(text[p]))
      ++p;
    return std::string{text.substr(b, p - b)};
  };
  while (k < n) {
    size_t line_begin = k;
    size_t col = 0;
    size_t p = k;
    while (p < n && (code[p] == ' ' || code[p] == '\t' || code[p] == '\f')) {
      col = code[p] == '\t' ? (col / 8 + 1) * 8 : col + 1;
      ++p;
    }
    size_t e = p;
    while (e < n) {
      char c = code[e];
      if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == '\\' && newline_length(code, e + 1) > 0) {
        e += 1 + newline_length(code, e + 1);
        continue;
      } else if (is_newline(c) && depth == 0) {
        break;
      }
      ++e;
    }
    auto text = code.substr(p, e - p);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || is_newline(text.back())))
      text.remove_suffix(1);
    if (!text.empty()) {
      while (!stack.empty() && out.blocks[static_cast<size_t>(stack.back())].indent >= col) {
        out.blocks[static_cast<size_t>(stack.back())].end = line_begin;
        stack.pop_back();
      }
      auto def_text = text.substr(0, 6) == "async " ? text.substr(6) : text;
      while (!def_text.empty() && (def_text.front() == ' ' || def_text.front() == '\t'))
        def_text.remove_prefix(1);
      std::string def_name = word_after(def_text, "def");
      std::string class_name = word_after(text, "class");
      if (text.front() == '@') {
        decorators.emplace_back(text);
      } else if (!def_name.empty() || !class_name.empty()) {
        block b;
        b.is_class = def_name.empty();
        b.name = b.is_class ? class_name : def_name;
        b.indent = col;
        b.begin = line_begin;
        b.end = n;
        b.parent = stack.empty() ? -1 : stack.back();
        b.decorators = std::move(decorators);
        decorators.clear();
        out.blocks.push_back(std::move(b));
        stack.push_back(static_cast<int>(out.blocks.size() - 1));
      } else {
        decorators.clear();
        if (stack.empty())
          out.top_level.push_back({p, e});
      }
    }
    k = e + newline_length(code, e);
    if (k == e) // end of the source
      break;
  }
  for (int b : stack)
    out.blocks[static_cast<size_t>(b)].end = n;
  return out;
}

std::string_view self_attribute(std::string_view code, size_t k, size_t e) {
  while (k < e && (code[k] == ' ' || code[k] == '\t'))
    ++k;
  if (k >= e || code[k] != '.')
    return {};
  ++k;
  while (k < e && (code[k] == ' ' || code[k] == '\t'))
    ++k;
  size_t s = k;
  while (k < e && is_ident_byte(code[k]))
    ++k;
  return code.substr(s, k - s);
}
int top_level_class(const outline& ol, std::string_view name) {
  for (size_t i = 0; i < ol.blocks.size(); ++i)
    if (ol.blocks[i].is_class && ol.blocks[i].parent == -1 && ol.blocks[i].name == name)
      return static_cast<int>(i);
  return -1;
}

} // namespace kbrl::eval::static_impl
