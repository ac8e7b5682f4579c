#pragma once
// Static checks of a candidate kernel program, run in C++ before any process sees it.
//
// A candidate is a Python file defining `class ModelNew(nn.Module)` (KernelBench format) that
// must do its work with one backend (CUDA through load_inline, Triton, ...). Candidates come
// from a model being trained to win a reward, so they are hostile: the checks here refuse the
// known reward hacks (try/except fallbacks to PyTorch, patched timers, side streams, cached
// outputs, reaching the reference, escaping the sandbox through files, sockets, subprocesses,
// frames or the object graph) before they cost a GPU process. They are one layer: the worker
// adds runtime checks (outputs aliasing inputs, cached outputs under input rotation) and runs
// everything in an isolated process.
//
// The rules follow KernelBench's src/kernelbench/kernel_static_checker.py (same ids where a rule
// exists there: code_bypass, timing_event_patch, thread_injection, lazy_eval, stream_injection,
// precision_downgrade, pytorch_wrap, torch_computation_ops, cuda_impl, triton_impl, tk_impl,
// cute_impl, tilelang_impl) and add the ones a hostile model finds next (all_rules() lists
// every rule with its default severity).
//
// Comments and string literals neither trigger nor hide a rule. The source is lexed first
// (lex_python): Python-code rules see the code with comments and string contents blanked (same
// offsets, so line numbers stay right); kernel-source rules see the contents of the string
// literals (escapes decoded, pieces joined by `+` or juxtaposition checked as one text) with
// C/C++ comments removed. Docstrings and other string statements are not kernel source. The
// replacement fields of f-strings (`{expr}`) are Python code and are checked as such (an
// f-string's literal text is string text; expressions are not parsed beyond brace matching).
//
// Names are resolved through the program's import table before the Python-code rules run:
// import aliases (`import torch as T`, `from torch import cuda as c`, `Ev = torch.cuda.Event`) and
// getattr/setattr with literal names read as the canonical names; hiding a name (pieces, chr,
// join, base64, a module reached through another) is a finding of its own (name_obfuscation).
// Rules that honest kernels trigger default to warnings: the runtime checks carry the hard
// decisions (runtime/eval/STATIC_RULES.md lists every rule, its default and why).
//
// Limits, by design of a static pass: names reached through values (`f = getattr(obj, name)`
// with a plain variable) are not followed; a pattern is a heuristic, not a proof. Where the regex engine gives up on an input (a resource
// limit), the pattern counts as matched: input built to exhaust the checks is refused.
//
// Cost: one pass of the lexer plus one regex scan per rule pattern whose literal hint occurs in
// the text; typically tens of microseconds per candidate. Thread-safe: the compiled pattern
// table is built once and only read afterwards.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::eval {

/// How a rule's findings count: `error` rejects the candidate, `warning` is reported (and lands
/// in hack_flags) without rejecting, `off` does not evaluate the rule at all.
enum class severity : uint8_t { error, warning, off };

/// "error", "warning" or "off".
const char* to_string(severity x);

/// Per-run settings of the static checks.
struct static_check_options {
  /// Rule id -> severity, replacing the rule's default. Default: empty (every rule at its
  /// default). Ids must name rules of all_rules(): check them with validate_overrides() when
  /// the run config is loaded; check_candidate() ignores ids it does not know.
  std::map<std::string, severity> overrides;
  /// The backend the candidate must use; selects the backend rule (cuda_impl, triton_impl, ...)
  /// and, for `torch`, turns off the rules against PyTorch ops. Default: cuda.
  kernel_backend backend = kernel_backend::cuda;
  /// The problem's precision; precision_downgrade only applies to fp32. Default: fp32.
  kernel_precision precision = kernel_precision::fp32;
};

/// One rule that fired at one place of the candidate.
struct static_finding {
  std::string rule;    ///< the rule id, e.g. "code_bypass"
  severity level = severity::error; ///< after overrides; never `off`
  int line = 0;        ///< 1-based line in the candidate; 0 when the finding is about the whole
                       ///< program (a backend that is never used, a missing ModelNew)
  std::string message; ///< one line for a person (and for the model's feedback)
  std::string excerpt; ///< the offending source line, trimmed, at most 160 bytes; "" if line 0
};

/// What the static checks found in one candidate.
struct static_check_result {
  /// Every finding, sorted by line then rule. A rule reports at most 3 places.
  std::vector<static_finding> findings;

  /// True when any finding is an error: the candidate must not run.
  bool rejected() const;

  /// The ids of the rules with findings (errors and warnings), each once, in order of first
  /// finding: what an eval_result carries as hack_flags.
  std::vector<std::string> hack_flags() const;
};

/// A rule as listed for people and configs.
struct rule_info {
  std::string id;                           ///< stable id, e.g. "timing_event_patch"
  severity default_level = severity::error; ///< without an override
  std::string description;                  ///< one line: what the rule refuses and why
};

/// Every rule, in a stable order (KernelBench's first).
const std::vector<rule_info>& all_rules();

/// The rule with this id, or nullptr.
const rule_info* find_rule(std::string_view id);

/// Checks that every key of `overrides` names a rule. Fails with errc::invalid_config naming
/// the unknown ids and listing the valid ones.
caf::expected<void> validate_overrides(const std::map<std::string, severity>& overrides);

/// Runs every rule that applies to `opts.backend` / `opts.precision` and is not `off` over a
/// candidate program. Never throws on any input (binary junk, unterminated strings, invalid
/// UTF-8 included): what cannot be lexed as Python is treated conservatively.
static_check_result check_candidate(std::string_view source, const static_check_options& opts);

// -- the lexer, exposed for tests -----------------------------------------------------------------

/// One Python string literal of the source (f-string replacement fields excluded).
struct string_literal {
  int line = 0;          ///< 1-based line of the opening quote
  size_t begin = 0;      ///< source offset of the prefix (or the opening quote)
  size_t end = 0;        ///< source offset just past the closing quote (or where it stopped)
  std::string raw;       ///< the text between the quotes, as written
  /// The text Python would build, as far as it can be known statically: escapes decoded
  /// (`\n`, `\x41`, `\u00e9`, octal, line continuations; `\N{...}` kept as written), and for
  /// f-strings the literal parts only (`{{` -> `{`, replacement fields dropped).
  std::string value;
  std::vector<uint32_t> value_offsets; ///< source offset of each byte of `value`
  bool is_raw = false;       ///< r/R prefix: backslashes kept
  bool is_bytes = false;     ///< b/B prefix
  bool is_formatted = false; ///< f/F (or t/T) prefix
  /// The literal is an expression statement of its own (a docstring, a bare string): its value
  /// is discarded, so it is neither code nor kernel source.
  bool is_statement = false;
};

/// A Python source split into code and string literals.
struct lexed_source {
  /// The source with comments and the contents of string literals replaced by spaces (line
  /// breaks kept, prefixes and quotes kept, f-string replacement fields kept as code): the
  /// same length as the source, so offsets and line numbers carry over.
  std::string code;
  /// Every string literal in source order (literals nested in f-string fields included).
  std::vector<string_literal> strings;
  /// String literals were nested in f-string fields more than 32 deep; from there on quotes
  /// were left in the code (nothing is hidden; the checks report it).
  bool too_deep = false;
};

/// Lexes Python source the way CPython's tokenizer does for comments and strings: `#`
/// comments; '...', "...", '''...''', """...""" with backslash escapes; prefixes r, b, f, t,
/// u and their combinations in any case; f-strings with nested fields and quotes (Python 3.12
/// rules, a superset of the older ones). Line breaks are \n, \r\n or a lone \r. An
/// unterminated single-quoted string ends at its line break, an unterminated triple-quoted
/// one at the end of the source.
lexed_source lex_python(std::string_view source);

/// Kernel (C/C++/CUDA) source with comments replaced by spaces, line splices (backslash
/// newline) removed first as the compiler does; string and character literals (raw strings,
/// prefixes, digit separators) are kept and never mistaken for comments. `offsets`, if given,
/// is updated in step (one entry per byte of `text`).
std::string strip_c_comments(std::string_view text, std::vector<uint32_t>* offsets = nullptr);

} // namespace kbrl::eval
