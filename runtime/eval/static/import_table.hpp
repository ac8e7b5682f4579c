#pragma once
// The names a Python program binds by import or by plain aliasing, and what each stands for:
// `import torch as T` makes T stand for torch, `from torch import cuda as c` c for torch.cuda,
// `import torch.cuda.Event as E` E for torch.cuda.Event, `Ev = torch.cuda.Event` (a module-level
// assignment of a dotted name) Ev for torch.cuda.Event. The rules read code with these names
// resolved (name_resolution.hpp), so a hack spelled through an alias is the same hack.

#include "runtime/eval/static/regex.hpp"

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl::eval::static_impl {

struct import_table {
  /// Name -> the dotted path it stands for, for names bound exactly once (an import or an
  /// alias assignment); names bound again elsewhere are ambiguous and left out. Conventional
  /// short names stay short: triton.language is "tl", tilelang.language is "T".
  std::map<std::string, std::string, std::less<>> aliases;
  /// Every name an import statement binds (also those left out of `aliases`).
  std::set<std::string, std::less<>> imported;
  /// [begin, end) of every import statement in the code text: not rewritten.
  std::vector<std::pair<size_t, size_t>> statements;
};

/// Reads the imports and aliases of code text (strings and comments blanked).
import_table read_imports(std::string_view code, matcher& m);

/// The conventional spelling of a dotted path ("triton.language.x" -> "tl.x").
std::string conventional_path(std::string path);

} // namespace kbrl::eval::static_impl
