#include "runtime/tokenizer/unicode.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace kbrl::tok {

namespace {

/// Bytes a sequence starting with `lead` has in total, or 0 if `lead` cannot start one.
int sequence_length(unsigned char lead) {
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead >= 0xE0 && lead <= 0xEF)
    return 3;
  if (lead >= 0xF0 && lead <= 0xF4)
    return 4;
  return 0;
}

/// The range the second byte of a sequence led by `lead` must fall in (Unicode table 3-7): the
/// narrow ranges exclude overlong forms, surrogates and code points above U+10FFFF.
std::pair<unsigned char, unsigned char> second_byte_range(unsigned char lead) {
  switch (lead) {
    case 0xE0: return {0xA0, 0xBF};
    case 0xED: return {0x80, 0x9F};
    case 0xF0: return {0x90, 0xBF};
    case 0xF4: return {0x80, 0x8F};
    default: return {0x80, 0xBF};
  }
}

} // namespace

std::size_t decode_utf8(std::string_view bytes, std::string& out, bool final) {
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      // Copy a run of ASCII at once: the common case.
      std::size_t j = i + 1;
      while (j < n && static_cast<unsigned char>(bytes[j]) < 0x80)
        ++j;
      out.append(bytes.data() + i, j - i);
      i = j;
      continue;
    }
    const int length = sequence_length(lead);
    if (length == 0) {
      out += replacement_character;
      ++i;
      continue;
    }
    int good = 1; // bytes of the sequence seen to be valid so far
    bool broken = false;
    while (good < length) {
      if (i + good >= n)
        break;
      const auto b = static_cast<unsigned char>(bytes[i + good]);
      const auto [lo, hi] = good == 1 ? second_byte_range(lead)
                                      : std::pair<unsigned char, unsigned char>{0x80, 0xBF};
      if (b < lo || b > hi) {
        broken = true;
        break;
      }
      ++good;
    }
    if (good == length) {
      out.append(bytes.data() + i, length);
      i += length;
    } else if (broken) {
      out += replacement_character; // the maximal subpart is the `good` bytes seen so far
      i += good;
    } else if (final) {
      out += replacement_character; // truncated at the end of the input
      i = n;
    } else {
      break; // truncated: wait for more bytes
    }
  }
  return i;
}

std::string repair_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  decode_utf8(bytes, out, /*final=*/true);
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  // Repairing never shortens a valid text nor keeps an invalid one equal to itself.
  for (char c : bytes)
    if (static_cast<unsigned char>(c) >= 0x80)
      return repair_utf8(bytes) == bytes;
  return true;
}

char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  const int needed = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  if (pos + needed > text.size()) {
    // Only well-formed text is promised an answer, but a cut sequence must not read past
    // the end.
    ++pos;
    return 0xFFFD;
  }
  auto cont = [&](std::size_t k) { return static_cast<char32_t>(text[pos + k]) & 0x3F; };
  char32_t cp;
  int length;
  if (b0 < 0x80) {
    cp = b0;
    length = 1;
  } else if (b0 < 0xE0) {
    cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
    length = 2;
  } else if (b0 < 0xF0) {
    cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    length = 3;
  } else {
    cp = (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    length = 4;
  }
  pos += length;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_js_whitespace(char32_t cp) {
  if (cp < 0x80)
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028
         || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

std::string_view trim_js_whitespace_start(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t next = pos;
    if (!is_js_whitespace(next_code_point(text, next)))
      break;
    pos = next;
  }
  return text.substr(pos);
}

std::string_view trim_js_whitespace_end(std::string_view text) {
  // Walk forward, remembering where the last non-space character ended: UTF-8 is easier to
  // read forwards, and the sections this trims are short.
  std::size_t pos = 0;
  std::size_t end = 0;
  while (pos < text.size()) {
    if (!is_js_whitespace(next_code_point(text, pos)))
      end = pos;
  }
  return text.substr(0, end);
}

namespace {

/// Code points below this are classified by nfc_inert(); the rest always take utf8proc's path.
constexpr char32_t inert_limit = 0x30000;

/// Per code point below inert_limit: true if the character is "NFC-inert": a text made only
/// of such characters is already in NFC, so normalizing it can be skipped. That holds for a
/// character that is assigned, has canonical combining class 0, is its own NFC, and can be
/// neither the second part of a canonical composition nor begin with one when decomposed
/// (so nothing before or after it can compose with it). Derived from utf8proc's own tables on
/// first use; ASCII, CJK, kana, Hangul syllables, Cyrillic and emoji are all inert, combining
/// marks and Hangul jamo are not.
const std::vector<bool>& nfc_inert() {
  static const std::vector<bool> table = [] {
    std::vector<bool> second(inert_limit, false);
    utf8proc_int32_t parts[32];
    for (char32_t cp = 0; cp < inert_limit; ++cp) {
      int boundclass = 0;
      const utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts, 32,
                                UTF8PROC_DECOMPOSE, &boundclass);
      for (utf8proc_ssize_t k = 1; k < n; ++k)
        if (parts[k] >= 0 && static_cast<char32_t>(parts[k]) < inert_limit)
          second[parts[k]] = true;
    }
    std::vector<bool> inert(inert_limit, false);
    for (char32_t cp = 0; cp < inert_limit; ++cp) {
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
      if (p->category == UTF8PROC_CATEGORY_CN || p->category == UTF8PROC_CATEGORY_CS
          || p->combining_class != 0 || second[cp])
        continue;
      int boundclass = 0;
      const utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts, 32,
                                UTF8PROC_DECOMPOSE, &boundclass);
      if (n < 1 || n > 32 || (parts[0] >= 0 && static_cast<char32_t>(parts[0]) < inert_limit
                              && second[parts[0]]))
        continue;
      if (n > 1 || static_cast<char32_t>(parts[0]) != cp) {
        // It decomposes: inert only if NFC composes it back into itself.
        std::string one;
        append_utf8(one, cp);
        utf8proc_uint8_t* mapped = nullptr;
        const utf8proc_ssize_t length =
          utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(one.data()),
                       static_cast<utf8proc_ssize_t>(one.size()), &mapped,
                       static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
        const bool same = length == static_cast<utf8proc_ssize_t>(one.size())
                          && std::memcmp(one.data(), mapped, one.size()) == 0;
        std::free(mapped);
        if (!same)
          continue;
      }
      inert[cp] = true;
    }
    return inert;
  }();
  return table;
}

/// NFC of `text` (well-formed UTF-8), handing utf8proc only the stretches that may change.
/// Every NFC-inert character starts a normalization segment (nothing before it can compose
/// with it or reorder past it), so the text is normalized piecewise: from the last inert
/// character before a non-inert one (it may be the first half of a composition, as 'e' before
/// U+0301) up to the next inert character. Text of inert characters only is copied as is.
std::string nfc_by_segments(std::string_view text) {
  const std::vector<bool>& inert = nfc_inert();
  auto is_inert = [&](char32_t cp) { return cp < inert_limit && inert[cp]; };
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;   // text[0, copied) is in `out`
  std::size_t boundary = 0; // start of the last inert character seen
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t start = pos;
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      boundary = start;
      ++pos;
      continue;
    }
    if (is_inert(next_code_point(text, pos))) {
      boundary = start;
      continue;
    }
    std::size_t end = pos; // the stretch ends where the next inert character starts
    while (end < text.size()) {
      std::size_t next = end;
      if (is_inert(next_code_point(text, next)))
        break;
      end = next;
    }
    out.append(text.substr(copied, boundary - copied));
    out += normalize_with_utf8proc(text.substr(boundary, end - boundary), normal_form::nfc);
    copied = end;
    boundary = end;
    pos = end;
  }
  out.append(text.substr(copied));
  return out;
}

} // namespace

bool is_nfc_inert(char32_t cp) {
  return cp < inert_limit && nfc_inert()[cp];
}

std::string normalize(std::string_view text, normal_form form) {
  bool ascii = true;
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  if (ascii)
    return std::string{text};
  if (form == normal_form::nfc)
    return nfc_by_segments(text);
  return normalize_with_utf8proc(text, form);
}

std::string normalize_with_utf8proc(std::string_view text, normal_form form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case normal_form::nfc: options |= UTF8PROC_COMPOSE; break;
    case normal_form::nfd: options |= UTF8PROC_DECOMPOSE; break;
    case normal_form::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case normal_form::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
    utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                 static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                 static_cast<utf8proc_option_t>(options));
  // utf8proc fails only on ill-formed input or out of memory; the tokenizer repairs its input
  // before normalizing, so leaving the text as it is cannot hide a problem here.
  if (length < 0)
    return std::string{text};
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner{mapped, &std::free};
  return std::string{reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length)};
}

const std::array<char32_t, 256>& byte_level_alphabet() {
  static const std::array<char32_t, 256> alphabet = [] {
    std::array<char32_t, 256> a{};
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      a[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return a;
  }();
  return alphabet;
}

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  // The alphabet lies within U+0021..U+0143: a direct table inverts it.
  static const std::array<int, 0x144> inverse = [] {
    std::array<int, 0x144> inv{};
    inv.fill(-1);
    const auto& alphabet = byte_level_alphabet();
    for (int b = 0; b < 256; ++b)
      inv[alphabet[b]] = b;
    return inv;
  }();
  if (!is_valid_utf8(token))
    return std::nullopt;
  std::string bytes;
  bytes.reserve(token.size());
  std::size_t pos = 0;
  while (pos < token.size()) {
    const char32_t cp = next_code_point(token, pos);
    if (cp >= inverse.size() || inverse[cp] < 0)
      return std::nullopt;
    bytes += static_cast<char>(inverse[cp]);
  }
  return bytes;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& alphabet = byte_level_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    append_utf8(out, alphabet[static_cast<unsigned char>(c)]);
  return out;
}

} // namespace kbrl::tok
