#include "runtime/tokenizer/bpe_trainer.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/tokenizer/pre_tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace kbrl::tok {

const char* qwen2_pretokenizer_pattern() {
  return R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

int32_t bpe_vocabulary::special_id(std::string_view content) const {
  for (size_t i = 0; i < special_tokens.size(); ++i)
    if (special_tokens[i] == content)
      return static_cast<int32_t>(tokens.size() + i);
  return -1;
}

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32)
         | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

/// One distinct pre-token piece: its symbols so far and how often it occurs.
struct word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

/// The texts' pieces, counted. Special tokens are cut out first: each text becomes the
/// stretches between them.
caf::expected<std::vector<word>> count_pieces(const std::vector<std::string>& texts,
                                              const bpe_trainer_options& o,
                                              const std::vector<int32_t>& byte_ids) {
  auto regex = js_regex::compile(o.pattern, "the BPE trainer's pattern");
  if (!regex)
    return make_error(errc::invalid_argument, describe(regex.error()));
  std::map<std::string, int64_t> counts; // ordered: the word order is deterministic
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (auto& raw : texts) {
    auto text = repair_utf8(raw);
    // cut at every special token, the earliest (longest on a tie) first
    std::vector<std::string> stretches;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t best = std::string::npos, best_len = 0;
      for (auto& s : o.special_tokens) {
        auto at = text.find(s, pos);
        if (at != std::string::npos && (at < best || (at == best && s.size() > best_len))) {
          best = at;
          best_len = s.size();
        }
      }
      stretches.push_back(text.substr(pos, best == std::string::npos ? std::string::npos
                                                                     : best - pos));
      if (best == std::string::npos)
        break;
      pos = best + best_len;
    }
    for (auto& stretch : stretches) {
      if (stretch.empty())
        continue;
      auto normal = normalize(stretch, normal_form::nfc);
      spans.clear();
      regex->split(normal, true, spans);
      for (auto [begin, end] : spans)
        ++counts[normal.substr(begin, end - begin)];
    }
  }
  std::vector<word> words;
  words.reserve(counts.size());
  for (auto& [piece, count] : counts) {
    word w;
    w.count = count;
    for (unsigned char c : piece)
      w.symbols.push_back(byte_ids[c]);
    words.push_back(std::move(w));
  }
  return words;
}

/// Merges pairs by frequency (see the header) over counted words.
class merger {
public:
  merger(std::vector<word> words, std::vector<std::string>& tokens)
    : words_(std::move(words)), tokens_(tokens) {
    for (size_t i = 0; i < tokens_.size(); ++i)
      ids_.emplace(tokens_[i], static_cast<int32_t>(i));
    for (size_t w = 0; w < words_.size(); ++w)
      add_pairs(w, +1);
    for (auto& [key, count] : counts_)
      push(key);
  }

  /// Makes merges until `limit` tokens exist or no pair reaches `min_frequency`.
  std::vector<std::pair<int32_t, int32_t>> run(size_t limit, int64_t min_frequency) {
    std::vector<std::pair<int32_t, int32_t>> merges;
    while (tokens_.size() < limit && !heap_.empty()) {
      auto top = heap_.top();
      heap_.pop();
      auto it = counts_.find(top.key);
      if (it == counts_.end() || it->second != top.count)
        continue; // stale: the pair's count changed since this entry was pushed
      if (top.count < min_frequency)
        break;
      merges.emplace_back(left_of(top.key), right_of(top.key));
      apply(top.key);
    }
    return merges;
  }

private:
  struct entry {
    int64_t count;
    uint64_t key;
  };
  /// Orders the heap: the higher count first, then the pair whose bytes sort first.
  struct worse {
    const std::vector<std::string>* tokens;
    bool operator()(const entry& a, const entry& b) const {
      if (a.count != b.count)
        return a.count < b.count;
      auto& t = *tokens;
      const auto& al = t[left_of(a.key)];
      const auto& bl = t[left_of(b.key)];
      if (al != bl)
        return al > bl;
      return t[right_of(a.key)] > t[right_of(b.key)];
    }
  };

  void push(uint64_t key) {
    auto c = counts_[key];
    if (c > 0)
      heap_.push({c, key});
  }

  /// Adds (sign +1) or removes (-1) the pairs of word `w`, noting which counts changed.
  void add_pairs(size_t w, int sign) {
    auto& s = words_[w].symbols;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto key = pair_key(s[i], s[i + 1]);
      auto& c = counts_[key];
      c += sign * words_[w].count;
      if (sign > 0)
        where_[key].insert(w);
      touched_.insert(key);
    }
  }

  void apply(uint64_t key) {
    const int32_t left = left_of(key), right = right_of(key);
    auto bytes = tokens_[left] + tokens_[right];
    int32_t merged;
    if (auto found = ids_.find(bytes); found != ids_.end()) {
      merged = found->second; // another merge made the same bytes before: same token
    } else {
      merged = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(bytes);
      ids_.emplace(bytes, merged);
    }
    // Sorted, so that the words are rewritten in a fixed order (the counts do not depend on it,
    // but where_'s insertions then do not either).
    std::vector<size_t> affected(where_[key].begin(), where_[key].end());
    std::sort(affected.begin(), affected.end());
    touched_.clear();
    for (auto w : affected) {
      auto& s = words_[w].symbols;
      bool present = false;
      for (size_t i = 0; i + 1 < s.size() && !present; ++i)
        present = s[i] == left && s[i + 1] == right;
      if (!present)
        continue; // an earlier merge took its occurrences
      add_pairs(w, -1);
      std::vector<int32_t> out;
      out.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(s[i]);
        }
      }
      s = std::move(out);
      add_pairs(w, +1);
    }
    counts_.erase(key);
    where_.erase(key);
    touched_.erase(key);
    std::vector<uint64_t> changed(touched_.begin(), touched_.end());
    std::sort(changed.begin(), changed.end());
    for (auto k : changed) {
      if (counts_[k] <= 0) {
        counts_.erase(k);
        where_.erase(k);
      } else {
        push(k);
      }
    }
  }

  std::vector<word> words_;
  std::vector<std::string>& tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::set<size_t>> where_; ///< words that held the pair (a superset)
  std::unordered_set<uint64_t> touched_;
  std::priority_queue<entry, std::vector<entry>, worse> heap_{worse{&tokens_}};
};

caf::expected<void> check(const bpe_trainer_options& o) {
  if (o.min_frequency < 1)
    return make_error(errc::invalid_argument, "BPE trainer: min_frequency must be >= 1, got "
                                                + std::to_string(o.min_frequency));
  std::set<std::string> seen;
  for (auto& s : o.special_tokens) {
    if (s.empty())
      return make_error(errc::invalid_argument, "BPE trainer: a special token is empty");
    if (!seen.insert(s).second)
      return make_error(errc::invalid_argument,
                        "BPE trainer: the special token \"" + s + "\" is listed twice");
  }
  auto floor = 256 + static_cast<int64_t>(o.special_tokens.size());
  if (o.vocab_size < floor)
    return make_error(errc::invalid_argument,
                      "BPE trainer: vocab_size must be at least " + std::to_string(floor)
                        + " (256 bytes and the special tokens), got "
                        + std::to_string(o.vocab_size));
  return {};
}

} // namespace

caf::expected<bpe_vocabulary> train_bpe(const std::vector<std::string>& texts,
                                        const bpe_trainer_options& o) {
  if (auto ok = check(o); !ok)
    return ok.error();
  bpe_vocabulary v;
  v.special_tokens = o.special_tokens;
  v.pattern = o.pattern;
  // the single bytes, ordered by their characters in the byte-level alphabet
  const auto& alphabet = byte_level_alphabet();
  std::vector<int> order(256);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return alphabet[a] < alphabet[b]; });
  std::vector<int32_t> byte_ids(256);
  for (int i = 0; i < 256; ++i) {
    v.tokens.push_back(std::string(1, static_cast<char>(order[i])));
    byte_ids[order[i]] = i;
  }
  auto words = count_pieces(texts, o, byte_ids);
  if (!words)
    return words.error();
  merger m(std::move(*words), v.tokens);
  v.merges = m.run(static_cast<size_t>(o.vocab_size) - o.special_tokens.size(), o.min_frequency);
  return v;
}

std::string render_tokenizer_json(const bpe_vocabulary& v) {
  json_writer w;
  w.begin_object().field("version", "1.0").key("truncation").null().key("padding").null();
  w.key("added_tokens").begin_array();
  for (size_t i = 0; i < v.special_tokens.size(); ++i)
    w.begin_object()
      .field("id", static_cast<int64_t>(v.tokens.size() + i))
      .field("content", v.special_tokens[i])
      .field("single_word", false)
      .field("lstrip", false)
      .field("rstrip", false)
      .field("normalized", false)
      .field("special", true)
      .end_object();
  w.end_array();
  w.key("normalizer").begin_object().field("type", "NFC").end_object();
  w.key("pre_tokenizer").begin_object().field("type", "Sequence").key("pretokenizers").begin_array();
  w.begin_object()
    .field("type", "Split")
    .key("pattern")
    .begin_object()
    .field("Regex", v.pattern)
    .end_object()
    .field("behavior", "Isolated")
    .field("invert", false)
    .end_object();
  w.begin_object()
    .field("type", "ByteLevel")
    .field("add_prefix_space", false)
    .field("trim_offsets", false)
    .field("use_regex", false)
    .end_object();
  w.end_array().end_object();
  for (auto name : {"post_processor", "decoder"}) {
    w.key(name).begin_object()
      .field("type", "ByteLevel")
      .field("add_prefix_space", false)
      .field("trim_offsets", false)
      .field("use_regex", false)
      .end_object();
  }
  w.key("model").begin_object()
    .field("type", "BPE")
    .key("dropout").null()
    .key("unk_token").null()
    .field("continuing_subword_prefix", "")
    .field("end_of_word_suffix", "")
    .field("fuse_unk", false)
    .field("byte_fallback", false);
  w.key("vocab").begin_object();
  for (size_t id = 0; id < v.tokens.size(); ++id)
    w.field(bytes_to_byte_level(v.tokens[id]), static_cast<int64_t>(id));
  w.end_object();
  w.key("merges").begin_array();
  for (auto [left, right] : v.merges)
    w.value(bytes_to_byte_level(v.tokens[left]) + " " + bytes_to_byte_level(v.tokens[right]));
  w.end_array();
  w.end_object().end_object();
  return w.str() + "\n";
}

} // namespace kbrl::tok
