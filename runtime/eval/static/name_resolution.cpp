#include "runtime/eval/static/name_resolution.hpp"

#include "runtime/eval/static/program_outline.hpp"
#include "runtime/eval/static/source_text.hpp"

#include <algorithm>
#include <optional>

namespace kbrl::eval::static_impl {

namespace {

struct edit {
  size_t begin, end;
  std::string text;
};

/// The offset of the bracket closing the one at `open`, or npos.
size_t closing_bracket(std::string_view code, size_t open) {
  int depth = 0;
  for (size_t k = open; k < code.size(); ++k) {
    char c = code[k];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if ((c == ')' || c == ']' || c == '}') && --depth == 0)
      return k;
  }
  return std::string_view::npos;
}

/// The top-level arguments of a call whose '(' is at `open` and ')' at `close`: [begin, end)
/// of each, blanks trimmed.
std::vector<std::pair<size_t, size_t>> arguments(std::string_view code, size_t open, size_t close) {
  std::vector<std::pair<size_t, size_t>> out;
  int depth = 0;
  size_t start = open + 1;
  auto push = [&](size_t e) {
    size_t b = start;
    while (b < e && (is_blank(code[b]) || is_newline(code[b])))
      ++b;
    while (e > b && (is_blank(code[e - 1]) || is_newline(code[e - 1])))
      --e;
    out.emplace_back(b, e);
  };
  for (size_t k = open + 1; k < close; ++k) {
    char c = code[k];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == ',' && depth == 0) {
      push(k);
      start = k + 1;
    }
  }
  push(close);
  if (out.size() == 1 && out[0].first == out[0].second)
    out.clear();
  return out;
}

/// A name argument made only of plain string literals (joined by juxtaposition or `+`, in
/// brackets or not): its value and how many pieces made it.
struct literal_name {
  std::string value;
  int pieces = 0;
};

class resolver {
public:
  resolver(const lexed_source& lx, const import_table& imports)
    : lx_(lx), code_(lx.code), imports_(imports) {
    // nop
  }

  resolved_code run() {
    resolve_aliases();
    resolve_attribute_calls();
    check_dynamic_imports();
    check_namespace_subscripts();
    return build();
  }

private:
  std::optional<literal_name> literal_in(size_t b, size_t e) const {
    literal_name out;
    auto it = std::lower_bound(lx_.strings.begin(), lx_.strings.end(), b,
                               [](const string_literal& s, size_t at) { return s.begin < at; });
    size_t k = b;
    while (k < e) {
      char c = code_[k];
      if (is_blank(c) || is_newline(c) || c == '+' || c == '(' || c == ')' || c == '\\') {
        ++k;
        continue;
      }
      if (it == lx_.strings.end() || it->begin != k || it->end > e || it->is_formatted
          || it->is_bytes)
        return std::nullopt;
      out.value += it->value;
      ++out.pieces;
      k = it->end;
      ++it;
    }
    if (out.pieces == 0)
      return std::nullopt;
    return out;
  }

  /// A name computed at run time the way only hiding needs: chr/ord, join, reversed slices,
  /// base64/codecs/hex decoding. Formatting and concatenation (f"conv{i}", "layer" + str(i))
  /// are honest on the program's own objects (`self`), hiding anywhere else.
  bool built_to_hide(size_t b, size_t e, bool own_object) const {
    auto text = code_.substr(b, e - b);
    static const char* hiding[] = {"chr", "ord", "join", "b64decode", "b32decode", "b16decode",
                                   "a85decode", "base64", "codecs", "decode", "fromhex",
                                   "reversed", "bytes", "bytearray", "unhexlify", "rot13"};
    bool found = false;
    for_each_name(text, 0, text.size(), [&](std::string_view id, bool, size_t) {
      for (const char* w : hiding)
        found = found || id == w;
    });
    if (found || text.find("[::") != std::string_view::npos)
      return true;
    if (own_object)
      return false;
    bool has_literal = false, formatted = false;
    for (const auto& s : lx_.strings)
      if (s.begin >= b && s.end <= e) {
        has_literal = true;
        formatted = formatted || s.is_formatted;
      }
    bool formats = text.find("format") != std::string_view::npos
                   || text.find('%') != std::string_view::npos;
    return formatted || (has_literal && (formats || text.find('+') != std::string_view::npos));
  }

  /// The object of a getattr-like call is the program's own (`self...`).
  bool own_object(size_t b, size_t e) const {
    auto text = code_.substr(b, e - b);
    return text.substr(0, 4) == "self" && (text.size() == 4 || !is_ident_byte(text[4]));
  }

  static bool is_identifier(std::string_view s) {
    if (s.empty() || !is_ident_start(s[0]))
      return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return is_ident_byte(c); });
  }

  bool in_import(size_t k) const {
    for (auto [b, e] : imports_.statements)
      if (k >= b && k < e)
        return true;
    return false;
  }

  void resolve_aliases() {
    if (imports_.aliases.empty())
      return;
    for_each_name(code_, 0, code_.size(), [&](std::string_view id, bool attribute, size_t end) {
      size_t b = end - id.size();
      if (attribute || in_import(b))
        return;
      auto it = imports_.aliases.find(id);
      if (it == imports_.aliases.end())
        return;
      size_t k = end;
      while (k < code_.size() && is_blank(code_[k]))
        ++k;
      if (k < code_.size() && code_[k] == '=' && !(k + 1 < code_.size() && code_[k + 1] == '='))
        return; // rebinding the name, or a keyword argument: not a use
      edits_.push_back({b, end, it->second});
    });
  }

  void report(size_t offset, std::string message) {
    found_.push_back({offset, std::move(message)});
  }

  /// getattr/setattr/delattr/hasattr with a literal name become attribute access; a name in
  /// pieces or built at run time is reported.
  void resolve_attribute_calls() {
    const auto* re = calls_re();
    for (size_t from = 0; m_.find(re, code_, from); from = std::max(m_.end(), from + 1)) {
      size_t call = m_.begin();
      std::string fn{m_.group(code_, 1)};
      size_t open = m_.end() - 1;
      size_t close = closing_bracket(code_, open);
      if (close == std::string_view::npos)
        continue;
      auto args = arguments(code_, open, close);
      if (args.size() < 2)
        continue;
      auto [nb, ne] = args[1];
      auto name = literal_in(nb, ne);
      if (!name) {
        if (built_to_hide(nb, ne, own_object(args[0].first, args[0].second)))
          report(call, fn + " with a name built at run time: it hides which attribute is used");
        continue;
      }
      if (name->pieces > 1)
        report(call, fn + " with a name split into pieces ('" + name->value
                       + "'): it hides which attribute is used");
      if (!is_identifier(name->value) || fn == "hasattr")
        continue;
      auto [ob, oe] = args[0];
      if (fn == "getattr") {
        edits_.push_back({call, ob, ""});
        edits_.push_back({oe, close + 1, "." + name->value});
      } else if (fn == "setattr" && args.size() >= 3) {
        edits_.push_back({call, ob, ""});
        edits_.push_back({oe, args[2].first, "." + name->value + " = "});
        edits_.push_back({args[2].second, close + 1, ""});
      } else if (fn == "delattr") {
        edits_.push_back({call, ob, ""});
        edits_.push_back({oe, close + 1, "." + name->value + " = None"});
      }
    }
  }

  /// __import__ / importlib.import_module with a name in pieces or built at run time.
  void check_dynamic_imports() {
    const auto* re = imports_re();
    for (size_t from = 0; m_.find(re, code_, from); from = std::max(m_.end(), from + 1)) {
      size_t call = m_.begin();
      size_t open = m_.end() - 1;
      size_t close = closing_bracket(code_, open);
      if (close == std::string_view::npos)
        continue;
      auto args = arguments(code_, open, close);
      if (args.empty())
        continue;
      auto [nb, ne] = args[0];
      auto name = literal_in(nb, ne);
      if (name ? name->pieces > 1 : built_to_hide(nb, ne, false))
        report(call, "imports a module whose name is hidden (pieces or built at run time)");
    }
  }

  /// globals()[...], vars(x)[...], locals()[...], x.__dict__[...], __builtins__[...] with a
  /// key in pieces or built at run time.
  void check_namespace_subscripts() {
    const auto* re = subscripts_re();
    for (size_t from = 0; m_.find(re, code_, from); from = std::max(m_.end(), from + 1)) {
      size_t at = m_.begin();
      size_t open = m_.end() - 1;
      size_t close = closing_bracket(code_, open);
      if (close == std::string_view::npos)
        continue;
      auto name = literal_in(open + 1, close);
      if (name ? name->pieces > 1 : built_to_hide(open + 1, close, false))
        report(at, "looks a name up in a namespace by a hidden key (pieces or built at run time)");
    }
  }

  static const pcre2_code* calls_re() {
    static const code_ptr re =
      compile_regex(R"re((?<![\w.])(getattr|setattr|delattr|hasattr)\s*\()re");
    return re.get();
  }

  static const pcre2_code* imports_re() {
    static const code_ptr re = compile_regex(
      R"re((?<![\w.])__import__\s*\(|\bimport_module\s*\(|\bimportlib\s*\.\s*__import__\s*\()re");
    return re.get();
  }

  static const pcre2_code* subscripts_re() {
    static const code_ptr re = compile_regex(
      R"re((?:(?<![\w.])(?:globals|vars|locals)\s*\([^()]*\)|\.\s*__dict__|)re"
      R"re((?<![\w.])__builtins__)\s*\[)re");
    return re.get();
  }

  resolved_code build() {
    resolved_code out;
    // Alias edits inside a getattr's object stay; edits that overlap an earlier one are dropped.
    std::stable_sort(edits_.begin(), edits_.end(),
                     [](const edit& a, const edit& b) { return a.begin < b.begin; });
    out.text.reserve(code_.size());
    out.offsets.reserve(code_.size());
    size_t k = 0;
    for (const auto& e : edits_) {
      if (e.begin < k)
        continue;
      for (; k < e.begin; ++k) {
        out.text.push_back(code_[k]);
        out.offsets.push_back(static_cast<uint32_t>(k));
      }
      out.text += e.text;
      out.offsets.resize(out.text.size(), static_cast<uint32_t>(e.begin));
      k = e.end;
    }
    for (; k < code_.size(); ++k) {
      out.text.push_back(code_[k]);
      out.offsets.push_back(static_cast<uint32_t>(k));
    }
    out.found = std::move(found_);
    return out;
  }

  const lexed_source& lx_;
  std::string_view code_;
  const import_table& imports_;
  std::vector<edit> edits_;
  std::vector<obfuscation> found_;
  matcher m_;
};

} // namespace

resolved_code resolve_names(const lexed_source& lexed, const import_table& imports) {
  return resolver{lexed, imports}.run();
}

} // namespace kbrl::eval::static_impl
