#pragma once
// The seccomp program every evaluation worker runs under: connect(2) fails with ECONNREFUSED and
// socket(AF_UNIX, SOCK_DGRAM) with EACCES.
//
// The worker's network namespace (bwrap --unshare-net) already cuts TCP/UDP and the host's
// abstract unix sockets, but a unix socket with a path (docker.sock, the D-Bus and systemd
// sockets, anything under /tmp) is reached through the file system, which the sandbox shows
// read-only - and connecting to a socket needs no write access to its mount. The worker itself
// only uses socketpair(2) (its zygote and candidate channels), which needs no connect.
//
// Why not refuse socket(AF_UNIX) itself: CUDA's initialisation creates a unix stream socket, and
// when that fails cudaGetDeviceCount() reports error 304 and torch sees no GPU (measured on H100
// and H200: every GPU evaluation crashed). With this program CUDA, torch.compile, Triton and
// load_inline work, and a host unix socket is unreachable by stream (connect refused) and by
// datagram (no such socket can be made).
//
// Compiled once in the parent (libseccomp allocates), installed in the forked child before exec
// with two plain system calls (no allocation between fork and exec).

#include <caf/expected.hpp>

#include <linux/filter.h>
#include <vector>

namespace kbrl::eval {

/// The compiled filter: allow everything except connect() and unix datagram sockets.
caf::expected<std::vector<sock_filter>> unix_socket_filter();

/// In the child: sets no_new_privs and installs the program. Async-signal-safe (two syscalls);
/// returns false when the kernel refuses.
bool install_socket_filter(const std::vector<sock_filter>& program);

} // namespace kbrl::eval
