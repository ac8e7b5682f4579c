#include "runtime/hub/hub_cache.hpp"

#include "messages/errors.hpp"
#include "runtime/hub/hub_options.hpp"
#include "runtime/io/file_io.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kbrl::hub {

namespace fs = std::filesystem;

namespace {

/// "Org/Name" -> "models--Org--Name", as huggingface_hub names repository folders.
std::string folder_name(const std::string& repo_id) {
  std::string out = "models--";
  for (char c : repo_id) {
    if (c == '/')
      out += "--";
    else
      out += c;
  }
  return out;
}

} // namespace

repo_cache::repo_cache(fs::path cache_dir, const std::string& repo_id)
  : cache_dir_(std::move(cache_dir)), folder_(folder_name(repo_id)), root_(cache_dir_ / folder_) {}

fs::path repo_cache::blob(const std::string& etag) const { return root_ / "blobs" / etag; }

fs::path repo_cache::incomplete_blob(const std::string& etag) const {
  return root_ / "blobs" / (etag + ".incomplete");
}

fs::path repo_cache::snapshot_dir(const std::string& commit) const {
  return root_ / "snapshots" / commit;
}

fs::path repo_cache::snapshot_file(const std::string& commit, const std::string& file) const {
  return snapshot_dir(commit) / file;
}

fs::path repo_cache::lock_file(const std::string& etag) const {
  return cache_dir_ / ".locks" / folder_ / (etag + ".lock");
}

std::optional<std::string> repo_cache::cached_commit(const std::string& revision) const {
  if (is_commit_hash(revision))
    return revision;
  auto text = io::read_text_file(root_ / "refs" / revision);
  if (!text)
    return std::nullopt;
  std::string commit = *text;
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
    commit.pop_back();
  if (!is_commit_hash(commit))
    return std::nullopt; // a damaged ref is as good as none
  return commit;
}

caf::expected<void> repo_cache::write_ref(const std::string& revision,
                                          const std::string& commit) const {
  if (revision == commit)
    return caf::unit;
  const auto ref = root_ / "refs" / revision; // revisions like refs/pr/1 nest, as in Python
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (ec)
    return make_error(errc::io_failure,
                      "cannot create " + ref.parent_path().string() + ": " + ec.message());
  return io::write_file_atomically(ref, {commit});
}

caf::expected<void> repo_cache::link_snapshot(const std::string& commit, const std::string& file,
                                              const std::string& etag) const {
  const auto link = snapshot_file(commit, file);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec)
    return make_error(errc::io_failure,
                      "cannot create " + link.parent_path().string() + ": " + ec.message());
  // Relative and lexical, as huggingface_hub writes it: "../../blobs/<etag>" from
  // snapshots/<commit>/, one more "../" per folder inside the repository.
  fs::path target;
  for (std::size_t i = 0, n = 2 + std::distance(fs::path(file).parent_path().begin(),
                                                fs::path(file).parent_path().end());
       i < n; ++i)
    target /= "..";
  target = target / "blobs" / etag;
  // A new link under a temporary name, renamed over the old one: readers never see none.
  static std::atomic<unsigned> counter{0};
  auto tmp = link;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (!ec)
    fs::rename(tmp, link, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return make_error(errc::io_failure, "cannot link " + link.string() + " to "
                                          + target.string() + ": " + ec.message());
  }
  return caf::unit;
}

caf::expected<file_lock> file_lock::acquire(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    return make_error(errc::io_failure,
                      "cannot create " + path.parent_path().string() + ": " + ec.message());
  file_lock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd_ < 0)
    return make_error(errc::io_failure,
                      "cannot open lock file " + path.string() + ": " + std::strerror(errno));
  int rc;
  do
    rc = ::flock(lock.fd_, LOCK_EX);
  while (rc != 0 && errno == EINTR);
  if (rc != 0)
    return make_error(errc::io_failure,
                      "cannot lock " + path.string() + ": " + std::strerror(errno));
  return lock;
}

file_lock::file_lock(file_lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

file_lock& file_lock::operator=(file_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

file_lock::~file_lock() {
  if (fd_ >= 0)
    ::close(fd_); // closing releases the flock
}

} // namespace kbrl::hub
