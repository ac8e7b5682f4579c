#pragma once
// The files of one directory as record writers see them (a run directory's traces and
// checkpoints): read, replace atomically, append, rename. directory_store() is the disk; tests
// give the writers an in-memory store that can be told to fail, so what happens on a full disk
// is tested without one.

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kbrl::io {

class file_store {
public:
  virtual ~file_store() = default;

  /// The whole file; std::nullopt when there is none. errc::io_failure naming the file when it
  /// exists but cannot be read.
  virtual caf::expected<std::optional<std::string>> read(const std::string& name) = 0;
  /// Replaces the file so that readers see the old content or the whole new one.
  virtual caf::expected<void> replace(const std::string& name, std::string_view text) = 0;
  /// Appends `text` (the file is created when missing) and flushes it to the system.
  virtual caf::expected<void> append(const std::string& name, std::string_view text) = 0;
  /// The file's size in bytes (0 when there is none).
  virtual uint64_t size(const std::string& name) = 0;
  /// Renames `from` over `to`.
  virtual caf::expected<void> rename(const std::string& from, const std::string& to) = 0;
  /// The path a person is shown for `name`.
  virtual std::string path_of(const std::string& name) const = 0;
};

/// The files of directory `dir` (which must exist for writes to succeed).
std::shared_ptr<file_store> directory_store(std::string dir);

} // namespace kbrl::io
