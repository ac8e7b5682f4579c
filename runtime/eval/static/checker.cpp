#include "runtime/eval/static/checker.hpp"

#include <algorithm>

namespace kbrl::eval::static_impl {

namespace {

std::string expand(const std::string& message, std::string_view matched) {
  auto pos = message.find("{m}");
  if (pos == std::string::npos)
    return message;
  std::string m;
  for (char c : matched) {
    if (c == '\n' || c == '\r' || c == '\t' || c == '\f')
      c = ' ';
    if (c == ' ' && (m.empty() || m.back() == ' '))
      continue;
    m.push_back(c);
  }
  while (!m.empty() && (m.back() == ' ' || m.back() == '=' || m.back() == '(' || m.back() == ','))
    m.pop_back();
  if (m.size() > 48) {
    size_t cut = 45;
    while (cut > 0 && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80)
      --cut;
    m = m.substr(0, cut) + "...";
  }
  return message.substr(0, pos) + printable(m) + message.substr(pos + 3);
}

} // namespace

checker::checker(std::string_view source, const static_check_options& opts)
  : src_(source),
    lexed_(lex_python(source)),
    lines_(source),
    outline_(make_outline(lexed_.code)),
    imports_(read_imports(lexed_.code, m_)),
    resolved_(resolve_names(lexed_, imports_)),
    levels_(rule_count(), severity::off),
    overridden_(rule_count(), false),
    per_rule_(rule_count()) {
  resolve_levels(opts);
  build_kernel_text();
  for (const auto& b : outline_.blocks)
    if (b.parent == -1)
      own_definitions_.insert(b.name);
}

static_check_result checker::run() {
  run_patterns();
  check_code_bypass();
  check_encoding();
  check_model_new();
  check_kernel_called();
  check_output_cache();
  check_module_patching();
  check_name_obfuscation();
  return collect();
}

void checker::resolve_levels(const static_check_options& opts) {
  for (size_t r = 0; r < rule_count(); ++r) {
    const auto& d = rule_defs()[r];
    severity level = d.level;
    if (auto it = opts.overrides.find(d.id); it != opts.overrides.end()) {
      level = it->second;
      overridden_[r] = true;
    }
    levels_[r] = rule_applies(d.when, opts.backend, opts.precision) ? level : severity::off;
  }
  backend_ = opts.backend;
}

/// Joins the values of string literals into kernel source: literals joined by juxtaposition or
/// `+` (with brackets and line breaks between) form one piece; each piece loses its C
/// comments on its own; pieces are separated by a line break. String statements are skipped.
void checker::build_kernel_text() {
  std::string piece;
  std::vector<uint32_t> piece_offsets;
  auto flush = [&] {
    if (piece.empty())
      return;
    auto stripped = strip_c_comments(piece, &piece_offsets);
    uint32_t last = piece_offsets.empty() ? 0 : piece_offsets.back();
    kernel_ += stripped;
    kernel_offsets_.insert(kernel_offsets_.end(), piece_offsets.begin(), piece_offsets.end());
    kernel_.push_back('\n');
    kernel_offsets_.push_back(last);
    piece.clear();
    piece_offsets.clear();
  };
  const std::string& code = lexed_.code;
  size_t prev_end = std::string::npos;
  for (const auto& lit : lexed_.strings) {
    if (lit.is_statement) {
      flush();
      prev_end = std::string::npos;
      continue;
    }
    bool joined = prev_end != std::string::npos && lit.begin >= prev_end;
    for (size_t k = prev_end; joined && k < lit.begin; ++k) {
      char c = code[k];
      joined = c == ' ' || c == '\t' || c == '\f' || is_newline(c) || c == '+' || c == '('
               || c == ')' || c == '\\';
    }
    if (!joined)
      flush();
    piece += lit.value;
    piece_offsets.insert(piece_offsets.end(), lit.value_offsets.begin(), lit.value_offsets.end());
    prev_end = lit.end;
  }
  flush();

  // The type lists of AT_DISPATCH_* macros: the argument list outside the lambda's braces.
  const auto& h = table().helpers;
  for (size_t from = 0; m_.find(h.dispatch.get(), kernel_, from); from = m_.end()) {
    int depth = 0, braces = 0;
    size_t span = m_.end() - 1;
    for (size_t k = m_.end() - 1; k < kernel_.size(); ++k) {
      char c = kernel_[k];
      if (c == '{' && braces++ == 0)
        dispatch_lists_.emplace_back(span, k);
      else if (c == '}' && braces > 0 && --braces == 0)
        span = k + 1;
      if (braces > 0)
        continue;
      if (c == '(')
        ++depth;
      else if (c == ')' && --depth == 0) {
        dispatch_lists_.emplace_back(span, k + 1);
        break;
      }
    }
  }
}

void checker::run_patterns() {
  const auto& t = table();
  std::string_view code = resolved_.text;
  std::string_view kernel = kernel_;
  auto hinted = [](const compiled_pattern& p, std::string_view text) {
    if (p.hints.empty())
      return true;
    return std::any_of(p.hints.begin(), p.hints.end(),
                       [&](const std::string& h) { return text.find(h) != std::string_view::npos; });
  };
  // Requirement groups: rule -> (group -> satisfied), evaluated in table order.
  std::vector<std::vector<std::pair<int, bool>>> groups(rule_count());
  for (const auto& p : t.patterns) {
    if (levels_[p.rule] == severity::off)
      continue;
    std::string_view text = p.where == scope::code      ? code
                            : p.where == scope::written ? std::string_view{lexed_.code}
                                                        : kernel;
    auto source_offset = [&](size_t k) {
      return p.where == scope::code ? code_offset(k) : p.where == scope::written ? k : kernel_offset(k);
    };
    if (p.kind == pattern_kind::require) {
      auto& g = groups[p.rule];
      auto it = std::find_if(g.begin(), g.end(), [&](auto& x) { return x.first == p.group; });
      if (it == g.end()) {
        g.emplace_back(p.group, false);
        it = std::prev(g.end());
      }
      // A requirement the engine could not decide stays unmet (conservative).
      if (!it->second && hinted(p, text) && m_.find(p.re.get(), text, 0))
        it->second = true;
      continue;
    }
    if (!hinted(p, text))
      continue;
    severity cap = p.kind == pattern_kind::suspect && !overridden_[p.rule] ? severity::warning
                                                                            : severity::error;
    size_t from = 0;
    for (int guard = 0; guard < 64 && m_.find(p.re.get(), text, from); ++guard) {
      size_t b = m_.begin(), e = m_.end();
      from = e > b ? e : b + 1;
      auto matched = text.substr(b, e - b);
      if (!exempt(p, matched, b))
        add(p.rule, source_offset(b), expand(p.message, matched), cap);
    }
    if (m_.failed()) // input built to exhaust the engine is refused, not waved through
      add(p.rule, source_offset(from),
          "the input exceeds what this check can decide (regex limits): counted as a finding");
  }
  for (size_t r = 0; r < rule_count(); ++r) {
    for (auto& [group, ok] : groups[r]) {
      if (ok)
        continue;
      for (const auto& p : t.patterns)
        if (p.rule == r && p.group == group && p.kind == pattern_kind::require) {
          add_whole(r, p.message);
          break;
        }
      break; // the first unmet requirement says enough
    }
  }
}

/// Matches that are not what the rule is about: the reference's names where the candidate
/// defines its own, half types named in an AT_DISPATCH type list (the dispatch picks fp32 at
/// run time in an fp32 problem).
bool checker::exempt(const compiled_pattern& p, std::string_view matched, size_t at) const {
  const auto& id = rule_defs()[p.rule].id;
  if (p.where != scope::kernel && std::string_view{id} == "reference_access")
    return own_definitions_.count(matched) > 0;
  if (p.where == scope::kernel && std::string_view{id} == "precision_downgrade")
    return std::any_of(dispatch_lists_.begin(), dispatch_lists_.end(),
                       [at](auto& s) { return at >= s.first && at < s.second; });
  return false;
}

size_t checker::code_offset(size_t k) const {
  if (resolved_.offsets.empty())
    return 0;
  return resolved_.offsets[std::min(k, resolved_.offsets.size() - 1)];
}

size_t checker::kernel_offset(size_t k) const {
  if (kernel_offsets_.empty())
    return 0;
  return kernel_offsets_[std::min(k, kernel_offsets_.size() - 1)];
}

bool checker::full(size_t rule) const {
  return per_rule_[rule].size() >= 3;
}

/// Records a finding at a source offset: one per line per rule, at most 3 per rule; an error
/// takes the place of a warning of the same rule (the line's, or the first) rather than being
/// dropped.
void checker::add(size_t rule, size_t source_offset, std::string message, severity cap) {
  severity level = levels_[rule];
  if (level == severity::off)
    return;
  if (cap == severity::warning && level == severity::error)
    level = severity::warning;
  int line = lines_.line_of(source_offset);
  auto& found = per_rule_[rule];
  auto same_line = std::find_if(found.begin(), found.end(),
                                [line](const static_finding& f) { return f.line == line; });
  auto weaker = std::find_if(found.begin(), found.end(), [](const static_finding& f) {
    return f.level == severity::warning;
  });
  static_finding f;
  f.rule = rule_defs()[rule].id;
  f.level = level;
  f.line = line;
  f.message = std::move(message);
  f.excerpt = excerpt(line, source_offset);
  if (same_line != found.end()) {
    if (level == severity::error && same_line->level == severity::warning)
      *same_line = std::move(f);
    return;
  }
  if (!full(rule)) {
    found.push_back(std::move(f));
    return;
  }
  if (level == severity::error && weaker != found.end())
    *weaker = std::move(f);
}

/// Records a finding about the whole program (line 0).
void checker::add_whole(size_t rule, std::string message) {
  if (levels_[rule] == severity::off || !per_rule_[rule].empty())
    return;
  static_finding f;
  f.rule = rule_defs()[rule].id;
  f.level = levels_[rule];
  f.line = 0;
  f.message = std::move(message);
  per_rule_[rule].push_back(std::move(f));
}

/// The source line, trimmed, at most 160 bytes (a window around the finding if longer), with
/// control characters as blanks and no UTF-8 sequence cut in half.
std::string checker::excerpt(int line, size_t source_offset) const {
  auto text = lines_.text(src_, line);
  size_t col = source_offset - lines_.start_of(line);
  size_t b = 0, e = text.size();
  while (b < e && (text[b] == ' ' || text[b] == '\t' || text[b] == '\f'))
    ++b;
  while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\f'))
    --e;
  constexpr size_t limit = 160;
  if (e - b > limit) {
    size_t start = col > b + 60 ? col - 60 : b;
    start = std::min(start, e - limit);
    b = start;
    e = start + limit;
    auto cont = [&](size_t k) { return (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80; };
    while (b < e && cont(b))
      ++b;
    while (e > b && e < text.size() && cont(e))
      --e;
  }
  return printable(text.substr(b, e - b));
}

size_t checker::rule(std::string_view id) const {
  return rule_index(id);
}

bool checker::on(size_t r) const {
  return levels_[r] != severity::off;
}

static_check_result checker::collect() {
  static_check_result res;
  for (size_t r = 0; r < rule_count(); ++r)
    for (auto& f : per_rule_[r])
      res.findings.push_back(std::move(f));
  std::stable_sort(res.findings.begin(), res.findings.end(),
                   [](const static_finding& a, const static_finding& b) {
                     if (a.line != b.line)
                       return a.line < b.line;
                     return rule_index(a.rule) < rule_index(b.rule);
                   });
  return res;
}


} // namespace kbrl::eval::static_impl
