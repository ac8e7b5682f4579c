#include "runtime/config/pem_files.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

namespace kbrl::config {

namespace {

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

std::string openssl_reason() {
  auto code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0)
    return "no PEM block found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

std::unique_ptr<X509, void (*)(X509*)> first_certificate(const std::string& path) {
  file_ptr f{std::fopen(path.c_str(), "rb")};
  X509* cert = f ? PEM_read_X509(f.get(), nullptr, nullptr, nullptr) : nullptr;
  return {cert, X509_free};
}

std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> private_key(const std::string& path) {
  file_ptr f{std::fopen(path.c_str(), "rb")};
  EVP_PKEY* key = f ? PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr) : nullptr;
  return {key, EVP_PKEY_free};
}

} // namespace

std::optional<std::string> pem_problem(const std::string& path, pem_kind kind) {
  ERR_clear_error();
  if (kind == pem_kind::certificate) {
    if (!first_certificate(path))
      return path + ": not a PEM certificate (" + openssl_reason() + ")";
  } else if (!private_key(path)) {
    return path + ": not a PEM private key, or one protected by a passphrase (" + openssl_reason()
           + ")";
  }
  return std::nullopt;
}

std::optional<std::string> key_mismatch(const std::string& certificate_path,
                                        const std::string& key_path) {
  auto cert = first_certificate(certificate_path);
  auto key = private_key(key_path);
  ERR_clear_error();
  if (!cert || !key)
    return std::nullopt;
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return key_path + " is not the private key of the certificate " + certificate_path;
  }
  return std::nullopt;
}

} // namespace kbrl::config
