#include "runtime/io/tool_scripts.hpp"

#include <filesystem>

namespace kbrl::io {

std::string tool_script(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (auto dir : {exe.parent_path().parent_path() / "tools",
                     exe.parent_path().parent_path() / "share/kbrl/tools"})
      if (fs::exists(dir / file, ec))
        return (dir / file).string();
  return std::string(KBRL_SOURCE_DIR) + "/tools/" + file;
}

} // namespace kbrl::io
