#pragma once
// SHA-256 of byte streams and files (OpenSSL), for the corpus hash and the index files' checks.

#include <caf/expected.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace kbrl::retrieval {

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

} // namespace kbrl::retrieval
