#include "runtime/eval/static/pattern_table.hpp"

#include "runtime/eval/static/rule_table.hpp"

#include <stdexcept>
#include <string_view>

namespace kbrl::eval::static_impl {

namespace {

std::vector<std::string> split_hints(const char* hints) {
  std::vector<std::string> out;
  std::string_view sv = hints;
  while (!sv.empty()) {
    auto bar = sv.find('|');
    out.emplace_back(sv.substr(0, bar));
    if (bar == std::string_view::npos)
      break;
    sv.remove_prefix(bar + 1);
  }
  return out;
}

void compile_helpers(helper_patterns& h) {
  h.load_assign = compile_regex(
    R"re((\bself\s*\.\s*)?\b(\w+)\s*=\s*(?:[\w.]+\.)?load(?:_inline)?\s*\()re");
  h.load_call = compile_regex(R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re");
  h.triton_deco = compile_regex(R"re(^@\s*triton\.(?:jit|autotune|heuristics)\b)re");
  h.self_assign = compile_regex(
    R"re(\bself\s*\.\s*(\w+)(?:\s*\[[^\]\r\n]*\])?\s*(?:=(?!=)|[-+*/|&]=)|)re"
    R"re(\bself\s*\.\s*(\w+)\s*\.\s*(?:update|setdefault|append|extend|insert|add|)re"
    R"re(__setitem__)\s*\(|\bsetattr\s*\(\s*self\b())re");
  h.name_mutate = compile_regex(
    R"re((?<![\w.])(\w+)\s*\[[^\]\r\n]*\]\s*=(?!=)|(?<![\w.])(\w+)\s*\.\s*(?:update|)re"
    R"re(setdefault|append|extend|insert|add|__setitem__)\s*\()re");
  h.global_decl = compile_regex(R"re(\bglobal\s+(\w+(?:\s*,\s*\w+)*))re");
  h.top_assign = compile_regex(R"re(^(\w+)\s*(?::[^=\r\n]*)?=(?!=))re");
  h.returned = compile_regex(
    R"re(^\s*(?:self\s*\.\s*(\w+)|(\w+))(?:\s*\[[^\]]*\])?(?:\s*\.\s*(?:clone|detach|)re"
    R"re(contiguous|view|view_as|reshape|reshape_as|expand|expand_as|to|float|cuda|cpu|)re"
    R"re(squeeze|unsqueeze|flatten|t|permute|transpose|type_as|)re"
    R"re(requires_grad_)\s*\([^()]*\))*\s*$)re");
  h.coding = compile_regex(R"re(^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+))re");
  h.import_stmt = compile_regex(R"re(^[ \t]*import[ \t]+([^\r\n;]+))re");
  h.from_import = compile_regex(
    R"re(^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\r\n;]+))re");
  h.attr_assign = compile_regex(
    R"re(:\s*\w+(?:\s*\.\s*\w+)+\s*=(*SKIP)(*F)|(?<![\w.])(\w+)((?:\s*\.\s*\w+)+)\s*=(?!=))re");
  h.setattr_call = compile_regex(R"re(\bsetattr\s*\(\s*(\w+)\s*[,.])re");
  h.custom_op = compile_regex(
    R"re(\btorch\s*\.\s*ops\s*\.\s*(?!aten\b|prims?\b)\w+\s*\.\s*\w+)re");
  h.dispatch = compile_regex(R"re(\bAT_DISPATCH_\w+\s*\()re");
}

} // namespace

const pattern_table& table() {
  static const pattern_table instance = [] {
    pattern_table t;
    for (auto list : {kernelbench_patterns(), sandbox_patterns()}) {
      for (size_t i = 0; i < list.second; ++i) {
        const auto& p = list.first[i];
        auto idx = rule_index(p.rule);
        if (idx == rule_count())
          throw std::logic_error(std::string{"static_checks: pattern for unknown rule "} + p.rule);
        t.patterns.push_back(compiled_pattern{idx, p.where, p.kind, p.group,
                                              split_hints(p.hints), compile_regex(p.regex),
                                              p.message});
      }
    }
    compile_helpers(t.helpers);
    return t;
  }();
  return instance;
}

} // namespace kbrl::eval::static_impl
