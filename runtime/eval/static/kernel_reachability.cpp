// kernel_not_called: ModelNew.forward must reach the candidate's own kernel (cuda, hip, triton).

#include "runtime/eval/static/checker.hpp"

#include <map>
#include <set>

namespace kbrl::eval::static_impl {

/// For cuda, hip and triton: the names that lead to the candidate's own kernel (the module
/// load_inline returns, @triton.jit functions, and every module-level def, class or variable
/// that uses one) must be used by ModelNew.forward, directly or through `self.attr` set from
/// one, or through another method of ModelNew that does.
void checker::check_kernel_called() {
  const outline& ol = outline_;
  size_t r = rule("kernel_not_called");
  if (!on(r))
    return;
  const auto& h = table().helpers;
  std::string_view code = lexed_.code;
  using name_set = std::set<std::string, std::less<>>;
  name_set names;      // module-level names that reach a kernel
  name_set attr_seeds; // self.X = load_inline(...)
  if (backend_ == kernel_backend::triton) {
    for (const auto& b : ol.blocks)
      if (!b.is_class)
        for (const auto& d : b.decorators)
          if (m_.find(h.triton_deco.get(), d, 0))
            names.insert(b.name);
  } else {
    for (size_t from = 0; m_.find(h.load_assign.get(), code, from); from = m_.end()) {
      if (m_.matched(1))
        attr_seeds.emplace(m_.group(code, 2));
      else
        names.emplace(m_.group(code, 2));
    }
    for (const auto& b : ol.blocks) // a module-level def that builds the extension
      if (!b.is_class && b.parent == -1
          && m_.find(h.load_call.get(), code.substr(0, b.end), b.begin))
        names.insert(b.name);
  }
  if (names.empty() && attr_seeds.empty())
    return; // the backend rule already says the kernel is missing
  int model_new = top_level_class(ol, "ModelNew");
  // Module level: a def, class or assignment that mentions a kernel name is one too. Each
  // unit is read once; the closure is a walk over "name -> units that mention it".
  struct unit {
    std::string name;
    size_t begin, end;
  };
  std::vector<unit> units;
  for (size_t i = 0; i < ol.blocks.size(); ++i)
    if (ol.blocks[i].parent == -1 && static_cast<int>(i) != model_new)
      units.push_back({ol.blocks[i].name, ol.blocks[i].begin, ol.blocks[i].end});
  for (const auto& st : ol.top_level) {
    auto text = code.substr(st.begin, st.end - st.begin);
    if (m_.find(h.top_assign.get(), text, 0))
      units.push_back({std::string{m_.group(text, 1)}, st.begin + m_.end(), st.end});
  }
  std::map<std::string, std::vector<size_t>, std::less<>> mentioned_by;
  for (size_t u = 0; u < units.size(); ++u)
    for_each_name(code, units[u].begin, units[u].end,
                  [&](std::string_view id, bool attribute, size_t) {
                    if (!attribute)
                      mentioned_by[std::string{id}].push_back(u);
                  });
  auto close_over = [](name_set& reached, const auto& edges, auto&& target_of) {
    std::vector<std::string> work(reached.begin(), reached.end());
    while (!work.empty()) {
      auto name = std::move(work.back());
      work.pop_back();
      auto it = edges.find(name);
      if (it == edges.end())
        continue;
      for (const auto& next : it->second) {
        const std::string& t = target_of(next);
        if (reached.insert(t).second)
          work.push_back(t);
      }
    }
  };
  close_over(names, mentioned_by, [&](size_t u) -> const std::string& { return units[u].name; });
  if (model_new < 0)
    return; // model_new_missing says it
  const auto& cls = ol.blocks[static_cast<size_t>(model_new)];
  // ModelNew: attributes that hold a kernel (self.X = <kernel name or kernel attribute>) and
  // methods that reach one (use a kernel name, a kernel attribute, an operator of the
  // candidate's own namespace, or a method that does), each as a walk over edges.
  name_set attrs = attr_seeds;
  name_set reaching;
  std::map<std::string, std::vector<std::string>, std::less<>> attr_edges;   // rhs -> attr
  std::map<std::string, std::vector<std::string>, std::less<>> method_edges; // self.X -> method
  const block* forward = nullptr;
  auto line_end = [&](size_t k) {
    while (k < code.size() && !is_newline(code[k]))
      ++k;
    return k;
  };
  for (const auto& b : ol.blocks) {
    if (b.parent != model_new || b.is_class)
      continue;
    if (b.name == "forward")
      forward = &b;
    bool direct = m_.find(h.custom_op.get(), code.substr(0, b.end), b.begin);
    for_each_name(code, b.begin, b.end, [&](std::string_view id, bool attribute, size_t k) {
      if (attribute)
        return;
      if (names.count(id) > 0)
        direct = true;
      else if (id == "self")
        method_edges[std::string{self_attribute(code, k, b.end)}].push_back(b.name);
    });
    if (direct)
      reaching.insert(b.name);
    for (size_t from = b.begin; m_.find(h.self_assign.get(), code.substr(0, b.end), from);
         from = std::max(m_.end(), from + 1)) {
      if (!m_.matched(1))
        continue;
      std::string attr{m_.group(code, 1)};
      size_t rhs = m_.end(), eol = line_end(rhs);
      for_each_name(code, rhs, eol, [&](std::string_view id, bool attribute, size_t k) {
        if (attribute)
          return;
        if (names.count(id) > 0)
          attrs.insert(attr);
        else if (id == "self")
          attr_edges[std::string{self_attribute(code, k, eol)}].push_back(attr);
      });
    }
  }
  auto same = [](const std::string& x) -> const std::string& { return x; };
  close_over(attrs, attr_edges, same);
  for (const auto& a : attrs) // a method that mentions self.<kernel attribute>
    if (auto it = method_edges.find(a); it != method_edges.end())
      reaching.insert(it->second.begin(), it->second.end());
  close_over(reaching, method_edges, same);
  const char* what = backend_ == kernel_backend::triton ? "@triton.jit kernel"
                                                         : "load_inline module";
  if (forward == nullptr) {
    // A forward inherited from a class of this file counts if that class reaches a kernel.
    auto header = code.substr(cls.begin, std::min(cls.end, line_end(cls.begin)) - cls.begin);
    bool inherited = false;
    for_each_name(header, 0, header.size(), [&](std::string_view id, bool, size_t) {
      inherited = inherited || names.count(id) > 0;
    });
    if (!inherited)
      add(r, cls.begin, std::string{"ModelNew defines no forward that reaches the "} + what);
    return;
  }
  if (reaching.count("forward") == 0)
    add(r, forward->begin,
        std::string{"ModelNew.forward never uses the "} + what
          + ": PyTorch does the work, not the kernel");
}

} // namespace kbrl::eval::static_impl
