#include "runtime/tokenizer/bpe.hpp"

#include "messages/errors.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

namespace kbrl::tok {

// ---- piece_cache --------------------------------------------------------------------------

const piece_cache::slot* piece_cache::generation::find(std::string_view piece,
                                                       uint64_t hash) const {
  if (slots.empty())
    return nullptr;
  const std::size_t mask = slots.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const slot& s = slots[i];
    if (s.key_size == 0)
      return nullptr;
    if (s.hash == hash && s.key_size == piece.size()
        && std::memcmp(keys.data() + s.key, piece.data(), piece.size()) == 0)
      return &s;
  }
}

void piece_cache::generation::insert(std::string_view piece, uint64_t hash, const int32_t* id,
                                     std::size_t n, std::size_t capacity) {
  if (slots.empty()) {
    std::size_t size = 2;
    while (size < 2 * capacity)
      size *= 2;
    slots.resize(size);
  }
  const std::size_t mask = slots.size() - 1;
  std::size_t i = hash & mask;
  while (slots[i].key_size != 0)
    i = (i + 1) & mask;
  slot& s = slots[i];
  s.hash = hash;
  s.key = static_cast<uint32_t>(keys.size());
  s.ids = static_cast<uint32_t>(ids.size());
  s.key_size = static_cast<uint16_t>(piece.size());
  s.id_count = static_cast<uint16_t>(n);
  keys.append(piece);
  ids.insert(ids.end(), id, id + n);
  ++count;
}

bool piece_cache::find(std::string_view piece, std::vector<int32_t>& out) {
  const uint64_t hash = std::hash<std::string_view>{}(piece);
  std::lock_guard<std::mutex> lock{mutex_};
  if (const slot* s = current_.find(piece, hash)) {
    const int32_t* ids = current_.ids.data() + s->ids;
    out.insert(out.end(), ids, ids + s->id_count);
    return true;
  }
  if (const slot* s = previous_.find(piece, hash)) {
    // Copied out first: moving it forward may rotate the previous generation away.
    const std::size_t first = out.size();
    const int32_t* ids = previous_.ids.data() + s->ids;
    out.insert(out.end(), ids, ids + s->id_count);
    insert_locked(piece, hash, out.data() + first, out.size() - first);
    return true;
  }
  return false;
}

void piece_cache::insert(std::string_view piece, const int32_t* ids, std::size_t count) {
  if (piece.empty() || piece.size() > UINT16_MAX || count > UINT16_MAX)
    return;
  const uint64_t hash = std::hash<std::string_view>{}(piece);
  std::lock_guard<std::mutex> lock{mutex_};
  if (current_.find(piece, hash) == nullptr)
    insert_locked(piece, hash, ids, count);
}

void piece_cache::insert_locked(std::string_view piece, uint64_t hash, const int32_t* ids,
                                std::size_t count) {
  if (current_.count >= capacity_
      || current_.keys.size() + current_.ids.size() * sizeof(int32_t) >= max_generation_bytes) {
    previous_ = std::move(current_);
    current_ = generation{};
  }
  current_.insert(piece, hash, ids, count, capacity_);
}

std::size_t piece_cache::size() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return current_.count + previous_.count;
}

void piece_cache::clear() {
  std::lock_guard<std::mutex> lock{mutex_};
  current_ = generation{};
  previous_ = generation{};
}

// ---- bpe_model ----------------------------------------------------------------------------

namespace {

std::string hex_byte(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

} // namespace

caf::expected<bpe_model>
bpe_model::create(const std::vector<std::pair<std::string_view, int64_t>>& vocab,
                  const std::vector<std::pair<std::string_view, std::string_view>>& merges,
                  bool ignore_merges, const std::string& file) {
  auto fail = [&](const std::string& key, const std::string& what) {
    return make_error(errc::invalid_config, file + ": " + key + ": " + what);
  };
  bpe_model m;
  m.ignore_merges_ = ignore_merges;
  m.cache_ = std::make_shared<piece_cache>(cache_capacity);

  int64_t limit = 0;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id > max_token_id)
      return fail("model.vocab", "token \"" + std::string{token} + "\" has id "
                                   + std::to_string(id) + "; expected an id from 0 to "
                                   + std::to_string(max_token_id));
    limit = std::max(limit, id + 1);
  }
  m.bytes_.resize(static_cast<std::size_t>(limit));
  m.present_.assign(static_cast<std::size_t>(limit), false);
  // The byte-level strings of tokenizer.json, indexed for the merges below.
  std::unordered_map<std::string_view, int32_t> by_text;
  by_text.reserve(vocab.size());
  for (const auto& [token, id64] : vocab) {
    const auto id = static_cast<int32_t>(id64);
    auto bytes = byte_level_to_bytes(token);
    if (!bytes)
      return fail("model.vocab",
                  "token \"" + std::string{token} + "\" (id " + std::to_string(id)
                    + ") is not written in the byte-level alphabet; kbrl reads byte-level BPE "
                      "files only");
    if (bytes->empty())
      return fail("model.vocab", "the empty string is not a token (id " + std::to_string(id) + ")");
    if (m.present_[id])
      return fail("model.vocab", "id " + std::to_string(id) + " is used by \""
                                   + bytes_to_byte_level(m.bytes_[id]) + "\" and by \""
                                   + std::string{token} + "\"");
    m.present_[id] = true;
    m.bytes_[id] = std::move(*bytes);
    by_text.emplace(token, id);
  }
  m.size_ = vocab.size();
  m.by_bytes_.reserve(vocab.size());
  for (std::size_t id = 0; id < m.bytes_.size(); ++id)
    if (m.present_[id])
      m.by_bytes_.emplace(m.bytes_[id], static_cast<int32_t>(id));

  const auto& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    auto it = m.by_bytes_.find(byte);
    if (it == m.by_bytes_.end()) {
      std::string shown;
      append_utf8(shown, alphabet[b]);
      return fail("model.vocab", "byte-level BPE needs a token for every byte, and byte "
                                   + hex_byte(b) + " (\"" + shown + "\") has none");
    }
    m.byte_ids_[b] = it->second;
  }

  std::vector<std::pair<uint64_t, merge_rule>> rules;
  rules.reserve(merges.size());
  std::string joined;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::string key = "model.merges[" + std::to_string(rank) + "]";
    auto l = by_text.find(left);
    auto r = by_text.find(right);
    if (l == by_text.end() || r == by_text.end())
      return fail(key, "merges \"" + std::string{left} + "\" and \"" + std::string{right}
                         + "\", but \"" + std::string{l == by_text.end() ? left : right}
                         + "\" is not in model.vocab");
    joined.assign(left);
    joined.append(right);
    auto merged = by_text.find(joined);
    if (merged == by_text.end())
      return fail(key, "merges \"" + std::string{left} + "\" and \"" + std::string{right}
                         + "\" into \"" + joined + "\", which is not in model.vocab");
    rules.emplace_back(pair_key(l->second, r->second),
                       merge_rule{static_cast<int32_t>(rank), merged->second});
  }
  m.merges_.build(rules);
  return m;
}

void bpe_model::merge_table::build(const std::vector<std::pair<uint64_t, merge_rule>>& rules) {
  int bits = 1;
  while ((std::size_t{1} << bits) < 2 * rules.size() + 2)
    ++bits;
  shift_ = 64 - bits;
  mask_ = (uint64_t{1} << bits) - 1;
  keys_.assign(std::size_t{1} << bits, empty);
  rules_.assign(std::size_t{1} << bits, merge_rule{});
  size_ = 0;
  for (const auto& [key, rule] : rules) {
    uint64_t slot = hash(key);
    while (keys_[slot] != empty && keys_[slot] != key)
      slot = (slot + 1) & mask_;
    // A repeated pair keeps its last rank, as the Rust and JavaScript loaders do.
    size_ += keys_[slot] == empty;
    keys_[slot] = key;
    rules_[slot] = rule;
  }
}

std::optional<int32_t> bpe_model::find(std::string_view bytes) const {
  auto it = by_bytes_.find(bytes);
  if (it == by_bytes_.end())
    return std::nullopt;
  return it->second;
}

const std::string* bpe_model::bytes_of(int32_t id) const {
  if (id < 0 || id >= id_limit() || !present_[id])
    return nullptr;
  return &bytes_[id];
}

void bpe_model::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    if (auto id = find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= max_cached_piece;
  if (cacheable && cache_->find(piece, out))
    return;
  const std::size_t first = out.size();
  merge(piece, out);
  if (cacheable)
    cache_->insert(piece, out.data() + first, out.size() - first);
}

void bpe_model::merge(std::string_view piece, std::vector<int32_t>& out) const {
  // Symbols form a linked list over the byte positions; a merged symbol lives at the position
  // of its left part. A heap entry names a candidate pair by the left position and both ids:
  // it is stale once either symbol changed, which a merge always does (a merged id covers
  // more bytes, so a position never returns to an id it had).
  struct candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t merged;
    bool operator>(const candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<int32_t>(piece.size());
  thread_local std::vector<int32_t> ids, next, prev;
  thread_local std::vector<candidate> heap; // a min-heap through std::push_heap/pop_heap
  ids.resize(n);
  next.resize(n);
  prev.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  heap.clear();
  const std::greater<candidate> later;
  auto consider = [&](int32_t pos) {
    const int32_t right = next[pos];
    if (right < 0)
      return;
    if (const merge_rule* r = rule(ids[pos], ids[right])) {
      heap.push_back(candidate{r->rank, pos, ids[pos], ids[right], r->merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const candidate c = heap.back();
    heap.pop_back();
    const int32_t right = next[c.pos];
    if (ids[c.pos] != c.left || right < 0 || ids[right] != c.right)
      continue;
    ids[c.pos] = c.merged;
    ids[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0)
      prev[next[right]] = c.pos;
    if (prev[c.pos] >= 0)
      consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i])
    out.push_back(ids[i]);
  if (n > (1 << 20)) {
    // Do not keep a huge piece's scratch space alive in every thread that once saw one.
    ids = {};
    next = {};
    prev = {};
    heap = {};
  }
}

} // namespace kbrl::tok
