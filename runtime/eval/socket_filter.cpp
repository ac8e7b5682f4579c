#include "runtime/eval/socket_filter.hpp"

#include "messages/errors.hpp"

#include <seccomp.h>

#include <cerrno>
#include <cstring>
#include <linux/seccomp.h>
#include <memory>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kbrl::eval {

caf::expected<std::vector<sock_filter>> unix_socket_filter() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx{seccomp_init(SCMP_ACT_ALLOW),
                                                       seccomp_release};
  if (!ctx)
    return make_error(errc::io_failure, "libseccomp: cannot create a filter");
  // no_new_privs is set by install_socket_filter itself, in the child
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
  // Unix datagram sockets reach a path with every send: refused at creation.
  if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 2,
                                SCMP_A0(SCMP_CMP_EQ, AF_UNIX),
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM));
      rc != 0)
    return make_error(errc::io_failure, std::string("libseccomp: cannot add the unix-datagram rule: ")
                                          + std::strerror(-rc));
  // Stream sockets may be made (CUDA's initialisation makes one and fails without it) but
  // connect to nothing: not a host unix socket, and under isolation none not the network either.
  if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ECONNREFUSED), SCMP_SYS(connect), 0);
      rc != 0)
    return make_error(errc::io_failure,
                      std::string("libseccomp: cannot add the connect rule: ") + std::strerror(-rc));
  int fd = ::memfd_create("kbrl-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return make_error(errc::io_failure, std::string("memfd_create: ") + std::strerror(errno));
  std::vector<sock_filter> program;
  if (int rc = seccomp_export_bpf(ctx.get(), fd); rc != 0) {
    ::close(fd);
    return make_error(errc::io_failure,
                      std::string("libseccomp: cannot export the filter: ") + std::strerror(-rc));
  }
  auto bytes = ::lseek(fd, 0, SEEK_END);
  if (bytes <= 0 || bytes % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    ::close(fd);
    return make_error(errc::io_failure, "libseccomp exported a filter of " + std::to_string(bytes)
                                          + " bytes");
  }
  program.resize(static_cast<size_t>(bytes) / sizeof(sock_filter));
  auto got = ::pread(fd, program.data(), static_cast<size_t>(bytes), 0);
  ::close(fd);
  if (got != bytes)
    return make_error(errc::io_failure, "cannot read back the exported seccomp filter");
  return program;
}

bool install_socket_filter(const std::vector<sock_filter>& program) {
  if (program.empty())
    return false;
  sock_fprog prog{static_cast<unsigned short>(program.size()),
                  const_cast<sock_filter*>(program.data())};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return false;
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

} // namespace kbrl::eval
