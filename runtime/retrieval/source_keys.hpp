#pragma once
// How two programs are recognised as the same: the keys behind duplicate removal in a corpus
// and behind the leakage guard (an example whose reference is the problem being solved is never
// shown to the model).
//
//   reference_hash  eval::normalized_source_hash: line endings and trailing whitespace do not
//                   count. The same value as problem::source_hash, so a problem loaded from a
//                   KernelBench file matches a corpus copy of that file.
//   reference_key   also blind to comments, docstrings, blank lines and spacing: a copy whose
//                   comments were edited is still the same problem.
//   duplicate_key   reference and kernel with whitespace normalised: two corpus rows with the
//                   same pair are one example.

#include "messages/data.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::retrieval {

/// `text` with CRLF/CR line ends as LF, trailing whitespace cut from each line, blank lines
/// dropped and no leading or trailing blank lines.
std::string normalized_whitespace(std::string_view text);

/// The hash problem::source_hash holds for this reference source (eval::normalized_source_hash).
std::string reference_hash(std::string_view python_source);

/// Hash of the Python source's tokens without comments and statement strings (docstrings),
/// separated by single spaces: equal for two copies of a program that differ only in comments,
/// docstrings, blank lines, spacing or line endings.
std::string reference_key(std::string_view python_source);

/// Hash of normalized_whitespace(reference) and normalized_whitespace(kernel).
std::string duplicate_key(std::string_view reference_source, std::string_view kernel_source);

/// The backend named `name` ("cuda", "Triton", ...; case-insensitive), or nullopt.
std::optional<kernel_backend> parse_backend(std::string_view name);

/// Every backend name parse_backend() accepts, in enum order.
const std::vector<std::string>& backend_names();

} // namespace kbrl::retrieval
