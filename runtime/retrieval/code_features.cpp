#include "runtime/retrieval/code_features.hpp"

#include "runtime/io/hash.hpp"
#include "runtime/retrieval/python_lexer.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

namespace kbrl::retrieval {

namespace {

// Weights of the feature kinds. What is computed (calls, their order, the torch path) weighs
// most; names chosen by the author least, since a renamed variable must not move a program far.
constexpr float call_weight = 3.0f;
constexpr float api_weight = 1.5f;
constexpr float seq_weight = 2.0f;
constexpr float kw_weight = 1.0f;
constexpr float kwv_weight = 0.75f;
constexpr float rank_weight = 1.5f;
constexpr float id_weight = 0.75f;
constexpr float attr_weight = 1.0f;
constexpr float word_weight = 0.5f;
constexpr float sym_weight = 0.5f;
constexpr float num_weight = 0.25f;

const std::unordered_set<std::string_view>& python_keywords() {
  static const std::unordered_set<std::string_view> words{
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
    "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield", "self", "super", "__init__", "cls"};
  return words;
}

/// Calls that say nothing about the computation.
const std::unordered_set<std::string>& plumbing_calls() {
  static const std::unordered_set<std::string> calls{
    "super", "__init__", "print", "len", "range", "int", "float", "list", "tuple", "dict",
    "isinstance", "str", "enumerate", "zip", "getattr", "setattr", "hasattr", "type"};
  return calls;
}

/// Words of prose too common to tell programs apart.
const std::unordered_set<std::string>& stop_words() {
  static const std::unordered_set<std::string> words{
    "the", "and", "for", "with", "that", "this", "are", "from", "into", "its", "then", "than",
    "each", "which", "returns", "return", "args", "tensor", "tensors", "input", "output", "shape",
    "torch", "int", "float", "bool", "optional", "model", "module", "performs", "applies",
    "defaults", "size", "number", "simple", "given", "after", "over", "will", "use", "used"};
  return words;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// "convTranspose3d_out" -> {"conv", "transpose", "3d", "out"}; parts of one letter dropped.
std::vector<std::string> identifier_parts(std::string_view id) {
  std::vector<std::string> parts;
  std::string cur;
  auto flush = [&] {
    if (cur.size() > 1)
      parts.push_back(lower(cur));
    cur.clear();
  };
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c == '_') {
      flush();
      continue;
    }
    if (!cur.empty()) {
      const auto p = static_cast<unsigned char>(cur.back());
      const bool camel = std::isupper(c) && std::islower(p);
      const bool to_digit = std::isdigit(c) && std::isalpha(p);
      // "3d", "2D": a digit run keeps the letter that follows it
      const bool after_digit_word = std::isalpha(c) && std::isdigit(p) && i + 1 < id.size()
                                    && std::isalpha(static_cast<unsigned char>(id[i + 1]));
      if (camel || to_digit || after_digit_word)
        flush();
    }
    cur += static_cast<char>(c);
  }
  flush();
  return parts;
}

/// The torch path with the usual aliases spelled out: F.relu -> torch.nn.functional.relu.
std::string expand_alias(const std::vector<std::string_view>& chain) {
  std::string out;
  for (size_t i = 0; i < chain.size(); ++i) {
    std::string part{chain[i]};
    if (i == 0) {
      if (part == "F")
        part = "torch.nn.functional";
      else if (part == "nn")
        part = "torch.nn";
      else if (part == "tl")
        part = "triton.language";
      else if (part == "np")
        part = "numpy";
    }
    if (!out.empty())
      out += '.';
    out += part;
  }
  return out;
}

/// "num:2^7" for 128, "num:frac" for values below one, "num:0" for zero.
std::string number_feature(std::string_view text) {
  const std::string s(text);
  const double v = std::strtod(s.c_str(), nullptr);
  if (v == 0)
    return "num:0";
  const double a = std::fabs(v);
  if (a < 1)
    return "num:frac";
  return "num:2^" + std::to_string(static_cast<int>(std::floor(std::log2(a))));
}

bool is_op(const py_token& t, std::string_view text) {
  return t.kind == py_token_kind::op && t.text == text;
}

class feature_collector {
public:
  void add(std::string text, float weight) {
    auto [it, fresh] = index_.emplace(text, features_.size());
    if (fresh)
      features_.push_back({std::move(text), weight, 0});
    ++features_[it->second].count;
  }
  std::vector<code_feature> take() { return std::move(features_); }

private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<code_feature> features_;
};

void add_words(feature_collector& out, std::string_view text) {
  std::string word;
  auto flush = [&] {
    if (word.size() >= 3 && stop_words().count(word) == 0)
      out.add("word:" + word, word_weight);
    word.clear();
  };
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalpha(c))
      word += static_cast<char>(std::tolower(c));
    else
      flush();
  }
  flush();
}

} // namespace

uint64_t feature_hash(std::string_view text) {
  return io::fnv1a_64(text);
}

std::vector<code_feature> extract_code_features(std::string_view source) {
  const auto tokens = lex_python(source);
  const auto& keywords = python_keywords();
  auto is_name = [&](size_t i) {
    return i < tokens.size() && tokens[i].kind == py_token_kind::name;
  };

  // self.<attr> = <path>(...) in __init__: calling self.<attr> later applies <path>.
  std::unordered_map<std::string_view, std::string> module_of;
  for (size_t i = 0; i + 5 < tokens.size(); ++i) {
    if (tokens[i].text != "self" || !is_op(tokens[i + 1], ".") || !is_name(i + 2)
        || !is_op(tokens[i + 3], "="))
      continue;
    size_t j = i + 4;
    std::string_view last;
    while (is_name(j)) {
      last = tokens[j].text;
      if (j + 1 < tokens.size() && is_op(tokens[j + 1], "."))
        j += 2;
      else
        break;
    }
    if (!last.empty() && j + 1 < tokens.size() && is_op(tokens[j + 1], "("))
      module_of.emplace(tokens[i + 2].text, lower(last));
  }

  feature_collector out;
  std::string previous_call;
  int depth = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    switch (t.kind) {
      case py_token_kind::comment:
      case py_token_kind::string:
        add_words(out, t.text);
        continue;
      case py_token_kind::number:
        out.add(number_feature(t.text), num_weight);
        continue;
      case py_token_kind::newline:
        continue;
      case py_token_kind::op:
        if (t.text == "(" || t.text == "[" || t.text == "{")
          ++depth;
        else if ((t.text == ")" || t.text == "]" || t.text == "}") && depth > 0)
          --depth;
        else if (t.text == "@") {
          out.add("call:matmul", call_weight);
          if (!previous_call.empty())
            out.add("seq:" + previous_call + ">matmul", seq_weight);
          previous_call = "matmul";
        } else if (t.text != "." && t.text != "," && t.text != ":" && t.text != "=")
          out.add("sym:" + std::string{t.text}, sym_weight);
        continue;
      case py_token_kind::name: break;
    }
    // A name: read the dotted chain it starts.
    std::vector<std::string_view> chain{t.text};
    size_t end = i;
    while (end + 2 < tokens.size() && is_op(tokens[end + 1], ".") && is_name(end + 2)) {
      chain.push_back(tokens[end + 2].text);
      end += 2;
    }
    const bool call = end + 1 < tokens.size() && is_op(tokens[end + 1], "(");
    const bool keyword_argument = depth > 0 && chain.size() == 1 && end + 1 < tokens.size()
                                  && is_op(tokens[end + 1], "=");
    if (keyword_argument) {
      out.add("kw:" + lower(t.text), kw_weight);
      size_t v = end + 2;
      std::string value;
      if (v + 1 < tokens.size() && is_op(tokens[v], "-")
          && tokens[v + 1].kind == py_token_kind::number) {
        value = "-";
        ++v;
      }
      if (v < tokens.size() && (tokens[v].kind == py_token_kind::number
                                || tokens[v].text == "True" || tokens[v].text == "False"))
        out.add("kwv:" + lower(t.text) + "=" + value + std::string{tokens[v].text}, kwv_weight);
    }
    if (call) {
      std::string op;
      if (chain.size() == 2 && chain[0] == "self" && module_of.count(chain[1]))
        op = module_of.at(chain[1]);
      else
        op = lower(chain.back());
      if (plumbing_calls().count(op) == 0) {
        out.add("call:" + op, call_weight);
        const auto path = expand_alias(chain);
        if (path.rfind("torch.", 0) == 0 || path.rfind("triton.", 0) == 0)
          out.add("api:" + path, api_weight);
        if (!previous_call.empty())
          out.add("seq:" + previous_call + ">" + op, seq_weight);
        previous_call = op;
        static const std::unordered_set<std::string> makers{
          "rand", "randn", "randint", "zeros", "ones", "empty", "full", "rand_like"};
        if (makers.count(op) != 0) {
          // top-level arguments before the first keyword argument: the rank of the tensor
          int args = 0, d = 0;
          bool any = false;
          for (size_t j = end + 2; j < tokens.size(); ++j) {
            const auto& a = tokens[j];
            if (d == 0 && is_op(a, ")"))
              break;
            if (is_op(a, "(") || is_op(a, "[") || is_op(a, "{"))
              ++d;
            else if (is_op(a, ")") || is_op(a, "]") || is_op(a, "}"))
              --d;
            if (d == 0 && a.kind == py_token_kind::name && j + 1 < tokens.size()
                && is_op(tokens[j + 1], "="))
              break;
            if (d == 0 && is_op(a, ","))
              ++args;
            else
              any = true;
          }
          if (any)
            out.add("rank:" + std::to_string(args + 1), rank_weight);
        }
      }
    }
    // Identifiers of the chain (not the plumbing ones) by their parts.
    for (size_t k = 0; k < chain.size(); ++k) {
      const auto name = chain[k];
      if (keywords.count(name) != 0 || name == "torch" || name == "nn" || name == "F")
        continue;
      if (call && k + 1 == chain.size())
        continue; // the operator itself is a call feature already
      for (auto& part : identifier_parts(name))
        out.add("id:" + part, id_weight);
      // Attributes read off a value (x.T, x.shape), one letter included: a.T @ b is not a @ b.T
      // only through them.
      if (k > 0 && chain[0] != "self" && !(call && k + 1 == chain.size()))
        out.add("attr:" + std::string{name}, attr_weight);
    }
    i = end;
  }
  return out.take();
}

} // namespace kbrl::retrieval
