#pragma once
// Unicode pieces the tokenizer needs: UTF-8 decoding that repairs ill-formed input the way a
// browser's TextDecoder does (one U+FFFD per maximal ill-formed subpart), JavaScript's notion of
// whitespace (the reference encoders are JavaScript), Unicode normalization (utf8proc), and the
// GPT-2 byte-level alphabet that maps each byte to a printable character.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kbrl::tok {

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

/// Appends the well-formed UTF-8 in `bytes` to `out`, replacing each maximal ill-formed subpart
/// with U+FFFD (Unicode 15 section 3.9, "U+FFFD substitution of maximal subparts", as the WHATWG
/// TextDecoder does). If `final` is false, a truncated but so far valid sequence at the very end
/// is left unconsumed; if true, it becomes one U+FFFD. Returns the number of bytes consumed.
std::size_t decode_utf8(std::string_view bytes, std::string& out, bool final);

/// `bytes` with every ill-formed subpart replaced by U+FFFD; `bytes` itself if it is valid.
std::string repair_utf8(std::string_view bytes);

/// True if `bytes` is well-formed UTF-8.
bool is_valid_utf8(std::string_view bytes);

/// The code point starting at `pos` of well-formed UTF-8 `text`; advances `pos` past it. On
/// ill-formed text the answer is unspecified, but it never reads outside `text`.
char32_t next_code_point(std::string_view text, std::size_t& pos);

/// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

/// True for the characters JavaScript's `\s` and String.prototype.trim() treat as white space:
/// tab, LF, VT, FF, CR, space, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F,
/// U+3000 and U+FEFF.
bool is_js_whitespace(char32_t cp);

/// `text` without JavaScript white space at its start (trimStart) / end (trimEnd).
std::string_view trim_js_whitespace_start(std::string_view text);
std::string_view trim_js_whitespace_end(std::string_view text);

/// The Unicode normalization forms tokenizer.json files name.
enum class normal_form { nfc, nfd, nfkc, nfkd };

/// `text` (well-formed UTF-8) in normalization form `form`. Pure ASCII is returned as is; for
/// NFC only the stretches around characters that are not NFC-inert (see is_nfc_inert) go
/// through utf8proc.
std::string normalize(std::string_view text, normal_form form);

/// normalize() without the shortcuts: always through utf8proc (for tests of the shortcuts).
std::string normalize_with_utf8proc(std::string_view text, normal_form form);

/// True if `cp` is NFC-inert: assigned, canonical combining class 0, its own NFC, and unable to
/// compose with a neighbour, so that a text made only of such characters is already in NFC.
/// Known for code points below U+30000; false above.
bool is_nfc_inert(char32_t cp);

/// The character GPT-2's byte-level alphabet uses for each byte value: the printable bytes
/// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other 68 bytes map to
/// U+0100.. in increasing order (so the space 0x20 is 'Ġ' U+0120).
const std::array<char32_t, 256>& byte_level_alphabet();

/// The raw bytes behind a token written in the byte-level alphabet ("Ġhello" -> " hello"), or
/// nullopt if `token` holds a character outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view token);

/// Raw bytes written in the byte-level alphabet (" hello" -> "Ġhello").
std::string bytes_to_byte_level(std::string_view bytes);

} // namespace kbrl::tok
