// name_obfuscation: tricks whose only purpose is to hide a name from the checks.
//
//   - getattr/setattr/__import__/globals()[...] with a name in pieces or built at run time
//     (found while resolving names, name_resolution.cpp);
//   - a module reached through another module (torch.os, np.sys, os.sys, x.__builtins__):
//     nothing needs os through torch but a check that looks for `os.`;
//   - C/C++ token pasting (##) that assembles a name the checks look for (sys##tem, __ha##lf).
//
// Deliberately not here (honest C, judged elsewhere): a typedef/#define/using that renames a
// half type (the half type is still spelled and precision_downgrade sees it), `unsigned short`
// reinterpretation of 16-bit data (bit manipulation and uint16 data are honest; a precision loss
// is caught by the runtime's strict tolerance), `.f16` in inline PTX (precision_downgrade).

#include "runtime/eval/static/checker.hpp"

#include <algorithm>

namespace kbrl::eval::static_impl {

namespace {

const pcre2_code* module_through_module() {
  // A module name after an attribute of another module; torch.signal and torch.multiprocessing
  // are torch's own submodules.
  static const code_ptr re = compile_regex(
    R"re(\btorch\s*\.\s*(?:signal|multiprocessing)\b(*SKIP)(*F)|)re"
    R"re((?<![\w.])(?:torch|numpy|np|triton|tl|os|sys|math|F|nn|time|functools|collections|)re"
    R"re(itertools|operator|typing|random|re|json|types|warnings|contextlib|cutlass|tilelang|)re"
    R"re(T)(?:\s*\.\s*\w+)*?\s*\.\s*(os|sys|builtins|subprocess|importlib|ctypes|gc|inspect|)re"
    R"re(socket|shutil|signal|threading|multiprocessing|pickle|marshal|posix|nt|_io|io|)re"
    R"re(__builtins__)\b)re");
  return re.get();
}

const pcre2_code* pasted_tokens() {
  static const code_ptr re = compile_regex(R"re(\w+(?:\s*##\s*\w+)+)re");
  return re.get();
}

/// Names the kernel-source rules look for, as a pasted token could assemble them.
bool watched_c_name(std::string_view name) {
  static const char* names[] = {
    "system", "popen", "execv", "execve", "execvp", "execl", "execlp", "fork", "vfork",
    "posix_spawn", "dlopen", "dlsym", "fopen", "open", "openat", "unlink", "remove", "rename",
    "socket", "connect", "setenv", "putenv", "syscall", "kill", "raise", "signal", "exit",
    "_exit", "abort", "__half", "half", "half2", "__half2", "__nv_bfloat16", "nv_bfloat16",
    "__float2half", "__float2half_rn", "__floats2half2_rn", "__float2bfloat16", "__hadd",
    "__hmul", "__hfma", "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaEventRecord",
    "cudaEventElapsedTime", "cudaGraphLaunch", "cublasSetMathMode", "write", "mmap"};
  return std::any_of(std::begin(names), std::end(names),
                     [&](const char* n) { return name == n; });
}

/// `#define M(a, b) ... a##b ...`: the macro and the positions of the first two parameters it
/// pastes together.
const pcre2_code* pasting_macro() {
  static const code_ptr re =
    compile_regex(R"re(#\s*define\s+(\w+)\(([^)]*)\)[^\r\n]*?\b(\w+)\s*##\s*(\w+))re");
  return re.get();
}

/// The index of `name` in a macro's comma-separated parameter list, or -1.
int parameter_index(std::string_view params, std::string_view name) {
  int index = 0;
  size_t start = 0;
  for (size_t k = 0; k <= params.size(); ++k) {
    if (k < params.size() && params[k] != ',')
      continue;
    auto p = params.substr(start, k - start);
    while (!p.empty() && is_blank(p.front()))
      p.remove_prefix(1);
    while (!p.empty() && is_blank(p.back()))
      p.remove_suffix(1);
    if (p == name)
      return index;
    ++index;
    start = k + 1;
  }
  return -1;
}

} // namespace

/// Invocations of pasting macros whose pasted arguments spell a watched name.
void checker::check_pasting_macros(size_t r) {
  std::string_view kernel = kernel_;
  for (size_t from = 0; m_.find(pasting_macro(), kernel, from); from = m_.end()) {
    std::string macro{m_.group(kernel, 1)};
    auto params = m_.group(kernel, 2);
    int ia = parameter_index(params, m_.group(kernel, 3));
    int ib = parameter_index(params, m_.group(kernel, 4));
    size_t after = m_.end();
    if (ia < 0 || ib < 0)
      continue;
    auto call = compile_regex(("\\b" + macro + "\\s*\\(([^()]*)\\)").c_str());
    matcher calls;
    for (size_t k = after; calls.find(call.get(), kernel, k); k = calls.end()) {
      std::vector<std::string> args;
      std::string cur;
      for (char c : calls.group(kernel, 1)) {
        if (c == ',') {
          args.push_back(cur);
          cur.clear();
        } else if (is_ident_byte(c)) {
          cur.push_back(c);
        }
      }
      args.push_back(cur);
      if (static_cast<size_t>(std::max(ia, ib)) >= args.size())
        continue;
      std::string joined = args[static_cast<size_t>(ia)] + args[static_cast<size_t>(ib)];
      if (watched_c_name(joined))
        add(r, kernel_offset(calls.begin()),
            "the macro " + macro + " pastes " + joined + ": it hides the name from the checks");
    }
  }
}

void checker::check_name_obfuscation() {
  size_t r = rule("name_obfuscation");
  if (!on(r))
    return;
  for (const auto& o : resolved_.found)
    add(r, o.offset, o.message);
  std::string_view code = resolved_.text;
  for (size_t from = 0; m_.find(module_through_module(), code, from);
       from = std::max(m_.end(), from + 1))
    add(r, code_offset(m_.begin(1)),
        "reaches the module " + std::string{m_.group(code, 1)}
          + " through another module: it hides the module from the checks");
  std::string_view kernel = kernel_;
  for (size_t from = 0; m_.find(pasted_tokens(), kernel, from); from = m_.end()) {
    std::string joined;
    for (char c : m_.group(kernel, 0))
      if (is_ident_byte(c))
        joined.push_back(c);
    if (watched_c_name(joined))
      add(r, kernel_offset(m_.begin()),
          "token pasting assembles " + joined + ": it hides the name from the checks");
  }
  check_pasting_macros(r);
}

} // namespace kbrl::eval::static_impl
