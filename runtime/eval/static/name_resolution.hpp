#pragma once
// Code text with names resolved, for the rules that read Python code: every use of an import
// alias is replaced by the path it stands for (T.cuda -> torch.cuda), and getattr/setattr/
// delattr with a literal name become attribute access (getattr(torch, "cuda") -> torch.cuda,
// setattr(time, "time", f) -> time.time = f). A name assembled from pieces to hide it is
// resolved too and reported (name_obfuscation); a name computed at run time cannot be resolved
// and is reported when it is built the way only hiding needs (chr, join, slicing, base64, ...).

#include "runtime/eval/static/import_table.hpp"
#include "runtime/eval/static_checks.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::eval::static_impl {

/// A trick whose only purpose is to hide a name.
struct obfuscation {
  size_t offset = 0;   ///< source offset
  std::string message; ///< for the finding
};

struct resolved_code {
  std::string text;               ///< the code text with names resolved
  std::vector<uint32_t> offsets;  ///< source offset of each byte of `text`
  std::vector<obfuscation> found; ///< name-hiding tricks met on the way
};

/// Resolves the names of lexed code (lexed.code) through the import table.
resolved_code resolve_names(const lexed_source& lexed, const import_table& imports);

} // namespace kbrl::eval::static_impl
