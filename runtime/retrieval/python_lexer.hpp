#pragma once
// A forgiving tokenizer for Python source, enough to read PyTorch reference programs as code
// rather than as text: names, numbers, string literals, comments, operators and line ends.
// It never fails: an unknown byte becomes a one-character operator. String literals are the
// static checks' (eval::lex_python, runtime/eval/static_checks.hpp): one reading of Python's
// strings, docstrings and f-strings for the checks and for retrieval. Used by the code-aware embedding (code_features.hpp) and by the
// leakage key, which must ignore comments and docstrings (source_keys.hpp).

#include <string_view>
#include <vector>

namespace kbrl::retrieval {

/// What a token is.
enum class py_token_kind {
  name,     ///< identifier or keyword: "torch", "def", "conv_transpose3d"
  number,   ///< "16", "0.5", "1e-5", "0x1F"
  string,   ///< a whole literal with prefix and quotes: "'a'", "\"\"\"doc\"\"\"", "f'{x}'"
  comment,  ///< "# ..." up to (not including) the line end
  op,       ///< punctuation and operators, longest match: "(", ".", "**", "->", "@", "=="
  newline,  ///< the end of a logical line (line ends inside brackets are not reported)
};

/// One token: a view into the lexed text.
struct py_token {
  py_token_kind kind;
  std::string_view text;
  /// True for a string literal that is a statement by itself (a docstring, or a string used as
  /// a comment): it starts a logical line and a line end or the text's end follows it.
  bool statement_string = false;
};

/// The tokens of `source`, in order. Views point into `source`, which must outlive them.
std::vector<py_token> lex_python(std::string_view source);

} // namespace kbrl::retrieval
