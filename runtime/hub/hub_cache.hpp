#pragma once
// The local cache of hub downloads, laid out as huggingface_hub lays it out, so that files a
// Python user already downloaded are reused and the other way round:
//   <cache>/models--Org--Name/
//     blobs/<etag>                    file contents, named by their id (SHA-256 of LFS files,
//                                     git blob SHA-1 of the others)
//     blobs/<etag>.incomplete         a download in progress, resumed from its size
//     snapshots/<commit>/<file>       relative symlink to ../../blobs/<etag>
//     refs/<revision>                 the commit a branch or tag pointed to when last resolved
//   <cache>/.locks/models--Org--Name/<etag>.lock
//                                     held (flock) while a blob is downloaded, by kbrl and by
//                                     huggingface_hub alike, so two processes never write it
//                                     at once

#include <caf/expected.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace kbrl::hub {

/// The cache folder of one model repository.
class repo_cache {
public:
  /// The folder of `repo_id` ("Org/Name") inside cache root `cache_dir`.
  repo_cache(std::filesystem::path cache_dir, const std::string& repo_id);

  /// <cache>/models--Org--Name
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path blob(const std::string& etag) const;
  std::filesystem::path incomplete_blob(const std::string& etag) const;
  std::filesystem::path snapshot_dir(const std::string& commit) const;
  std::filesystem::path snapshot_file(const std::string& commit, const std::string& file) const;
  std::filesystem::path lock_file(const std::string& etag) const;

  /// The commit `revision` resolves to from the cache alone: the revision itself if it is a
  /// commit hash, else the content of refs/<revision>; nullopt if unknown.
  std::optional<std::string> cached_commit(const std::string& revision) const;

  /// Records that `revision` points to `commit` (refs/<revision>, written atomically). Nothing
  /// to do when the revision is the commit itself.
  caf::expected<void> write_ref(const std::string& revision, const std::string& commit) const;

  /// Makes snapshots/<commit>/<file> a relative symlink to blobs/<etag>, replacing whatever was
  /// there. Fails with errc::io_failure naming the link.
  caf::expected<void> link_snapshot(const std::string& commit, const std::string& file,
                                    const std::string& etag) const;

private:
  std::filesystem::path cache_dir_;
  std::string folder_; ///< models--Org--Name
  std::filesystem::path root_;
};

/// An exclusive advisory lock (flock) on a file, created if missing, held until destruction.
/// Blocks while another process or thread holds it.
class file_lock {
public:
  /// Takes the lock on `path` (parents created). Fails with errc::io_failure naming the file.
  static caf::expected<file_lock> acquire(const std::filesystem::path& path);
  file_lock(file_lock&& other) noexcept;
  file_lock& operator=(file_lock&& other) noexcept;
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;
  ~file_lock();

private:
  file_lock() = default;
  int fd_ = -1;
};

} // namespace kbrl::hub
