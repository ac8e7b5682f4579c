#include "runtime/eval/static/rule_table.hpp"

#include "messages/errors.hpp"

#include <algorithm>

namespace kbrl::eval {

namespace static_impl {

namespace {

// Descriptions end with the reason for a `warning` default: the honest code that triggers the
// rule, and which runtime check carries the decision instead.
constexpr rule_def defs[] = {
  // KernelBench (src/kernelbench/kernel_static_checker.py)
  {"code_bypass", severity::error, applies_to::always,
   "try/except that swallows a kernel's error (a fallback to PyTorch), contextlib.suppress, or a"
   " def/ModelNew whose whole body is pass; try around imports only, handlers that re-raise and"
   " try/finally are not flagged"},
  {"timing_event_patch", severity::error, applies_to::always,
   "reassigns timing functions (torch.cuda.Event, synchronize, time.*, elapsed_time)"},
  {"thread_injection", severity::error, applies_to::always,
   "threads, processes or async tasks: work escapes the timed region"},
  {"lazy_eval", severity::error, applies_to::always,
   "Tensor subclasses, __torch_function__/__torch_dispatch__: lazy or fake results"},
  {"stream_injection", severity::warning, applies_to::always,
   "non-default CUDA streams (warning: honest kernels create streams and join them; the"
   " runtime's wall-clock check, timing_inconsistent, catches work hidden on another stream)"},
  {"precision_downgrade", severity::warning, applies_to::fp32,
   "half/bfloat16/TF32/fp8 in an fp32 problem (warning: generic AT_DISPATCH and templated"
   " kernels name half types whose fp32 path is what runs; the runtime's strict tolerance"
   " catches a real downgrade)"},
  {"pytorch_wrap", severity::warning, applies_to::kernel_backends,
   "uses torch.nn compute layers (nn.Linear, nn.Conv2d, ...) instead of kernels (warning: a"
   " layer may only hold weights; own_kernels_idle/low_time_coverage judge the work)"},
  {"torch_computation_ops", severity::warning, applies_to::kernel_backends,
   "calls PyTorch/library compute ops (torch.matmul, F.relu, at::mm, cuBLAS) instead of kernels"
   " (warning: glue ops are honest; low_time_coverage judges the share)"},
  {"cuda_impl", severity::error, applies_to::cuda,
   "cuda backend: needs a __global__ kernel in the source strings, compiled with load_inline"
   " and launched"},
  {"triton_impl", severity::error, applies_to::triton,
   "triton backend: needs an @triton.jit (or autotune) kernel using tl.* operations"},
  {"tk_impl", severity::error, applies_to::thunderkittens,
   "thunderkittens backend: needs kittens warp/warpgroup code and st_/rt_ tiles"},
  {"cute_impl", severity::error, applies_to::cute,
   "cute backend: needs cute::/cutlass:: code (or the CUTLASS Python DSL)"},
  {"tilelang_impl", severity::error, applies_to::tilelang,
   "tilelang backend: needs an @T.prim_func kernel"},
  // kbrl
  {"hip_impl", severity::error, applies_to::hip,
   "hip backend: needs a __global__ kernel in the source strings, compiled with load_inline"
   " and launched"},
  {"model_new_missing", severity::error, applies_to::always,
   "the program defines no class ModelNew"},
  {"kernel_not_called", severity::error, applies_to::launched,
   "ModelNew.forward never reaches the candidate's own kernel: PyTorch does the work"},
  {"reference_access", severity::error, applies_to::always,
   "reaches the reference: Model, get_inputs, its module, globals(), module hooks (names the"
   " candidate defines itself are its own)"},
  {"output_cache", severity::error, applies_to::always,
   "returns state kept across calls or memoises on inputs; identity keys (data_ptr, id, hash)"
   " and memoised builders without arguments are only warnings (alignment tests and cached"
   " extension builders are honest; input rotation catches cached outputs at run time)"},
  {"sys_modules", severity::error, applies_to::always,
   "touches sys.modules, sys.path or the import machinery"},
  {"import_evasion", severity::warning, applies_to::always,
   "imports os/sys/time under another name or imports their functions (warning: spelling only;"
   " the checks resolve aliases and see the real calls)"},
  {"builtins_access", severity::error, applies_to::always,
   "touches builtins/__builtins__"},
  {"dunder_escape", severity::error, applies_to::always,
   "walks the object graph (__subclasses__, __globals__, __mro__, __code__, ...); dunders with"
   " honest uses (__class__, __dict__, __call__, __new__, __doc__, ...) are only warnings"},
  {"gc_access", severity::error, applies_to::always,
   "searches the garbage collector's objects (gc.get_objects finds the reference and its"
   " outputs); import gc and gc.collect() are only warnings"},
  {"frame_inspection", severity::error, applies_to::always,
   "inspects frames (inspect, sys._getframe, f_back, f_locals, settrace); traceback printing"
   " and sys.exc_info in error handlers are only warnings"},
  {"file_access", severity::error, applies_to::always,
   "touches files or descriptors (open, os.* file functions, pathlib, shutil, np/torch save and"
   " load); os.path string functions are not flagged, __file__ is a warning"},
  {"network_access", severity::error, applies_to::always,
   "uses the network (socket, urllib, requests, http)"},
  {"subprocess_spawn", severity::error, applies_to::always,
   "runs other programs (subprocess, os.system, os.popen, pty, exec*)"},
  {"ctypes_ffi", severity::error, applies_to::always,
   "loads native code outside the build (ctypes, cffi, dlopen, load_library)"},
  {"precision_flags", severity::error, applies_to::always,
   "changes global math settings (TF32, matmul precision, cuDNN flags, default dtype)"},
  {"rng_state", severity::error, applies_to::always,
   "reads or seeds random number generators (predicts the test inputs)"},
  {"dynamic_code", severity::error, applies_to::always,
   "runs code built at run time (eval, exec, compile, __import__, importlib, Python from C++)"},
  {"env_write", severity::warning, applies_to::always,
   "writes environment variables (warning: KernelBench's HIP example sets CXX, honest kernels"
   " set TORCH_CUDA_ARCH_LIST; the candidate's process is its own, LD_PRELOAD is ctypes_ffi)"},
  {"signal_use", severity::error, applies_to::always,
   "uses signals (signal, os.kill, faulthandler)"},
  {"process_exit", severity::error, applies_to::always,
   "ends the process (sys.exit, os._exit, exit, abort, atexit); exit/abort in C++ error"
   " handling is only a warning (a crash is the candidate's failure at run time)"},
  {"torch_monkey_patch", severity::error, applies_to::always,
   "reassigns attributes of torch, torch.Tensor, F, nn, numpy or triton"},
  {"torch_internals", severity::error, applies_to::always,
   "uses PyTorch internals (torch._C, operator overrides of aten, dynamo config); torch.library"
   " custom ops of the candidate's own are only warnings"},
  {"encoding_trick", severity::error, applies_to::always,
   "hides code from readers: non-ASCII in code, a source encoding declaration, \\N{} escapes"},
  {"cuda_graph", severity::warning, applies_to::always,
   "captures or replays CUDA graphs (warning: replays are honest when inputs are copied in;"
   " input rotation catches stale results)"},
  {"token_pasting", severity::warning, applies_to::always,
   "token pasting (##) in kernel source can assemble names the checks cannot see (warning:"
   " honest macros paste tokens; a pasted name the checks know is name_obfuscation)"},
  {"name_obfuscation", severity::error, applies_to::always,
   "hides a name from the checks: getattr/setattr/__import__/globals()[...] with a name built"
   " from pieces (+, join, chr, format, slicing, base64/codecs), a module reached through"
   " another (torch.os, np.sys), a token-pasted C name the checks look for"},
};

constexpr size_t count = sizeof defs / sizeof defs[0];

} // namespace

const rule_def* rule_defs() {
  return defs;
}

size_t rule_count() {
  return count;
}

size_t rule_index(std::string_view id) {
  for (size_t i = 0; i < count; ++i)
    if (id == defs[i].id)
      return i;
  return count;
}

bool rule_applies(applies_to when, kernel_backend b, kernel_precision precision) {
  switch (when) {
    case applies_to::always: return true;
    case applies_to::kernel_backends: return b != kernel_backend::torch;
    case applies_to::fp32: return precision == kernel_precision::fp32;
    case applies_to::cuda: return b == kernel_backend::cuda;
    case applies_to::hip: return b == kernel_backend::hip;
    case applies_to::triton: return b == kernel_backend::triton;
    case applies_to::thunderkittens: return b == kernel_backend::thunderkittens;
    case applies_to::cute: return b == kernel_backend::cute;
    case applies_to::tilelang: return b == kernel_backend::tilelang;
    case applies_to::launched:
      return b == kernel_backend::cuda || b == kernel_backend::hip || b == kernel_backend::triton;
  }
  return true;
}

} // namespace static_impl

// -- public API: the rule list and results --------------------------------------------------------

const char* to_string(severity x) {
  switch (x) {
    case severity::error: return "error";
    case severity::warning: return "warning";
    case severity::off: return "off";
  }
  return "?";
}

bool static_check_result::rejected() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const static_finding& f) { return f.level == severity::error; });
}

std::vector<std::string> static_check_result::hack_flags() const {
  std::vector<std::string> out;
  for (const auto& f : findings)
    if (f.level != severity::off && std::find(out.begin(), out.end(), f.rule) == out.end())
      out.push_back(f.rule);
  return out;
}

const std::vector<rule_info>& all_rules() {
  static const std::vector<rule_info> rules = [] {
    std::vector<rule_info> out;
    for (size_t i = 0; i < static_impl::count; ++i) {
      const auto& d = static_impl::defs[i];
      out.push_back(rule_info{d.id, d.level, d.description});
    }
    return out;
  }();
  return rules;
}

const rule_info* find_rule(std::string_view id) {
  for (const auto& r : all_rules())
    if (r.id == id)
      return &r;
  return nullptr;
}

caf::expected<void> validate_overrides(const std::map<std::string, severity>& overrides) {
  std::string unknown;
  for (const auto& [id, level] : overrides) {
    if (find_rule(id) != nullptr)
      continue;
    unknown += unknown.empty() ? "\"" : ", \"";
    unknown += id + "\"";
  }
  if (unknown.empty())
    return caf::unit;
  std::string valid;
  for (const auto& r : all_rules())
    valid += (valid.empty() ? "" : ", ") + r.id;
  return make_error(errc::invalid_config,
                    "static check overrides: unknown rule id " + unknown + "; valid ids: " + valid);
}

} // namespace kbrl::eval
