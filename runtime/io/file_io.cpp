#include "runtime/io/file_io.hpp"

#include "messages/errors.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace kbrl::io {

namespace fs = std::filesystem;

namespace {

caf::error write_error(const fs::path& path, const std::string& what, int err) {
  return make_error(errc::io_failure, "cannot write " + path.string() + ": " + what + ": "
                                        + std::strerror(err));
}

/// Writes all of `bytes` to `fd`, retrying short writes; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

} // namespace

caf::expected<void> write_file_atomically(const fs::path& path,
                                          const std::vector<std::string_view>& pieces) {
  // pid and a counter: two threads or processes writing the same target never share a temporary.
  static std::atomic<unsigned> counter{0};
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return write_error(path, "cannot create " + tmp.filename().string(), errno);
  for (auto piece : pieces) {
    if (!write_all(fd, piece)) {
      auto err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return write_error(path, "write failed", err);
    }
  }
  int synced = ::fsync(fd);
  int sync_err = errno;
  if (::close(fd) != 0 && synced == 0) {
    synced = -1;
    sync_err = errno;
  }
  if (synced != 0) {
    auto err = sync_err;
    ::unlink(tmp.c_str());
    return write_error(path, "sync failed", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = errno;
    ::unlink(tmp.c_str());
    return write_error(path, "rename failed", err);
  }
  // Sync the directory too, so the rename itself survives a crash.
  auto dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return caf::unit;
}

caf::expected<std::string> read_text_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return make_error(errc::io_failure, "cannot read " + path.string() + ": "
                                          + (fs::exists(path, ec) ? "not a regular file"
                                                                  : "no such file"));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    return make_error(errc::io_failure, "cannot read " + path.string());
  return text.str();
}

} // namespace kbrl::io
