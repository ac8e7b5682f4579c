#pragma once
// Shared helpers for the test suites: a temporary directory, reading files, text searches and the
// text of a failed expected.

#include "messages/errors.hpp"

#include <caf/expected.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace kbrl::test {

/// A fresh directory under the system's temp directory, removed with everything in it when the
/// test ends.
struct temp_dir {
  std::filesystem::path path;

  temp_dir() {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "kbrl-test-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
    // Searchable by others: evaluation workers started by root run as nobody and need to reach
    // their scratch folders inside it.
    std::filesystem::permissions(path, std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }

  /// Writes `text` to `name` (relative to the directory, parents created); returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
};

/// Whether `part` occurs in `text`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Whether `text` starts with `prefix`.
inline bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

/// The lines of `text`, without their line ends.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

/// The whole content of the file at `path`, or "" when it cannot be read (a log that a process
/// never wrote).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The whole content of the file at `path`, byte for byte; fails the test when the file cannot
/// be opened.
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Why `x` failed, for a check's message ("" if it holds a value). Boost.Test builds messages
/// even when the check passes, so this must not touch error() of a value.
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string{} : describe(x.error());
}

} // namespace kbrl::test
