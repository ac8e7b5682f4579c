#pragma once
// What a TLS file named in a cluster manifest holds, checked with OpenSSL when the manifest is
// read: a node whose certificate, key or CA file is not what it should be refuses to start,
// naming the file, instead of logging "listening (TLS)" with nothing able to connect.

#include <optional>
#include <string>

namespace kbrl::config {

enum class pem_kind { certificate, private_key };

/// Why the file at `path` is not a PEM file of `kind` (certificates: at least one X.509
/// certificate; keys: a private key); nullopt when it is.
std::optional<std::string> pem_problem(const std::string& path, pem_kind kind);

/// Why `key_path` is not the private key of the certificate at `certificate_path`; nullopt when
/// it is (or when either file is unreadable: pem_problem reports that).
std::optional<std::string> key_mismatch(const std::string& certificate_path,
                                        const std::string& key_path);

} // namespace kbrl::config
