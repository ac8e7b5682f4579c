#include "runtime/tokenizer/added_tokens.hpp"

#include "runtime/tokenizer/unicode.hpp"

#include <utf8proc.h>

#include <algorithm>

namespace kbrl::tok {

namespace {

/// Letters, digits and '_' (Hugging Face's word characters for single_word tokens).
bool is_word_character(char32_t cp) {
  if (cp == '_')
    return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

} // namespace

void added_token_matcher::add(const added_token& token, const std::string& content) {
  int32_t at = 0;
  for (char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(at, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[at].children;
      children.insert(std::lower_bound(children.begin(), children.end(),
                                       std::pair<unsigned char, int32_t>{byte, -1}),
                      {byte, next});
    }
    at = next;
  }
  // A content listed twice keeps its first entry.
  if (nodes_[at].entry >= 0)
    return;
  nodes_[at].entry = static_cast<int32_t>(entries_.size());
  entries_.push_back(entry{content, token.id, token.lstrip, token.rstrip, token.single_word});
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

int32_t added_token_matcher::child(int32_t from, unsigned char byte) const {
  const auto& children = nodes_[from].children;
  auto it = std::lower_bound(children.begin(), children.end(),
                             std::pair<unsigned char, int32_t>{byte, -1});
  return it != children.end() && it->first == byte ? it->second : -1;
}

bool added_token_matcher::single_word_ok(std::string_view text, std::size_t begin,
                                         std::size_t end) const {
  if (begin > 0) {
    std::size_t start = begin - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
      --start;
    if (is_word_character(next_code_point(text, start)))
      return false;
  }
  if (end < text.size()) {
    std::size_t pos = end;
    if (is_word_character(next_code_point(text, pos)))
      return false;
  }
  return true;
}

void added_token_matcher::split(std::string_view text, std::vector<section>& out) const {
  const std::size_t n = text.size();
  std::size_t plain_begin = 0;
  std::size_t i = 0;
  // Entries matching at i, shortest first.
  std::vector<std::pair<std::size_t, int32_t>> found;
  while (i < n) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    found.clear();
    int32_t at = 0;
    for (std::size_t j = i; j < n; ++j) {
      at = child(at, static_cast<unsigned char>(text[j]));
      if (at < 0)
        break;
      if (nodes_[at].entry >= 0)
        found.emplace_back(j + 1, nodes_[at].entry);
    }
    const entry* match = nullptr;
    std::size_t match_end = 0;
    for (auto it = found.rbegin(); it != found.rend(); ++it) {
      const entry& e = entries_[it->second];
      if (e.single_word && !single_word_ok(text, i, it->first))
        continue;
      match = &e;
      match_end = it->first;
      break;
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    std::string_view plain = text.substr(plain_begin, i - plain_begin);
    if (match->lstrip)
      plain = trim_js_whitespace_end(plain);
    if (!plain.empty())
      out.push_back(section{plain, -1});
    out.push_back(section{{}, match->id});
    i = match_end;
    if (match->rstrip)
      i = n - trim_js_whitespace_start(text.substr(i)).size();
    plain_begin = i;
  }
  if (plain_begin < n)
    out.push_back(section{text.substr(plain_begin), -1});
}

} // namespace kbrl::tok
