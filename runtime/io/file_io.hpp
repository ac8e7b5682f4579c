#pragma once
// Whole-file reads and atomic writes. An atomic write lets readers see either the
// old file or the whole new one: the bytes go to a temporary file beside the target, are synced
// to disk, and the temporary is renamed over the target. Used for checkpoints, adapters, configs
// and hub cache entries that another process may read at any time.

#include <caf/expected.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::io {

/// Writes the concatenation of `pieces` to `path` atomically (see above); the parent directory
/// must exist. On failure the temporary file is removed and `path` is unchanged. Fails with
/// errc::io_failure naming the file and the system's reason.
caf::expected<void> write_file_atomically(const std::filesystem::path& path,
                                          const std::vector<std::string_view>& pieces);

/// The whole content of the file at `path`. Fails with errc::io_failure naming the file.
caf::expected<std::string> read_text_file(const std::filesystem::path& path);

} // namespace kbrl::io
