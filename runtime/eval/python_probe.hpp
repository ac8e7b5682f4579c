#pragma once
// Finding a Python that can import torch: Debian's is /usr/bin/python3, while the GPU machines
// (and users' venvs) put theirs first on PATH, and `python3` on PATH may lack torch entirely.

#include <string>

namespace kbrl::eval {

/// The first of $KBRL_PYTHON, `python3` on PATH and /usr/bin/python3 that imports torch; probed
/// once per process. Empty if none does.
std::string find_python_with_torch();

/// `setting` itself, or find_python_with_torch() when it is "auto" (falling back to
/// /usr/bin/python3 so the worker's own error explains what is missing).
std::string resolve_python(const std::string& setting);

} // namespace kbrl::eval
