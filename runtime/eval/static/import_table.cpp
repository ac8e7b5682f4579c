#include "runtime/eval/static/import_table.hpp"

#include "runtime/eval/static/pattern_table.hpp"
#include "runtime/eval/static/program_outline.hpp"

namespace kbrl::eval::static_impl {

namespace {

/// Splits "a.b as c, d" (or "(b as c,\n d)") into (dotted name, bound alias or "").
std::vector<std::pair<std::string, std::string>> import_items(std::string_view list) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  for (size_t j = 0; j <= list.size(); ++j) {
    if (j < list.size() && list[j] != ',')
      continue;
    auto item = list.substr(start, j - start);
    start = j + 1;
    std::string dotted, alias;
    bool after_as = false;
    size_t k = 0;
    while (k < item.size()) {
      if (!is_ident_start(item[k])) {
        if (item[k] == '.' && !after_as)
          dotted.push_back('.');
        ++k;
        continue;
      }
      size_t b = k;
      while (k < item.size() && is_ident_byte(item[k]))
        ++k;
      auto word = item.substr(b, k - b);
      if (word == "as")
        after_as = true;
      else if (after_as)
        alias = std::string{word};
      else
        dotted.append(word);
    }
    if (!dotted.empty() && dotted.front() != '.' && dotted.back() != '.')
      out.emplace_back(std::move(dotted), std::move(alias));
  }
  return out;
}

/// Bare names bound at the start of a statement (`x = ...`, `x: T = ...`), by `for x in`, by
/// `with ... as x` or `except ... as x`, and by def/class: each counts once per place.
std::map<std::string, int, std::less<>>
count_bindings(std::string_view code, const std::vector<std::pair<size_t, size_t>>& imports) {
  std::map<std::string, int, std::less<>> count;
  auto in_import = [&](size_t k) {
    for (auto [b, e] : imports)
      if (k >= b && k < e)
        return true;
    return false;
  };
  auto line_start = [&](size_t k) {
    while (k > 0 && is_blank(code[k - 1]))
      --k;
    return k == 0 || is_newline(code[k - 1]) || code[k - 1] == ';';
  };
  for_each_name(code, 0, code.size(), [&](std::string_view id, bool attribute, size_t end) {
    size_t b = end - id.size();
    if (attribute || in_import(b))
      return;
    size_t k = end;
    while (k < code.size() && is_blank(code[k]))
      ++k;
    bool assigned = k < code.size() && code[k] == '=' && !(k + 1 < code.size() && code[k + 1] == '=')
                    && line_start(b);
    bool annotated = k < code.size() && code[k] == ':' && line_start(b);
    size_t p = b;
    while (p > 0 && is_blank(code[p - 1]))
      --p;
    auto before = [&](std::string_view kw) {
      return p >= kw.size() && code.substr(p - kw.size(), kw.size()) == kw
             && (p == kw.size() || !is_ident_byte(code[p - kw.size() - 1]));
    };
    if (assigned || annotated || before("for") || before("def") || before("class")
        || before("as"))
      ++count[std::string{id}];
  });
  return count;
}

} // namespace

std::string conventional_path(std::string path) {
  static const std::pair<const char*, const char*> short_names[] = {
    {"triton.language", "tl"}, {"tilelang.language", "T"}};
  for (auto [full, short_name] : short_names) {
    std::string_view f = full;
    if (path.compare(0, f.size(), f) == 0 && (path.size() == f.size() || path[f.size()] == '.'))
      return short_name + path.substr(f.size());
  }
  return path;
}

import_table read_imports(std::string_view code, matcher& m) {
  const auto& h = table().helpers;
  import_table out;
  std::map<std::string, std::string, std::less<>> bound; // name -> path, first binding
  auto bind = [&](const std::string& name, std::string path) {
    out.imported.insert(name);
    bound.emplace(name, conventional_path(std::move(path)));
  };
  for (size_t from = 0; m.find(h.import_stmt.get(), code, from); from = m.end()) {
    out.statements.emplace_back(m.begin(), m.end());
    for (auto& [dotted, alias] : import_items(m.group(code, 1))) {
      if (!alias.empty())
        bind(alias, dotted);
      else
        bind(dotted.substr(0, dotted.find('.')), dotted.substr(0, dotted.find('.')));
    }
  }
  for (size_t from = 0; m.find(h.from_import.get(), code, from); from = m.end()) {
    out.statements.emplace_back(m.begin(), m.end());
    std::string module{m.group(code, 1)};
    if (module.empty() || module.front() == '.')
      continue; // relative imports name the candidate's own package: nothing to resolve
    for (auto& [dotted, alias] : import_items(m.group(code, 2)))
      if (dotted != "*")
        bind(alias.empty() ? dotted : alias, module + "." + dotted);
  }
  // Module-level `name = dotted.path` where the path starts with a bound name.
  outline ol = make_outline(code);
  for (const auto& st : ol.top_level) {
    auto text = code.substr(st.begin, st.end - st.begin);
    size_t k = 0;
    while (k < text.size() && is_ident_byte(text[k]))
      ++k;
    if (k == 0 || is_digit(text[0]))
      continue;
    std::string name{text.substr(0, k)};
    while (k < text.size() && is_blank(text[k]))
      ++k;
    if (k >= text.size() || text[k] != '=' || (k + 1 < text.size() && text[k + 1] == '='))
      continue;
    ++k;
    while (k < text.size() && is_blank(text[k]))
      ++k;
    std::string path;
    bool ok = k < text.size() && is_ident_start(text[k]);
    for (; ok && k < text.size(); ++k) {
      char c = text[k];
      if (is_ident_byte(c) || c == '.')
        path.push_back(c);
      else if (!is_blank(c))
        ok = false;
    }
    if (!ok || path.empty() || path.back() == '.')
      continue;
    auto head = path.substr(0, path.find('.'));
    auto it = bound.find(head);
    if (it == bound.end())
      continue;
    bound.emplace(name, conventional_path(it->second + path.substr(head.size())));
  }
  // A name bound more than once (an import plus an assignment, a loop variable, a def) is
  // ambiguous: it is not resolved.
  auto bindings = count_bindings(code, out.statements);
  for (auto& [name, path] : bound) {
    auto it = bindings.find(name);
    int assigned = it == bindings.end() ? 0 : it->second;
    bool alias_by_assignment = out.imported.count(name) == 0;
    if (assigned > (alias_by_assignment ? 1 : 0))
      continue;
    if (path != name)
      out.aliases.emplace(name, path);
  }
  return out;
}

} // namespace kbrl::eval::static_impl
