#pragma once
// What the built-in embedding sees in a PyTorch program: features of code, not of prose.
//
//   call:conv3d          an operator applied: torch/nn/F calls, tensor methods (x.mean), and
//                        calls of modules built in __init__ (self.up(x) where
//                        self.up = nn.ConvTranspose3d(...) counts as call:convtranspose3d);
//                        `a @ b` counts as call:matmul
//   api:torch.nn.Conv3d  the full torch path of a call (F. and nn. spelled out)
//   seq:conv3d>relu      two operators applied one after the other (fusion order)
//   kw:dim  kwv:dim=1    keyword arguments and their literal values
//   rank:4               arguments of torch.rand/randn/zeros/... (the rank of an input)
//   attr:T               attributes read off values (x.T, x.shape); self's are names instead
//   id:transpose         parts of identifiers (snake_case, camelCase and digits split)
//   word:convolution     words of comments and strings (docstrings say what a module does)
//   sym:*  num:2^7       operators, and numbers by order of magnitude
//
// Each kind has a weight (kinds that say what is computed weigh most); the embedding
// multiplies it with the feature's TF-IDF (lexical_embedder.hpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::retrieval {

/// One distinct feature of a program.
struct code_feature {
  std::string text;     ///< e.g. "call:conv3d"
  float kind_weight = 1;///< the weight of its kind
  int32_t count = 0;    ///< occurrences in the program
};

/// The features of `python_source`, each once with its count, in order of first occurrence.
std::vector<code_feature> extract_code_features(std::string_view python_source);

/// The 64-bit hash features are known by in IDF tables and hashed vectors (FNV-1a of the text).
uint64_t feature_hash(std::string_view feature_text);

} // namespace kbrl::retrieval
