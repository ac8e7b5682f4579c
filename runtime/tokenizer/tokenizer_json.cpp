// Over 800 lines: one reader per tokenizer.json section, each with its own error texts.
// Reads tokenizer.json and tokenizer_config.json into a tokenizer_model. Every check names the
// file and the JSON key ("model.merges[12]", "pre_tokenizer.pretokenizers[0].behavior") and
// says what was expected.

#include "messages/errors.hpp"
#include "runtime/tokenizer/tokenizer_model.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace kbrl::tok {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// By value: a range-for over `e.get_array().value_unsafe()` would iterate a member of a
// temporary that is already gone.
simdjson::dom::array as_array(element e) {
  return e.get_array().value_unsafe();
}

simdjson::dom::object as_object(element e) {
  return e.get_object().value_unsafe();
}

/// `json` with every integer too large for 64 bits written as a floating-point number (a
/// ".0" appended). simdjson 3.0 rejects such integers, and tokenizer_config.json files carry
/// one: Llama 3's model_max_length is 1000000000000000019884624838656.
std::string widen_big_integers(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < json.size();) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < json.size()) {
        out += json[i + 1];
        i += 2;
        continue;
      }
      in_string = c != '"';
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t end = i + 1;
      while (end < json.size() && std::strchr("0123456789.eE+-", json[end]) != nullptr)
        ++end;
      const std::string_view number = json.substr(i, end - i);
      out += number;
      const std::size_t digits = number.size() - (number[0] == '-' ? 1 : 0);
      if (digits > 19 && number.find_first_of(".eE") == std::string_view::npos)
        out += ".0";
      i = end;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

/// Parses `json` into `root`; a number simdjson cannot hold is retried through
/// widen_big_integers. Returns the error text, or "" on success.
std::string parse_json(simdjson::dom::parser& parser, std::string_view json, element& root,
                       std::string& widened) {
  auto err = parser.parse(json.data(), json.size()).get(root);
  if (err == simdjson::NUMBER_ERROR) {
    widened = widen_big_integers(json);
    err = parser.parse(widened).get(root);
  }
  return err ? simdjson::error_message(err) : "";
}

/// How a JSON value reads in an error message: `"BPE"`, `42`, `null`, `an object`.
std::string shown(element e) {
  switch (e.type()) {
    case element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      if (s.size() > 60)
        return "\"" + std::string{s.substr(0, 57)} + "...\"";
      return "\"" + std::string{s} + "\"";
    }
    case element_type::INT64: return std::to_string(e.get_int64().value_unsafe());
    case element_type::UINT64: return std::to_string(e.get_uint64().value_unsafe());
    case element_type::DOUBLE: return std::to_string(e.get_double().value_unsafe());
    case element_type::BOOL: return e.get_bool().value_unsafe() ? "true" : "false";
    case element_type::NULL_VALUE: return "null";
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
  }
  return "a JSON value";
}

/// Reads one JSON file, turning each problem into an error naming the file and key.
class json_file {
public:
  explicit json_file(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  caf::error bad(const std::string& key, const std::string& what) const {
    return make_error(errc::invalid_config, name_ + ": " + key + ": " + what);
  }
  caf::error unsupported(const std::string& key, const std::string& what) const {
    return make_error(errc::not_supported, name_ + ": " + key + ": " + what);
  }
  caf::error expected_got(const std::string& key, const std::string& expected, element got) const {
    return bad(key, "expected " + expected + ", got " + shown(got));
  }

  /// The member `key` of `object`, if present (null counts as present).
  static std::optional<element> member(element object, std::string_view key) {
    element value;
    if (object.type() != element_type::OBJECT || object.at_key(key).get(value))
      return std::nullopt;
    return value;
  }

  caf::expected<std::string_view> string(element e, const std::string& key) const {
    if (e.type() != element_type::STRING)
      return expected_got(key, "a string", e);
    return e.get_string().value_unsafe();
  }

  caf::expected<int64_t> integer(element e, const std::string& key, int64_t lo, int64_t hi) const {
    int64_t value = 0;
    if (e.type() == element_type::INT64)
      value = e.get_int64().value_unsafe();
    else if (e.type() == element_type::UINT64)
      value = std::numeric_limits<int64_t>::max();
    else
      return expected_got(key, "an integer", e);
    if (value < lo || value > hi)
      return expected_got(key, "an integer from " + std::to_string(lo) + " to "
                                 + std::to_string(hi), e);
    return value;
  }

  /// An optional boolean member; `fallback` if absent or null.
  caf::expected<bool> flag(element object, std::string_view name, const std::string& key,
                           bool fallback) const {
    auto value = member(object, name);
    if (!value || value->type() == element_type::NULL_VALUE)
      return fallback;
    if (value->type() != element_type::BOOL)
      return expected_got(key, "true or false", *value);
    return value->get_bool().value_unsafe();
  }

  /// The "type" member of a component object at `key`.
  caf::expected<std::string_view> type_of(element object, const std::string& key) const {
    if (object.type() != element_type::OBJECT)
      return expected_got(key, "an object with a \"type\"", object);
    auto type = member(object, "type");
    if (!type)
      return bad(key + ".type", "required key is missing");
    return string(*type, key + ".type");
  }

private:
  std::string name_;
};

constexpr int64_t max_id = bpe_model::max_token_id;

/// The byte-level BPE model of tokenizer.json.
caf::expected<bpe_model> read_model(const json_file& f, element root) {
  auto model = json_file::member(root, "model");
  if (!model || model->type() == element_type::NULL_VALUE)
    return f.bad("model", "required key is missing (expected {\"type\": \"BPE\", \"vocab\": "
                          "{...}, \"merges\": [...]})");
  auto type = f.type_of(*model, "model");
  if (!type)
    return type.error();
  if (*type != "BPE")
    return f.unsupported("model.type", "model type \"" + std::string{*type}
                                         + "\" is not supported; kbrl reads byte-level BPE "
                                           "tokenizers (model.type \"BPE\") only");
  auto byte_fallback = f.flag(*model, "byte_fallback", "model.byte_fallback", false);
  if (!byte_fallback)
    return byte_fallback.error();
  if (*byte_fallback)
    return f.unsupported("model.byte_fallback", "byte_fallback (SentencePiece-style BPE) is not "
                                                "supported; kbrl reads byte-level BPE only");
  if (auto dropout = json_file::member(*model, "dropout");
      dropout && dropout->type() != element_type::NULL_VALUE) {
    double p = 0;
    if (dropout->get_double().get(p) || p != 0.0)
      return f.unsupported("model.dropout", "expected null (BPE dropout is for training), got "
                                              + shown(*dropout));
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto value = json_file::member(*model, affix);
    if (!value || value->type() == element_type::NULL_VALUE)
      continue;
    auto text = f.string(*value, std::string{"model."} + affix);
    if (!text)
      return text.error();
    if (!text->empty())
      return f.unsupported(std::string{"model."} + affix,
                           "expected \"\" or null (byte-level BPE has no subword affixes), got "
                             + shown(*value));
  }
  auto ignore_merges = f.flag(*model, "ignore_merges", "model.ignore_merges", false);
  if (!ignore_merges)
    return ignore_merges.error();

  auto vocab_element = json_file::member(*model, "vocab");
  if (!vocab_element)
    return f.bad("model.vocab", "required key is missing");
  if (vocab_element->type() != element_type::OBJECT)
    return f.expected_got("model.vocab", "an object mapping tokens to ids", *vocab_element);
  std::vector<std::pair<std::string_view, int64_t>> vocab;
  for (auto [token, id] : as_object(*vocab_element)) {
    auto value = f.integer(id, "model.vocab[\"" + std::string{token} + "\"]", 0, max_id);
    if (!value)
      return value.error();
    vocab.emplace_back(token, *value);
  }

  auto merges_element = json_file::member(*model, "merges");
  if (!merges_element)
    return f.bad("model.merges", "required key is missing");
  if (merges_element->type() != element_type::ARRAY)
    return f.expected_got("model.merges", "an array of merges", *merges_element);
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  std::size_t index = 0;
  for (element merge : as_array(*merges_element)) {
    const std::string key = "model.merges[" + std::to_string(index++) + "]";
    if (merge.type() == element_type::STRING) {
      // The older form, "left right": byte-level tokens never hold a plain space.
      std::string_view text = merge.get_string().value_unsafe();
      const std::size_t space = text.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 >= text.size()
          || text.find(' ', space + 1) != std::string_view::npos)
        return f.expected_got(key, "\"left right\" (two tokens and one space)", merge);
      merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.type() == element_type::ARRAY) {
      auto pair = merge.get_array().value_unsafe();
      if (pair.size() != 2 || pair.at(0).value_unsafe().type() != element_type::STRING
          || pair.at(1).value_unsafe().type() != element_type::STRING)
        return f.expected_got(key, "[\"left\", \"right\"] (two strings)", merge);
      merges.emplace_back(pair.at(0).value_unsafe().get_string().value_unsafe(),
                          pair.at(1).value_unsafe().get_string().value_unsafe());
    } else {
      return f.expected_got(key, "\"left right\" or [\"left\", \"right\"]", merge);
    }
  }
  return bpe_model::create(vocab, merges, *ignore_merges, f.name());
}

/// One normalizer (recursively for Sequence) into `forms`.
caf::error read_normalizer(const json_file& f, element e, const std::string& key,
                           std::vector<normal_form>& forms) {
  if (e.type() == element_type::NULL_VALUE)
    return {};
  auto type = f.type_of(e, key);
  if (!type)
    return type.error();
  static const std::map<std::string_view, normal_form> by_name{{"NFC", normal_form::nfc},
                                                               {"NFD", normal_form::nfd},
                                                               {"NFKC", normal_form::nfkc},
                                                               {"NFKD", normal_form::nfkd}};
  if (auto it = by_name.find(*type); it != by_name.end()) {
    forms.push_back(it->second);
    return {};
  }
  if (*type == "Sequence") {
    auto list = json_file::member(e, "normalizers");
    if (!list || list->type() != element_type::ARRAY)
      return f.bad(key + ".normalizers", "expected an array of normalizers");
    std::size_t i = 0;
    for (element inner : as_array(*list))
      if (auto err = read_normalizer(f, inner, key + ".normalizers[" + std::to_string(i++) + "]",
                                     forms))
        return err;
    return {};
  }
  return f.unsupported(key + ".type", "normalizer \"" + std::string{*type}
                                        + "\" is not supported (kbrl knows NFC, NFD, NFKC, "
                                          "NFKD and Sequence)");
}

/// One pre-tokenizer (recursively for Sequence) into `steps`; notes whether ByteLevel was seen.
caf::error read_pre_tokenizer(const json_file& f, element e, const std::string& key,
                              std::vector<pre_tokenizer::step>& steps, bool& byte_level) {
  if (e.type() == element_type::NULL_VALUE)
    return {};
  auto type = f.type_of(e, key);
  if (!type)
    return type.error();
  if (*type == "Sequence") {
    auto list = json_file::member(e, "pretokenizers");
    if (!list || list->type() != element_type::ARRAY)
      return f.bad(key + ".pretokenizers", "expected an array of pre-tokenizers");
    std::size_t i = 0;
    for (element inner : as_array(*list))
      if (auto err = read_pre_tokenizer(
            f, inner, key + ".pretokenizers[" + std::to_string(i++) + "]", steps, byte_level))
        return err;
    return {};
  }
  if (*type == "ByteLevel") {
    byte_level = true;
    // Defaults as in Hugging Face's tokenizers library.
    auto prefix = f.flag(e, "add_prefix_space", key + ".add_prefix_space", true);
    auto use_regex = f.flag(e, "use_regex", key + ".use_regex", true);
    if (!prefix)
      return prefix.error();
    if (!use_regex)
      return use_regex.error();
    if (*prefix)
      steps.push_back(pre_tokenizer::step{pre_tokenizer::step::kind::prefix_space, {}, true});
    if (*use_regex) {
      auto regex = js_regex::compile(pre_tokenizer::gpt2_pattern(), f.name() + ": " + key);
      if (!regex)
        return regex.error();
      steps.push_back(pre_tokenizer::step{pre_tokenizer::step::kind::split, *regex, true});
    }
    return {};
  }
  if (*type == "Split") {
    auto pattern = json_file::member(e, "pattern");
    if (!pattern || pattern->type() != element_type::OBJECT)
      return f.bad(key + ".pattern", "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    caf::expected<js_regex> regex = caf::error{};
    if (auto r = json_file::member(*pattern, "Regex")) {
      auto text = f.string(*r, key + ".pattern.Regex");
      if (!text)
        return text.error();
      regex = js_regex::compile(*text, f.name() + ": " + key + ".pattern.Regex");
    } else if (auto s = json_file::member(*pattern, "String")) {
      auto text = f.string(*s, key + ".pattern.String");
      if (!text)
        return text.error();
      regex = js_regex::literal(*text, f.name() + ": " + key + ".pattern.String");
    } else {
      return f.bad(key + ".pattern", "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    if (!regex)
      return regex.error();
    auto invert = f.flag(e, "invert", key + ".invert", false);
    if (!invert)
      return invert.error();
    if (*invert)
      return f.unsupported(key + ".invert", "expected false (inverted splits are not supported)");
    auto behavior = json_file::member(e, "behavior");
    if (!behavior)
      return f.bad(key + ".behavior", "required key is missing (expected \"Isolated\")");
    auto name = f.string(*behavior, key + ".behavior");
    if (!name)
      return name.error();
    if (*name != "Isolated" && *name != "Removed")
      return f.unsupported(key + ".behavior", "expected \"Isolated\" or \"Removed\", got \""
                                                + std::string{*name} + "\"");
    steps.push_back(
      pre_tokenizer::step{pre_tokenizer::step::kind::split, *regex, *name == "Isolated"});
    return {};
  }
  if (*type == "Digits") {
    auto individual = f.flag(e, "individual_digits", key + ".individual_digits", false);
    if (!individual)
      return individual.error();
    auto regex = js_regex::compile(*individual ? "[^\\d]+|\\d" : "[^\\d]+|\\d+",
                                   f.name() + ": " + key);
    if (!regex)
      return regex.error();
    steps.push_back(pre_tokenizer::step{pre_tokenizer::step::kind::split, *regex, true});
    return {};
  }
  return f.unsupported(key + ".type", "pre-tokenizer \"" + std::string{*type}
                                        + "\" is not supported (kbrl knows Split, ByteLevel, "
                                          "Digits and Sequence: the byte-level BPE layouts)");
}

/// The decoder must be ByteLevel (alone or as the only kind in a Sequence).
caf::error check_decoder(const json_file& f, element root) {
  auto decoder = json_file::member(root, "decoder");
  const std::string expected = "expected {\"type\": \"ByteLevel\"} (kbrl reads byte-level BPE "
                               "tokenizers only)";
  if (!decoder || decoder->type() == element_type::NULL_VALUE)
    return f.unsupported("decoder", expected + ", got " + (decoder ? "null" : "nothing"));
  auto type = f.type_of(*decoder, "decoder");
  if (!type)
    return type.error();
  if (*type == "ByteLevel")
    return {};
  if (*type == "Sequence") {
    auto list = json_file::member(*decoder, "decoders");
    if (list && list->type() == element_type::ARRAY) {
      std::size_t i = 0;
      for (element inner : as_array(*list)) {
        const std::string key = "decoder.decoders[" + std::to_string(i++) + "]";
        auto inner_type = f.type_of(inner, key);
        if (!inner_type)
          return inner_type.error();
        if (*inner_type != "ByteLevel")
          return f.unsupported(key + ".type", expected + ", got \"" + std::string{*inner_type}
                                                + "\"");
      }
      return {};
    }
  }
  return f.unsupported("decoder.type", expected + ", got \"" + std::string{*type} + "\"");
}

/// Reads one added-token object (tokenizer.json's added_tokens[i] or the config's
/// added_tokens_decoder entries, which carry the id as their key).
caf::expected<added_token> read_added_token(const json_file& f, element e, const std::string& key,
                                            std::optional<int64_t> id_from_key) {
  if (e.type() != element_type::OBJECT)
    return f.expected_got(key, "an object {\"id\", \"content\", ...}", e);
  added_token t;
  if (id_from_key) {
    t.id = static_cast<int32_t>(*id_from_key);
  } else {
    auto id = json_file::member(e, "id");
    if (!id)
      return f.bad(key + ".id", "required key is missing");
    auto value = f.integer(*id, key + ".id", 0, max_id);
    if (!value)
      return value.error();
    t.id = static_cast<int32_t>(*value);
  }
  auto content = json_file::member(e, "content");
  if (!content)
    return f.bad(key + ".content", "required key is missing");
  auto text = f.string(*content, key + ".content");
  if (!text)
    return text.error();
  if (text->empty())
    return f.bad(key + ".content", "expected a non-empty string");
  t.content = std::string{*text};
  auto special = f.flag(e, "special", key + ".special", false);
  if (!special)
    return special.error();
  t.special = *special;
  bool* flags[] = {&t.lstrip, &t.rstrip, &t.single_word, &t.normalized};
  const char* names[] = {"lstrip", "rstrip", "single_word", "normalized"};
  for (int i = 0; i < 4; ++i) {
    // Hugging Face's default: special tokens are matched in the raw text, others normalized.
    const bool fallback = i == 3 ? !t.special : false;
    auto value = f.flag(e, names[i], key + "." + names[i], fallback);
    if (!value)
      return value.error();
    *flags[i] = *value;
  }
  return t;
}

/// The token named by a config entry: a string, {"content": ...}, or null.
caf::expected<std::optional<std::string>> token_name(const json_file& f, element e,
                                                     const std::string& key) {
  if (e.type() == element_type::NULL_VALUE)
    return std::optional<std::string>{};
  if (e.type() == element_type::STRING)
    return std::optional<std::string>{std::string{e.get_string().value_unsafe()}};
  if (e.type() == element_type::OBJECT) {
    auto content = json_file::member(e, "content");
    if (content && content->type() == element_type::STRING)
      return std::optional<std::string>{std::string{content->get_string().value_unsafe()}};
  }
  return f.expected_got(key, "a token string, {\"content\": \"...\"} or null", e);
}

/// Adds `t` to the model's added tokens, checking it against the vocabulary and the tokens
/// already there (`key` names it in errors).
caf::error add_token(const json_file& f, tokenizer_model& m, const added_token& t,
                     const std::string& key) {
  if (const std::string* bytes = m.bpe.bytes_of(t.id); bytes && *bytes != t.content)
    return f.bad(key, "id " + std::to_string(t.id) + " is \"" + t.content
                        + "\" here but the vocabulary token \"" + bytes_to_byte_level(*bytes)
                        + "\" in model.vocab");
  for (const added_token& other : m.added) {
    if (other.id == t.id) {
      if (other.content != t.content)
        return f.bad(key, "id " + std::to_string(t.id) + " is \"" + t.content
                            + "\" here but \"" + other.content + "\" in tokenizer.json's "
                            "added_tokens");
      return {}; // the same token listed again
    }
    if (other.content == t.content)
      return f.bad(key, "\"" + t.content + "\" has id " + std::to_string(t.id) + " here but "
                          + std::to_string(other.id) + " elsewhere");
  }
  m.added.push_back(t);
  return {};
}

/// tokenizer.json's added_tokens into `m`.
caf::error read_added_tokens(const json_file& f, element root, tokenizer_model& m) {
  auto added = json_file::member(root, "added_tokens");
  if (!added || added->type() == element_type::NULL_VALUE)
    return {};
  if (added->type() != element_type::ARRAY)
    return f.expected_got("added_tokens", "an array", *added);
  std::size_t i = 0;
  for (element e : as_array(*added)) {
    const std::string key = "added_tokens[" + std::to_string(i++) + "]";
    auto t = read_added_token(f, e, key, std::nullopt);
    if (!t)
      return t.error();
    if (auto err = add_token(f, m, *t, key))
      return err;
  }
  return {};
}

/// tokenizer_config.json's added_tokens_decoder into `m`: tokens the config declares beside
/// (or again, which must agree with) tokenizer.json's.
caf::error read_added_tokens_decoder(const json_file& c, element config, tokenizer_model& m) {
  auto decoder = json_file::member(config, "added_tokens_decoder");
  if (!decoder || decoder->type() == element_type::NULL_VALUE)
    return {};
  if (decoder->type() != element_type::OBJECT)
    return c.expected_got("added_tokens_decoder", "an object mapping ids to tokens", *decoder);
  for (auto [id_text, e] : as_object(*decoder)) {
    const std::string key = "added_tokens_decoder[\"" + std::string{id_text} + "\"]";
    int64_t id = -1;
    const bool digits = !id_text.empty() && id_text.size() <= 9
                        && id_text.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits)
      id = std::stoll(std::string{id_text});
    if (id < 0 || id > max_id)
      return c.bad(key, "expected a token id (an integer from 0 to " + std::to_string(max_id)
                          + ") as the key");
    auto t = read_added_token(c, e, key, id);
    if (!t)
      return t.error();
    if (auto err = add_token(c, m, *t, key))
      return err;
  }
  return {};
}

/// Indexes the added tokens by id and content and builds the two matchers; sets vocab_size.
void index_added_tokens(tokenizer_model& m) {
  std::sort(m.added.begin(), m.added.end(),
            [](const added_token& a, const added_token& b) { return a.id < b.id; });
  m.vocab_size = m.bpe.id_limit();
  for (const added_token& t : m.added)
    m.vocab_size = std::max(m.vocab_size, t.id + 1);
  m.added_index.assign(m.vocab_size, -1);
  m.special.assign(m.vocab_size, false);
  std::vector<std::string> raw_contents, normalized_contents;
  for (std::size_t i = 0; i < m.added.size(); ++i) {
    const added_token& t = m.added[i];
    m.added_index[t.id] = static_cast<int32_t>(i);
    m.special[t.id] = t.special;
    m.added_by_content.emplace(t.content, t.id);
    raw_contents.push_back(t.content);
    normalized_contents.push_back(m.normalize(t.content));
  }
  m.raw_matcher = added_token_matcher{m.added, raw_contents,
                                      [](const added_token& t) { return !t.normalized; }};
  m.normalized_matcher = added_token_matcher{m.added, normalized_contents,
                                             [](const added_token& t) { return t.normalized; }};
}

/// One TemplateProcessing post-processor at `key`: its special tokens before the text go to
/// m.prefix_ids, those after it to m.suffix_ids (only the "single" template is used).
caf::error read_template_processing(const json_file& f, element processor, const std::string& key,
                                    tokenizer_model& m) {
  auto single = json_file::member(processor, "single");
  if (!single || single->type() != element_type::ARRAY)
    return f.bad(key + ".single", "expected an array of {\"SpecialToken\"} / {\"Sequence\"}");
  auto special_tokens = json_file::member(processor, "special_tokens");
  bool after_text = false;
  std::size_t i = 0;
  for (element item : as_array(*single)) {
    const std::string item_key = key + ".single[" + std::to_string(i++) + "]";
    if (json_file::member(item, "Sequence")) {
      after_text = true;
      continue;
    }
    auto special = json_file::member(item, "SpecialToken");
    if (!special)
      return f.expected_got(item_key, "{\"SpecialToken\": ...} or {\"Sequence\": ...}", item);
    auto name_element = json_file::member(*special, "id");
    if (!name_element)
      return f.bad(item_key + ".SpecialToken.id", "required key is missing");
    auto name = f.string(*name_element, item_key + ".SpecialToken.id");
    if (!name)
      return name.error();
    // The ids come from special_tokens[name].ids if listed there, else from the token itself.
    std::vector<int32_t> ids;
    std::optional<element> listed;
    if (special_tokens)
      listed = json_file::member(*special_tokens, *name);
    if (auto list = listed ? json_file::member(*listed, "ids") : std::nullopt) {
      const std::string ids_key = key + ".special_tokens[\"" + std::string{*name} + "\"].ids";
      if (list->type() != element_type::ARRAY)
        return f.expected_got(ids_key, "an array of ids", *list);
      for (element id : as_array(*list)) {
        auto value = f.integer(id, ids_key, 0, m.vocab_size - 1);
        if (!value)
          return value.error();
        ids.push_back(static_cast<int32_t>(*value));
      }
    } else if (auto id = m.find_token(*name)) {
      ids.push_back(*id);
    } else {
      return f.bad(item_key + ".SpecialToken.id",
                   "\"" + std::string{*name} + "\" is not a token of this tokenizer");
    }
    auto& target = after_text ? m.suffix_ids : m.prefix_ids;
    target.insert(target.end(), ids.begin(), ids.end());
  }
  return {};
}

/// The post-processor: ByteLevel (nothing to add), TemplateProcessing, or a Sequence of them.
caf::error read_post_processor(const json_file& f, element root, tokenizer_model& m) {
  std::vector<std::pair<element, std::string>> processors; // with their keys
  auto post = json_file::member(root, "post_processor");
  if (!post || post->type() == element_type::NULL_VALUE)
    return {};
  auto type = f.type_of(*post, "post_processor");
  if (!type)
    return type.error();
  if (*type == "Sequence") {
    auto list = json_file::member(*post, "processors");
    if (!list || list->type() != element_type::ARRAY)
      return f.bad("post_processor.processors", "expected an array of post-processors");
    for (element e : as_array(*list))
      processors.emplace_back(e, "post_processor.processors[" + std::to_string(processors.size())
                                   + "]");
  } else {
    processors.emplace_back(*post, "post_processor");
  }
  for (const auto& [processor, key] : processors) {
    auto inner = f.type_of(processor, key);
    if (!inner)
      return inner.error();
    if (*inner == "ByteLevel")
      continue; // it only adjusts offsets; the ids stay as they are
    if (*inner != "TemplateProcessing")
      return f.unsupported(key + ".type", "post-processor \"" + std::string{*inner}
                                            + "\" is not supported (kbrl knows ByteLevel, "
                                              "TemplateProcessing and Sequence)");
    if (auto err = read_template_processing(f, processor, key, m))
      return err;
  }
  return {};
}

/// tokenizer_config.json's bos/eos/pad/unk_token, additional_special_tokens and chat_template.
caf::error read_config_settings(const json_file& c, element config, tokenizer_model& m,
                                const std::string& json_name) {
  struct named {
    const char* key;
    std::optional<std::string>* token;
    std::optional<int32_t>* id;
  };
  std::optional<std::string> unk_token; // checked, not kept: byte-level BPE has no unknowns
  std::optional<int32_t> unk_id;
  for (named n : {named{"bos_token", &m.bos_token, &m.bos_id},
                  named{"eos_token", &m.eos_token, &m.eos_id},
                  named{"pad_token", &m.pad_token, &m.pad_id},
                  named{"unk_token", &unk_token, &unk_id}}) {
    auto e = json_file::member(config, n.key);
    if (!e)
      continue;
    auto name = token_name(c, *e, n.key);
    if (!name)
      return name.error();
    if (!*name)
      continue;
    auto id = m.find_token(**name);
    if (!id)
      return c.bad(n.key, "\"" + **name + "\" is not a token of " + json_name);
    *n.token = **name;
    *n.id = *id;
  }
  if (auto extra = json_file::member(config, "additional_special_tokens");
      extra && extra->type() != element_type::NULL_VALUE) {
    if (extra->type() != element_type::ARRAY)
      return c.expected_got("additional_special_tokens", "an array of tokens", *extra);
    std::size_t i = 0;
    for (element e : as_array(*extra)) {
      const std::string key = "additional_special_tokens[" + std::to_string(i++) + "]";
      auto name = token_name(c, e, key);
      if (!name)
        return name.error();
      if (!*name)
        continue;
      auto id = m.find_token(**name);
      if (!id)
        return c.bad(key, "\"" + **name + "\" is not a token of " + json_name);
      m.special[*id] = true;
    }
  }
  auto t = json_file::member(config, "chat_template");
  if (!t || t->type() == element_type::NULL_VALUE)
    return {};
  const std::string expected = "a string or a list of {\"name\", \"template\"}";
  if (t->type() == element_type::STRING) {
    m.chat_template = std::string{t->get_string().value_unsafe()};
    return {};
  }
  if (t->type() != element_type::ARRAY)
    return c.expected_got("chat_template", expected, *t);
  // Several named templates: the one called "default" is the chat template.
  for (element entry : as_array(*t)) {
    auto name = json_file::member(entry, "name");
    auto text = json_file::member(entry, "template");
    if (!name || !text || name->type() != element_type::STRING
        || text->type() != element_type::STRING)
      return c.expected_got("chat_template", expected, *t);
    if (name->get_string().value_unsafe() == "default")
      m.chat_template = std::string{text->get_string().value_unsafe()};
  }
  return {};
}

} // namespace

std::optional<int32_t> tokenizer_model::find_token(std::string_view token) const {
  if (auto it = added_by_content.find(std::string{token}); it != added_by_content.end())
    return it->second;
  if (auto bytes = byte_level_to_bytes(token))
    return bpe.find(*bytes);
  return std::nullopt;
}

caf::expected<std::shared_ptr<tokenizer_model>>
read_tokenizer_model(std::string_view tokenizer_json, const std::string& json_name,
                     std::string_view tokenizer_config_json, const std::string& config_name,
                     std::string chat_template_file) {
  auto m = std::make_shared<tokenizer_model>();
  m->source = json_name;
  const json_file f{json_name};
  simdjson::dom::parser parser;
  element root;
  std::string widened_json;
  if (auto err = parse_json(parser, tokenizer_json, root, widened_json); !err.empty())
    return make_error(errc::invalid_config, json_name + ": not valid JSON: " + err);
  if (root.type() != element_type::OBJECT)
    return f.expected_got("(top level)", "an object", root);

  auto bpe = read_model(f, root);
  if (!bpe)
    return bpe.error();
  m->bpe = std::move(*bpe);

  if (auto normalizer = json_file::member(root, "normalizer"))
    if (auto err = read_normalizer(f, *normalizer, "normalizer", m->normalizers))
      return err;

  std::vector<pre_tokenizer::step> steps;
  bool byte_level = false;
  if (auto pre = json_file::member(root, "pre_tokenizer"))
    if (auto err = read_pre_tokenizer(f, *pre, "pre_tokenizer", steps, byte_level))
      return err;
  if (!byte_level)
    return f.unsupported("pre_tokenizer", "no ByteLevel pre-tokenizer; kbrl reads byte-level "
                                          "BPE tokenizers only");
  m->pre = pre_tokenizer{std::move(steps)};

  if (auto err = check_decoder(f, root))
    return err;
  if (auto err = read_added_tokens(f, root, *m))
    return err;

  const json_file c{config_name};
  simdjson::dom::parser config_parser;
  element config;
  std::string widened_config;
  const bool has_config = !tokenizer_config_json.empty();
  if (has_config) {
    if (auto err = parse_json(config_parser, tokenizer_config_json, config, widened_config);
        !err.empty())
      return make_error(errc::invalid_config, config_name + ": not valid JSON: " + err);
    if (config.type() != element_type::OBJECT)
      return c.expected_got("(top level)", "an object", config);
    if (auto err = read_added_tokens_decoder(c, config, *m))
      return err;
  }
  index_added_tokens(*m);
  if (auto err = read_post_processor(f, root, *m))
    return err;
  if (has_config)
    if (auto err = read_config_settings(c, config, *m, json_name))
      return err;
  // chat_template.jinja wins over the config's template, as in transformers.
  if (!chat_template_file.empty())
    m->chat_template = std::move(chat_template_file);
  return m;
}

} // namespace kbrl::tok
