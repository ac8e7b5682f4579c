#pragma once
// A finished build as files that travel between nodes: a builder node answers a build with the
// candidate's libraries and their records (kbrl-library.json, written by the worker's
// tools/kbrl_eval/extension_builds.py after each build), and the evaluator node puts them into
// its own build folder for that source. The worker there finds the record with the key its own
// build would have and loads the library instead of building it; a record whose key differs
// (other flags, another torch or CUDA, other architectures) is ignored and the extension is
// built there as usual, so a wrong or foreign file costs time, never a wrong binary.
//
// Files from another node are untrusted: only records and the libraries they name, at relative
// paths without "..", within a size bound.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::eval {

/// The record's file name, as extension_builds.py writes it.
inline constexpr const char* library_record_name = "kbrl-library.json";

/// Most bytes one build's files may have, in both directions.
inline constexpr uint64_t max_build_files_bytes = uint64_t{1} << 30;

/// The build folder of a candidate's source under `extensions_dir` (as eval_engine::build_dir_of).
std::string build_dir_for(const std::string& extensions_dir, const std::string& candidate_source);

/// Every record under `build_dir` and the library it names, paths relative to `build_dir`
/// (records first in each folder is not promised; install_build_files orders them). Empty when
/// nothing was built there. Fails with errc::io_failure on an unreadable file or more than
/// max_build_files_bytes.
caf::expected<std::vector<build_file>> collect_build_files(const std::string& build_dir);

/// Writes `files` under `build_dir` (libraries before records, each atomically), creating
/// folders; returns how many were written. Fails with errc::invalid_argument for a path that is
/// absolute, climbs out with "..", or is neither a record nor a library (".so"), or for too
/// many bytes; with errc::io_failure when a write fails. Nothing is written when a path is
/// refused.
caf::expected<size_t> install_build_files(const std::string& build_dir,
                                          const std::vector<build_file>& files);

} // namespace kbrl::eval
