// output_cache, structurally: forward returning state that outlives the call.

#include "runtime/eval/static/checker.hpp"

#include <map>
#include <set>

namespace kbrl::eval::static_impl {

/// forward/__call__ returning state that outlives the call: an attribute of self assigned
/// outside __init__, a name declared global, or a module-level container filled by a
/// function. (Memoisation decorators and identity keys are table patterns.)
void checker::check_output_cache() {
  const outline& ol = outline_;
  size_t r = rule("output_cache");
  if (!on(r))
    return;
  const auto& h = table().helpers;
  std::string_view code = lexed_.code;
  std::set<std::string, std::less<>> module_names;
  for (const auto& st : ol.top_level) {
    auto text = code.substr(st.begin, st.end - st.begin);
    if (m_.find(h.top_assign.get(), text, 0))
      module_names.emplace(m_.group(text, 1));
  }
  std::set<std::string, std::less<>> persistent; // module-level names kept across calls
  std::map<int, std::set<std::string, std::less<>>> class_attrs; // class -> attributes
  std::set<int> class_any; // classes that setattr(self, ...)
  for (size_t i = 0; i < ol.blocks.size(); ++i) {
    const auto& b = ol.blocks[i];
    if (b.is_class)
      continue;
    auto body = code.substr(0, b.end);
    for (size_t from = b.begin; m_.find(h.global_decl.get(), body, from); from = m_.end()) {
      auto list = m_.group(body, 1);
      for_each_name(list, 0, list.size(), [&](std::string_view id, bool, size_t) {
        persistent.emplace(id);
      });
    }
    for (size_t from = b.begin; m_.find(h.name_mutate.get(), body, from);
         from = std::max(m_.end(), from + 1)) {
      auto id = m_.matched(1) ? m_.group(body, 1) : m_.group(body, 2);
      if (module_names.count(id) > 0)
        persistent.emplace(id);
    }
    if (b.parent >= 0 && ol.blocks[static_cast<size_t>(b.parent)].is_class
        && b.name != "__init__") {
      for (size_t from = b.begin; m_.find(h.self_assign.get(), body, from);
           from = std::max(m_.end(), from + 1)) {
        if (m_.matched(1))
          class_attrs[b.parent].emplace(m_.group(body, 1));
        else if (m_.matched(2))
          class_attrs[b.parent].emplace(m_.group(body, 2));
        else
          class_any.insert(b.parent);
      }
    }
  }
  for (const auto& b : ol.blocks) {
    if (b.is_class || (b.name != "forward" && b.name != "__call__"))
      continue;
    const auto* attrs = b.parent >= 0 && class_attrs.count(b.parent) > 0
                          ? &class_attrs.at(b.parent)
                          : nullptr;
    bool any = b.parent >= 0 && class_any.count(b.parent) > 0;
    for_each_name(code, b.begin, b.end, [&](std::string_view id, bool attribute, size_t k) {
      if (attribute || id != "return")
        return;
      // The returned expression up to the end of its logical line, split at top-level commas.
      size_t e = k;
      int depth = 0;
      while (e < b.end && !(depth == 0 && (is_newline(code[e]) || code[e] == ';'))) {
        if (code[e] == '(' || code[e] == '[' || code[e] == '{')
          ++depth;
        else if ((code[e] == ')' || code[e] == ']' || code[e] == '}') && depth > 0)
          --depth;
        ++e;
      }
      auto expr = code.substr(k, e - k);
      while (!expr.empty() && (expr.front() == ' ' || expr.front() == '\t'))
        expr.remove_prefix(1);
      if (expr.size() >= 2 && expr.front() == '(' && expr.back() == ')')
        expr = expr.substr(1, expr.size() - 2);
      size_t start = 0;
      depth = 0;
      for (size_t j = 0; j <= expr.size(); ++j) {
        char c = j < expr.size() ? expr[j] : ',';
        if (c == '(' || c == '[' || c == '{')
          ++depth;
        else if ((c == ')' || c == ']' || c == '}') && depth > 0)
          --depth;
        if (c != ',' || depth > 0)
          continue;
        auto element = expr.substr(start, j - start);
        start = j + 1;
        if (!m_.find(h.returned.get(), element, 0))
          continue;
        if (m_.matched(1)) {
          auto attr = m_.group(element, 1);
          if (any || (attrs != nullptr && attrs->count(attr) > 0))
            add(r, k, "forward returns self." + std::string{attr}
                        + ", which is kept across calls: outputs can be cached");
        } else if (persistent.count(m_.group(element, 2)) > 0) {
          add(r, k, "forward returns " + std::string{m_.group(element, 2)}
                      + ", module state kept across calls: outputs can be cached");
        }
      }
    });
  }
}

} // namespace kbrl::eval::static_impl
