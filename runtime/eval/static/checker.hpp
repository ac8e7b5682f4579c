#pragma once
// One run of the static checks over one candidate: the pattern table over the resolved code
// and the kernel source, then the structural checks, each of which lives in a file of its own
// (code_bypass.cpp, kernel_reachability.cpp, output_state.cpp, module_patching.cpp,
// name_obfuscation.cpp, program_shape.cpp).

#include "runtime/eval/static/import_table.hpp"
#include "runtime/eval/static/name_resolution.hpp"
#include "runtime/eval/static/pattern_table.hpp"
#include "runtime/eval/static/program_outline.hpp"
#include "runtime/eval/static/rule_table.hpp"
#include "runtime/eval/static/source_text.hpp"
#include "runtime/eval/static_checks.hpp"

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl::eval::static_impl {

class checker {
public:
  checker(std::string_view source, const static_check_options& opts);

  static_check_result run();

private:
  // -- setup (checker.cpp) --
  void resolve_levels(const static_check_options& opts);
  void build_kernel_text();
  void run_patterns();
  bool exempt(const compiled_pattern& p, std::string_view matched, size_t text_offset) const;

  // -- findings (checker.cpp) --
  size_t code_offset(size_t k) const;
  size_t kernel_offset(size_t k) const;
  bool full(size_t rule) const;
  void add(size_t rule, size_t source_offset, std::string message,
           severity cap = severity::error);
  void add_whole(size_t rule, std::string message);
  std::string excerpt(int line, size_t source_offset) const;
  size_t rule(std::string_view id) const;
  bool on(size_t r) const;
  static_check_result collect();

  // -- structural checks, one file each --
  void check_code_bypass();                      // code_bypass.cpp
  void check_empty_bodies();                     // code_bypass.cpp
  void check_encoding();                         // program_shape.cpp
  void check_model_new();                        // program_shape.cpp
  void check_kernel_called();                    // kernel_reachability.cpp
  void check_output_cache();                     // output_state.cpp
  void check_module_patching();                  // module_patching.cpp
  void check_name_obfuscation();                 // name_obfuscation.cpp
  void check_pasting_macros(size_t rule);         // name_obfuscation.cpp

  matcher m_; // first: the members after it use it while they are built
  std::string_view src_;
  lexed_source lexed_;
  line_table lines_;
  outline outline_;
  import_table imports_;
  resolved_code resolved_;
  std::string kernel_;
  std::vector<uint32_t> kernel_offsets_;
  /// [begin, end) of the type lists of AT_DISPATCH_* macros in kernel_.
  std::vector<std::pair<size_t, size_t>> dispatch_lists_;
  /// Names the candidate defines at module level (its own Model, get_inputs, ...).
  std::set<std::string, std::less<>> own_definitions_;
  std::vector<severity> levels_;
  std::vector<bool> overridden_;
  kernel_backend backend_ = kernel_backend::cuda;
  std::vector<std::vector<static_finding>> per_rule_;
};

} // namespace kbrl::eval::static_impl
