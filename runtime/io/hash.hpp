#pragma once
// The project's hashes, in one place: SHA-256 of byte streams and files (OpenSSL), for content
// checks (retrieval corpora and index files, hub downloads, warm-start inputs), and FNV-1a 64,
// for cheap stable identities (source hashes, feature hashes, problem order).

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kbrl::io {

/// Feeds bytes in pieces; hex() gives the digest of everything fed so far.
class sha256_stream {
public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;

  void update(std::string_view bytes);

  /// The digest as 64 lower-case hex digits. Does not end the stream.
  std::string hex() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The SHA-256 of `bytes` as hex.
std::string sha256_hex(std::string_view bytes);

/// The SHA-256 of the file at `path` as hex; errc::io_failure naming the file if it cannot be
/// read.
caf::expected<std::string> sha256_file(const std::string& path);

/// FNV-1a 64 of `bytes`, from `basis` (FNV's offset basis unless given): stable across runs,
/// machines and compilers. Not for anything an adversary chooses to collide.
inline uint64_t fnv1a_64(std::string_view bytes, uint64_t basis = 1469598103934665603ull) {
  uint64_t h = basis;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

} // namespace kbrl::io
