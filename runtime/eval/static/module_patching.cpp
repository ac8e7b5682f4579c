// torch_monkey_patch through imported names other than the usual spellings.

#include "runtime/eval/static/checker.hpp"

#include <cstring>
#include <set>

namespace kbrl::eval::static_impl {

/// Assignments to attributes of imported names (`import torch as T; T.allclose = f`,
/// `from torch import cuda; cuda.Event.record = f`) and setattr on them. The usual spellings
/// (torch., F., nn., ...) are table patterns; paths other rules own (torch.backends, timing,
/// os.environ) are left to them.
void checker::check_module_patching() {
  size_t r = rule("torch_monkey_patch");
  if (!on(r))
    return;
  const auto& h = table().helpers;
  std::string_view code = lexed_.code;
  const auto& imported = imports_.imported;
  static const std::set<std::string, std::less<>> table_names{
    "torch", "F", "nn", "np", "numpy", "triton", "tl", "Tensor", "math", "time", "self",
    // modules whose every use is refused by their own rule
    "builtins", "gc", "inspect", "ctypes", "cffi", "socket", "subprocess", "signal", "threading",
    "multiprocessing", "asyncio", "importlib", "pty", "shutil", "pickle", "traceback"};
  auto owned_elsewhere = [](const std::string& path) {
    static const char* prefixes[] = {"torch.backends", "os.environ"};
    for (const char* p : prefixes)
      if (path.compare(0, std::strlen(p), p) == 0)
        return true;
    static const char* parts[] = {"cuda.Event", "cuda.synchronize", "cuda.Stream",
                                  "cuda.current_stream", "cuda.default_stream", "backends."};
    for (const char* p : parts)
      if (path.find(p) != std::string::npos)
        return true;
    return false;
  };
  for (size_t from = 0; m_.find(h.attr_assign.get(), code, from);
       from = std::max(m_.end(), from + 1)) {
    if (!m_.matched(1))
      continue;
    auto base = m_.group(code, 1);
    if (imported.count(base) == 0 || table_names.count(base) > 0)
      continue;
    std::string path{base};
    for (char c : m_.group(code, 2))
      if (c != ' ' && c != '\t' && !is_newline(c))
        path.push_back(c);
    if (!owned_elsewhere(path))
      add(r, m_.begin(1), "monkey-patches " + path + " (an attribute of the imported "
                            + std::string{base} + ")");
  }
  for (size_t from = 0; m_.find(h.setattr_call.get(), code, from); from = m_.end()) {
    auto base = m_.group(code, 1);
    if (imported.count(base) > 0 && table_names.count(base) == 0 && base != "os")
      add(r, m_.begin(), "monkey-patches the imported " + std::string{base} + " through setattr");
  }
}

} // namespace kbrl::eval::static_impl
