#include "runtime/io/hash.hpp"

#include "messages/errors.hpp"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace kbrl::io {

struct sha256_stream::impl {
  EVP_MD_CTX* ctx = nullptr;
};

sha256_stream::sha256_stream() : impl_(std::make_unique<impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

sha256_stream::~sha256_stream() {
  EVP_MD_CTX_free(impl_->ctx);
}

void sha256_stream::update(std::string_view bytes) {
  EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
}

std::string sha256_stream::hex() const {
  // Finalise a copy, so the stream can go on.
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, impl_->ctx);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(copy, digest, &n);
  EVP_MD_CTX_free(copy);
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  sha256_stream s;
  s.update(bytes);
  return s.hex();
}

caf::expected<std::string> sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, path + ": cannot open: " + std::strerror(errno));
  sha256_stream s;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    s.update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad())
    return make_error(errc::io_failure, path + ": read failed");
  return s.hex();
}

} // namespace kbrl::io
