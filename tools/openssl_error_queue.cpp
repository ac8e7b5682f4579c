// Works around a defect of CAF 0.17.6's TLS transport (libcaf_openssl, session.cpp): it calls
// SSL_get_error() after SSL_read/SSL_write/SSL_accept/SSL_connect without first emptying the
// thread's OpenSSL error queue, which OpenSSL requires ("the current thread's error queue must be
// empty before the TLS/SSL I/O operation is attempted, or SSL_get_error() will not work
// reliably"). Every connection of a node shares one multiplexer thread, so an error left behind by
// one peer - a kbrl-shell that exits, a refused node - made the next read of an unrelated,
// healthy connection fail, and CAF dropped it (seen as remote_link_unreachable between nodes).
//
// These definitions interpose the four calls for the whole process (the executable's symbols take
// precedence over libssl's for libcaf_openssl), clear the queue, and forward to libssl. This file
// is compiled into each executable directly (see CMakeLists.txt): a static-library member would
// never be pulled in, since nothing in kbrl references these symbols itself.

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

template <class Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto real = next_symbol<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto real = next_symbol<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto real = next_symbol<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static auto real = next_symbol<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

} // extern "C"
