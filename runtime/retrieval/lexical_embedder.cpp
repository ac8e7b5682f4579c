#include "runtime/retrieval/lexical_embedder.hpp"

#include "messages/errors.hpp"
#include "runtime/retrieval/code_features.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>
#include <unordered_map>

namespace kbrl::retrieval {

namespace {

constexpr char idf_magic[8] = {'K', 'B', 'R', 'L', 'I', 'D', 'F', '1'};
constexpr size_t idf_header_bytes = 8 + 8 + 4 + 4 + 8;
constexpr size_t idf_record_bytes = 8 + 4;

template <class T>
void put(std::string& out, T x) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out += static_cast<char>((static_cast<uint64_t>(x) >> (8 * i)) & 0xff);
}

template <class T>
T get(const std::string& in, size_t at) {
  uint64_t x = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    x |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return static_cast<T>(x);
}

/// The finaliser of MurmurHash3: every output bit depends on every input bit.
uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

int thread_count(int requested, size_t work) {
  int n = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(1, n);
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(n), std::max<size_t>(work, 1)));
}

} // namespace

idf_table idf_table::count(const std::vector<std::string>& documents, int threads) {
  const int n = thread_count(threads, documents.size() / 64);
  std::vector<std::unordered_map<uint64_t, uint32_t>> partial(static_cast<size_t>(n));
  std::vector<std::thread> workers;
  for (int w = 0; w < n; ++w)
    workers.emplace_back([&, w] {
      auto& counts = partial[static_cast<size_t>(w)];
      for (size_t d = static_cast<size_t>(w); d < documents.size(); d += static_cast<size_t>(n))
        for (const auto& f : extract_code_features(documents[d]))
          ++counts[feature_hash(f.text)];
    });
  for (auto& t : workers)
    t.join();
  auto& total = partial[0];
  for (size_t w = 1; w < partial.size(); ++w)
    for (auto& [h, c] : partial[w])
      total[h] += c;
  idf_table table;
  table.documents_ = documents.size();
  for (auto& [h, c] : total)
    if (c >= 2)
      table.frequencies_.emplace_back(h, c);
  std::sort(table.frequencies_.begin(), table.frequencies_.end());
  return table;
}

float idf_table::idf(uint64_t feature_hash) const {
  uint32_t df = 1;
  auto it = std::lower_bound(frequencies_.begin(), frequencies_.end(),
                             std::make_pair(feature_hash, uint32_t{0}));
  if (it != frequencies_.end() && it->first == feature_hash)
    df = it->second;
  return static_cast<float>(std::log((documents_ + 1.0) / (df + 1.0)) + 1.0);
}

caf::expected<void> idf_table::save(const std::string& path, int32_t dimension) const {
  std::string bytes(idf_magic, sizeof idf_magic);
  put<uint64_t>(bytes, documents_);
  put<uint32_t>(bytes, static_cast<uint32_t>(dimension));
  put<uint32_t>(bytes, 0);
  put<uint64_t>(bytes, frequencies_.size());
  bytes.reserve(bytes.size() + frequencies_.size() * idf_record_bytes);
  for (auto& [h, df] : frequencies_) {
    put<uint64_t>(bytes, h);
    put<uint32_t>(bytes, df);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    return make_error(errc::io_failure, path + ": cannot write the IDF table: "
                                          + std::strerror(errno));
  return {};
}

caf::expected<std::pair<idf_table, int32_t>> idf_table::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, path + ": cannot open the IDF table: "
                                          + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& what) {
    return make_error(errc::invalid_argument, path + ": not a kbrl IDF table: " + what);
  };
  if (bytes.size() < idf_header_bytes || std::memcmp(bytes.data(), idf_magic, 8) != 0)
    return bad("wrong magic or too short (" + std::to_string(bytes.size()) + " bytes)");
  idf_table t;
  t.documents_ = get<uint64_t>(bytes, 8);
  const auto dimension = get<uint32_t>(bytes, 16);
  const auto count = get<uint64_t>(bytes, 24);
  if (count > (bytes.size() - idf_header_bytes) / idf_record_bytes
      || bytes.size() != idf_header_bytes + count * idf_record_bytes)
    return bad("the header says " + std::to_string(count) + " records, the file holds "
               + std::to_string(bytes.size()) + " bytes");
  if (dimension < 8 || dimension > (1u << 20))
    return bad("dimension " + std::to_string(dimension) + " is outside 8..1048576");
  t.frequencies_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = idf_header_bytes + i * idf_record_bytes;
    t.frequencies_.emplace_back(get<uint64_t>(bytes, at), get<uint32_t>(bytes, at + 8));
    if (i > 0 && t.frequencies_[i - 1].first >= t.frequencies_[i].first)
      return bad("records are not sorted by hash at record " + std::to_string(i));
  }
  return std::make_pair(std::move(t), static_cast<int32_t>(dimension));
}

lexical_embedder::lexical_embedder(idf_table idf, int32_t dimension)
    : idf_(std::move(idf)), dimension_(std::max(dimension, 8)) {}

embedder_identity lexical_embedder::identity() const {
  return {"builtin", model_name, "", dimension_};
}

void lexical_embedder::embed_one(const std::string& text, float* out) const {
  std::fill(out, out + dimension_, 0.0f);
  for (const auto& f : extract_code_features(text)) {
    const uint64_t h = feature_hash(f.text);
    const float w = f.kind_weight * (1.0f + std::log(static_cast<float>(f.count))) * idf_.idf(h);
    // FNV's low bits depend on the low bits of the input only: mix before taking the bucket
    // (low bits) and the sign (a high bit).
    const uint64_t m = mix64(h);
    const size_t bucket = static_cast<size_t>(m % static_cast<uint64_t>(dimension_));
    out[bucket] += ((m >> 63) & 1) != 0 ? -w : w;
  }
  double sum = 0;
  for (int32_t j = 0; j < dimension_; ++j)
    sum += static_cast<double>(out[j]) * out[j];
  if (sum > 0) {
    const float scale = static_cast<float>(1.0 / std::sqrt(sum));
    for (int32_t j = 0; j < dimension_; ++j)
      out[j] *= scale;
  }
}

caf::expected<std::vector<float>> lexical_embedder::embed(const std::vector<std::string>& texts) {
  std::vector<float> rows(texts.size() * static_cast<size_t>(dimension_));
  for (size_t i = 0; i < texts.size(); ++i)
    embed_one(texts[i], rows.data() + i * static_cast<size_t>(dimension_));
  return rows;
}

} // namespace kbrl::retrieval
