#pragma once
// KernelBench-style problems from files: a reference `class Model(nn.Module)`, `get_inputs()`
// and `get_init_inputs()` in one Python file, named "<number>_<Name>.py".
//
// Where problems are found, for a LEVEL/ID spec such as "1/19":
//   $KERNELBENCH_ROOT/KernelBench/level1/19_*.py   (a KernelBench checkout)
//   $KERNELBENCH_ROOT/level1/19_*.py               (a folder laid out like one level per folder)
// and any extra roots the caller passes first (e.g. --problems-root).

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::eval {

/// Reads one problem file. `level` 0 means "unknown". Fails with errc::invalid_argument naming
/// the file when it cannot be read or lacks Model / get_inputs / get_init_inputs.
caf::expected<problem> load_problem_file(const std::string& path, int level = 0);

/// Finds a problem by path or by "LEVEL/ID" in `roots` and then $KERNELBENCH_ROOT. The error
/// lists where it looked.
caf::expected<problem> find_problem(const std::string& spec,
                                    const std::vector<std::string>& roots = {});

/// Every problem of one level under a root, ordered by number.
caf::expected<std::vector<problem>> load_level(const std::string& root, int level);

/// The hash used to recognise the same problem source again (leakage guard, caches): line
/// endings and trailing whitespace do not count.
std::string normalized_source_hash(const std::string& source);

} // namespace kbrl::eval
