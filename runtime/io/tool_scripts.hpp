#pragma once
// Where the Python helpers kbrl starts live (tools/kbrl_eval_worker.py,
// tools/kbrl_chat_template.py): an installed or build-tree layout beside the executable first,
// then the source tree this binary was built from.

#include <string>

namespace kbrl::io {

/// The path of tools/<file>.
std::string tool_script(const std::string& file);

} // namespace kbrl::io
