#pragma once
// The byte-level BPE model: the vocabulary (raw bytes <-> id), the merge table, and the merge
// loop that turns one pre-token piece into ids.
//
// BPE runs on raw bytes and token ids, not on the byte-level strings tokenizer.json writes:
// each vocabulary entry is translated once at load ("Ġthe" -> " the"), a piece starts as one
// symbol per byte, and a merge rule maps a pair of ids to (rank, merged id). The loop always
// applies the lowest-ranked merge among adjacent pairs, the leftmost on a tie - the order the
// Rust and JavaScript implementations use - through a heap with lazy invalidation, so a piece of
// n bytes costs O(n log n) merges instead of the O(n^2) of rescanning after every merge.
// Results for pieces up to max_cached_piece bytes are kept in a bounded cache.

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kbrl::tok {

/// Remembers the ids of recently encoded pieces. Two generations approximate an LRU cache at
/// the cost of two lookups: entries go into the current generation; when it holds `capacity`
/// entries it becomes the previous one and the old previous one is dropped; a hit in the
/// previous generation is copied forward. A generation also rotates once its arenas hold
/// max_generation_bytes, so the cache stays below about 2 x (table + 8 MiB) whatever the
/// pieces. A generation is one open-addressing table over two arenas (key bytes, ids), so a
/// hit costs a hash, a probe and a memcmp. Keys are at most 65535 bytes with at most 65535
/// ids. Thread-safe (one mutex).
class piece_cache {
public:
  /// Bytes of keys and ids after which a generation rotates even if it has fewer entries.
  static constexpr std::size_t max_generation_bytes = std::size_t{8} << 20;

  /// A cache of `capacity` entries per generation.
  explicit piece_cache(std::size_t capacity) : capacity_(capacity) {}

  /// Appends the ids cached for `piece` to `out` and returns true, or returns false.
  bool find(std::string_view piece, std::vector<int32_t>& out);

  /// Remembers that `piece` encodes to ids[0..count).
  void insert(std::string_view piece, const int32_t* ids, std::size_t count);

  /// Entries held in both generations.
  std::size_t size() const;

  /// Forgets everything.
  void clear();

private:
  struct slot {
    uint64_t hash = 0;
    uint32_t key = 0;      // offset of the key bytes in `keys`
    uint32_t ids = 0;      // offset of the ids in `ids`
    uint16_t key_size = 0; // 0: the slot is free (no piece is empty)
    uint16_t id_count = 0;
  };
  struct generation {
    std::vector<slot> slots; // a power of two, at least twice the capacity; empty until used
    std::string keys;
    std::vector<int32_t> ids;
    std::size_t count = 0;
    const slot* find(std::string_view piece, uint64_t hash) const;
    void insert(std::string_view piece, uint64_t hash, const int32_t* ids, std::size_t count,
                std::size_t capacity);
  };
  void insert_locked(std::string_view piece, uint64_t hash, const int32_t* ids, std::size_t count);

  std::size_t capacity_;
  mutable std::mutex mutex_;
  generation current_;
  generation previous_;
};

/// A validated byte-level BPE vocabulary and merge table.
class bpe_model {
public:
  bpe_model() = default;
  // Move-only: the byte index points into the strings the model owns.
  bpe_model(bpe_model&&) = default;
  bpe_model& operator=(bpe_model&&) = default;
  bpe_model(const bpe_model&) = delete;
  bpe_model& operator=(const bpe_model&) = delete;

  /// Largest token id accepted (2^24 - 1). Tables are indexed by id, so a stray huge id in a
  /// file is refused instead of allocating gigabytes; real vocabularies stay below 2^20.
  static constexpr int64_t max_token_id = (int64_t{1} << 24) - 1;
  /// Longest piece whose ids are cached; longer pieces are rare and rarely repeat.
  static constexpr std::size_t max_cached_piece = 256;
  /// Entries per cache generation.
  static constexpr std::size_t cache_capacity = 65536;

  /// Builds the model from tokenizer.json's "model" section: `vocab` as (byte-level token, id)
  /// pairs, `merges` as (left, right) byte-level pairs in rank order. `file` names the file in
  /// errors. Fails with errc::invalid_config naming "model.vocab" or "model.merges[i]" when a
  /// token is not written in the byte-level alphabet, an id is used twice, a byte has no token,
  /// or a merge names a token (or produces one) missing from the vocabulary.
  static caf::expected<bpe_model> create(const std::vector<std::pair<std::string_view, int64_t>>& vocab,
                                         const std::vector<std::pair<std::string_view, std::string_view>>& merges,
                                         bool ignore_merges, const std::string& file);

  /// Appends the ids of one pre-token piece (raw bytes, non-empty) to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  /// The id of the token whose raw bytes are `bytes`, if any.
  std::optional<int32_t> find(std::string_view bytes) const;

  /// The raw bytes of vocabulary token `id`, or nullptr if `id` is not in the vocabulary.
  const std::string* bytes_of(int32_t id) const;

  /// One more than the largest vocabulary id.
  int32_t id_limit() const { return static_cast<int32_t>(bytes_.size()); }

  /// Number of vocabulary entries (ids may have gaps).
  std::size_t size() const { return size_; }

  /// Number of merge rules.
  std::size_t merge_count() const { return merges_.size(); }

  /// Pieces held in the cache.
  std::size_t cached_pieces() const { return cache_->size(); }

  /// Empties the cache (for measurements of the uncached path).
  void clear_cache() const { cache_->clear(); }

private:
  struct merge_rule {
    int32_t rank;
    int32_t merged;
  };
  /// The merge rules by (left id, right id): open addressing with linear probing, twice as many
  /// slots as rules. The merge loop looks a pair up after every merge, so this is its hot spot
  /// (std::unordered_map's node chasing made it 2-3x slower).
  class merge_table {
  public:
    void build(const std::vector<std::pair<uint64_t, merge_rule>>& rules);
    const merge_rule* find(uint64_t key) const {
      for (uint64_t slot = hash(key);; slot = (slot + 1) & mask_) {
        if (keys_[slot] == key)
          return &rules_[slot];
        if (keys_[slot] == empty)
          return nullptr;
      }
    }
    std::size_t size() const { return size_; }

  private:
    static constexpr uint64_t empty = ~uint64_t{0}; // no pair of ids < 2^31 has this key
    uint64_t hash(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    // Empty: two free slots, which hash() with a shift of 63 addresses.
    std::vector<uint64_t> keys_{empty, empty};
    std::vector<merge_rule> rules_{merge_rule{}, merge_rule{}};
    uint64_t mask_ = 1;
    int shift_ = 63;
    std::size_t size_ = 0;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32)
           | static_cast<uint32_t>(right);
  }
  const merge_rule* rule(int32_t left, int32_t right) const {
    return merges_.find(pair_key(left, right));
  }
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> bytes_;         // raw bytes by id; empty where no token has the id
  std::vector<bool> present_;              // whether the id is in the vocabulary
  std::size_t size_ = 0;
  std::unordered_map<std::string_view, int32_t> by_bytes_; // keys point into bytes_
  merge_table merges_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;
  std::shared_ptr<piece_cache> cache_;
};

} // namespace kbrl::tok
