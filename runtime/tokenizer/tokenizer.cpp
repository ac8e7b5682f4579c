#include "runtime/tokenizer/tokenizer.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/tokenizer/tokenizer_model.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <deque>
#include <fstream>
#include <sstream>

namespace kbrl::tok {

namespace fs = std::filesystem;

std::string tokenizer_model::normalize(std::string_view text) const {
  std::string out{text};
  for (normal_form form : normalizers)
    out = tok::normalize(out, form);
  return out;
}

caf::expected<tokenizer> tokenizer::load(const fs::path& path) {
  std::error_code ec;
  fs::path json_path = path;
  if (fs::is_directory(path, ec))
    json_path = path / "tokenizer.json";
  else if (!fs::exists(path, ec))
    return make_error(errc::io_failure,
                      path.string() + ": no such file or directory (expected a model directory "
                                      "holding tokenizer.json, or a tokenizer.json file)");
  auto json = io::read_text_file(json_path);
  if (!json)
    return json.error();
  const fs::path dir = json_path.parent_path();
  const fs::path config_path = dir / "tokenizer_config.json";
  std::string config;
  if (fs::exists(config_path, ec)) {
    auto text = io::read_text_file(config_path);
    if (!text)
      return text.error();
    config = std::move(*text);
  }
  std::string chat_template_file;
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path, ec)) {
    auto text = io::read_text_file(jinja_path);
    if (!text)
      return text.error();
    chat_template_file = std::move(*text);
  }
  auto model = read_tokenizer_model(*json, json_path.string(), config, config_path.string(),
                                    std::move(chat_template_file));
  if (!model)
    return model.error();
  return tokenizer{std::move(*model)};
}

caf::expected<tokenizer> tokenizer::parse(std::string_view tokenizer_json,
                                          std::string_view tokenizer_config_json,
                                          const std::string& json_name,
                                          const std::string& config_name) {
  auto model = read_tokenizer_model(tokenizer_json, json_name, tokenizer_config_json,
                                    config_name, {});
  if (!model)
    return model.error();
  return tokenizer{std::move(*model)};
}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode_impl(text, add_special_tokens, /*match_added=*/true);
}

std::vector<int32_t> tokenizer::encode_ordinary(std::string_view text) const {
  return encode_impl(text, /*add_special_tokens=*/false, /*match_added=*/false);
}

std::vector<int32_t> tokenizer::encode_impl(std::string_view text, bool add_special_tokens,
                                            bool match_added) const {
  const tokenizer_model& m = *model_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens)
    ids.insert(ids.end(), m.prefix_ids.begin(), m.prefix_ids.end());

  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  std::vector<added_token_matcher::section> sections;
  if (match_added && !m.raw_matcher.empty())
    m.raw_matcher.split(text, sections);
  else if (!text.empty())
    sections.push_back({text, -1});

  std::vector<added_token_matcher::section> inner;
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  for (const auto& section : sections) {
    if (section.token >= 0) {
      ids.push_back(section.token);
      continue;
    }
    const std::string normalized =
      m.normalizers.empty() ? std::string{section.text} : m.normalize(section.text);
    inner.clear();
    if (match_added && !m.normalized_matcher.empty())
      m.normalized_matcher.split(normalized, inner);
    else if (!normalized.empty())
      inner.push_back({normalized, -1});
    for (const auto& part : inner) {
      if (part.token >= 0) {
        ids.push_back(part.token);
        continue;
      }
      pieces.clear();
      storage.clear();
      m.pre.run(part.text, pieces, storage);
      for (std::string_view piece : pieces)
        m.bpe.encode(piece, ids);
    }
  }
  if (add_special_tokens)
    ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return ids;
}

std::string tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    if (skip_special && is_special(id))
      continue;
    bytes += token_bytes(id);
  }
  if (is_valid_utf8(bytes))
    return bytes;
  return repair_utf8(bytes);
}

std::string_view tokenizer::token_bytes(int32_t id) const {
  const tokenizer_model& m = *model_;
  if (id < 0 || id >= m.vocab_size)
    return {};
  if (m.added_index[id] >= 0)
    return m.added[m.added_index[id]].content;
  if (const std::string* bytes = m.bpe.bytes_of(id))
    return *bytes;
  return {};
}

bool tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < model_->vocab_size && model_->special[id];
}

std::optional<int32_t> tokenizer::token_id(std::string_view token) const {
  return model_->find_token(token);
}

std::optional<std::string> tokenizer::token(int32_t id) const {
  const tokenizer_model& m = *model_;
  if (id < 0 || id >= m.vocab_size)
    return std::nullopt;
  if (m.added_index[id] >= 0)
    return m.added[m.added_index[id]].content;
  if (const std::string* bytes = m.bpe.bytes_of(id))
    return bytes_to_byte_level(*bytes);
  return std::nullopt;
}

int32_t tokenizer::vocab_size() const {
  return model_->vocab_size;
}

const std::vector<added_token>& tokenizer::added_tokens() const {
  return model_->added;
}

const std::optional<std::string>& tokenizer::bos_token() const {
  return model_->bos_token;
}

const std::optional<std::string>& tokenizer::eos_token() const {
  return model_->eos_token;
}

const std::optional<std::string>& tokenizer::pad_token() const {
  return model_->pad_token;
}

std::optional<int32_t> tokenizer::bos_id() const {
  return model_->bos_id;
}

std::optional<int32_t> tokenizer::eos_id() const {
  return model_->eos_id;
}

std::optional<int32_t> tokenizer::pad_id() const {
  return model_->pad_id;
}

const std::string& tokenizer::chat_template() const {
  return model_->chat_template;
}

const std::string& tokenizer::source() const {
  return model_->source;
}

std::size_t tokenizer::cached_pieces() const {
  return model_->bpe.cached_pieces();
}

void tokenizer::clear_cache() const {
  model_->bpe.clear_cache();
}

} // namespace kbrl::tok
