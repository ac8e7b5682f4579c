// Patterns of kbrl's rules: reaching the reference, caching outputs, escaping the sandbox
// (files, network, processes, native code, the interpreter's internals), global settings.

#include "runtime/eval/static/pattern_table.hpp"

namespace kbrl::eval::static_impl {

namespace {

constexpr auto forbid = pattern_kind::forbid;
constexpr auto suspect = pattern_kind::suspect;
constexpr auto require = pattern_kind::require;
constexpr auto in_code = scope::code;
constexpr auto in_kernel = scope::kernel;
constexpr auto as_written = scope::written;

const pattern_def defs[] = {
  // -- reference_access --
  {"reference_access", in_code, forbid, "Model", R"re(\bclass\s+Model\b(*SKIP)(*F)|\bModel\b)re",
   "refers to the reference class Model"},
  {"reference_access", in_code, forbid, "get_",
   R"re(\bdef\s+get_(?:init_)?inputs\b(*SKIP)(*F)|\bget_(?:init_)?inputs\b)re",
   "uses the problem's input generator {m}"},
  {"reference_access", in_code, forbid, "__main__", R"re(\b__main__\b)re",
   "reaches the __main__ module, where the reference may live"},
  {"reference_access", in_code, forbid, "ref|problem|kernelbench|kbrl|src",
   R"re(\b(?:from|import)\s+(?:reference|ref|problem|kernelbench|kbrl\w*|src)\b)re",
   "imports the reference or the evaluation harness ({m})"},
  {"reference_access", in_code, forbid, "globals", R"re(\bglobals\s*\()re",
   "reads globals(), where the reference may live"},
  {"reference_access", in_code, forbid, "hook", R"re(\bregister_\w*hook\b)re",
   "registers a module hook ({m}): can capture the reference's outputs"},

  // -- output_cache (plus the structural check in check_output_cache) --
  // A memoised function without arguments (besides self) builds something once (an extension,
  // a config): it cannot key on inputs.
  {"output_cache", in_code, forbid, "lru_cache|cached_property|cache",
   R"re((?:\b(?:lru_cache|cached_property)\b|\bfunctools\.cache\b|@\s*cache\b)(?:\s*\([^()]*\))?)re"
   R"re(\s*(?:@[^\r\n]*\s*)*def\s+\w+\s*\(\s*(?:self\s*)?\)(*SKIP)(*F)|)re"
   R"re(\b(?:lru_cache|cached_property)\b|\bfunctools\.cache\b|@\s*cache\b)re",
   "memoises results across calls ({m})"},
  // Honest kernels test alignment and contiguity with data_ptr(); input rotation at run time
  // catches outputs cached by identity.
  {"output_cache", in_code, suspect, "data_ptr|storage|_version|_cdata",
   R"re(\.data_ptr\s*\(|\.(?:untyped_)?storage\s*\(\s*\)|\._version\b|\b_cdata\b)re",
   "keys on tensor identity ({m}): outputs can be reused across calls"},
  {"output_cache", in_code, suspect, "id|hash", R"re((?<![\w.])(?:id|hash)\s*\()re",
   "keys on object identity ({m}): outputs can be reused across calls"},
  {"output_cache", in_kernel, forbid, "static|map",
   R"re(\bstatic\s+(?:const\s+)?(?:at|torch)::Tensor\b|)re"
   R"re(\bstd::(?:unordered_)?map\s*<[^;{]*\bTensor\b)re",
   "the kernel source keeps tensors across calls ({m})"},
  {"output_cache", in_code, forbid, "weakref|Weak",
   R"re(\bweakref\b|\bWeak(?:Key|Value)Dictionary\b)re",
   "keeps objects across calls through {m}"},

  // -- sys_modules --
  {"sys_modules", in_code, forbid, "sys.",
   R"re(\bsys\.(?:modules|meta_path|path_hooks|path_importer_cache|path)\b)re",
   "touches {m} (the import system)"},

  // -- import_evasion --
  {"import_evasion", as_written, forbid, "os|sys|time",
   R"re((?<![\w.])(?:os|sys|time)(?:\.\w+)*\s+as\s+\w+|\bfrom\s+(?:os|sys|)re"
   R"re(time)(?:\.\w+)*\s+import\b)re",
   "imports {m}: names and aliases hide the calls the checks look for"},
  {"import_evasion", as_written, forbid, "os|sys|time",
   R"re((?<![=!<>])=\s*(?:os|sys|time)\s*(?=$|[;,)\]}]))re",
   "aliases a module ({m}): hides the calls the checks look for"},

  // -- builtins_access --
  {"builtins_access", in_code, forbid, "builtins", R"re(\b__builtins__\b|\bbuiltins\b)re",
   "touches {m}"},

  // -- dunder_escape --
  {"dunder_escape", in_code, forbid, "__",
   R"re(\b__(?:subclasses|globals|code|closure|mro|bases|base|getattribute|reduce|reduce_ex|)re"
   R"re(loader|spec|self|func|wrapped|defaults|kwdefaults)__\b)re",
   "reaches into the object graph through {m}"},
  // Dunders with honest uses: self.__class__.__name__ in messages, a launcher class with
  // __call__, __new__/__init_subclass__ in helpers, __doc__.
  {"dunder_escape", in_code, suspect, "__",
   R"re(\b__(?:dict|class|setattr|delattr|getattr|doc|init_subclass|set_name|del|call|new|)re"
   R"re(instancecheck|subclasscheck|class_getitem)__\b)re",
   "reaches into the object graph through {m}"},

  // -- gc_access --
  {"gc_access", in_code, forbid, "gc.|tracemalloc|objgraph",
   R"re((?<![\w.])gc\s*\.\s*(?!collect\b|enable\b|disable\b|isenabled\b)\w+|)re"
   R"re(\btracemalloc\b|\bobjgraph\b)re",
   "uses the garbage collector ({m}): it finds the reference and its outputs"},
  // gc.collect() before allocating is honest; the module is only a warning.
  {"gc_access", in_code, suspect, "gc", R"re((?<![\w.])gc\b)re",
   "uses the garbage collector ({m}): it finds the reference and its outputs"},

  // -- frame_inspection --
  {"frame_inspection", in_code, forbid, "inspect", R"re((?<![\w.])inspect\b)re",
   "uses inspect (frames, callers, source)"},
  {"frame_inspection", in_code, forbid,
   "_getframe|_current_frames|f_|tb_|gi_|cr_|ag_|__traceback__",
   R"re(\b_getframe\b|\b_current_frames\b|\bf_(?:back|locals|globals|code|builtins|lineno|lasti|)re"
   R"re(trace)\b|\b(?:tb_frame|tb_next|gi_frame|cr_frame|ag_frame|gi_code|cr_code)\b|)re"
   R"re(\b__traceback__\b)re",
   "inspects interpreter frames ({m})"},
  {"frame_inspection", in_code, forbid, "sys.",
   R"re(\bsys\.(?:settrace|setprofile|gettrace|getprofile|last_\w+|call_tracing|)re"
   R"re(addaudithook|audit|monitoring)\b)re",
   "inspects or traces execution ({m})"},
  // Printing a traceback or reading the exception in an error handler is honest.
  {"frame_inspection", in_code, suspect, "traceback|sys.",
   R"re((?<![\w.])traceback\b|\bsys\.(?:exc_info|exception)\b)re",
   "inspects or traces execution ({m})"},
  {"frame_inspection", in_code, forbid, "locals|vars", R"re((?<![\w.])(?:locals|vars)\s*\()re",
   "reads variables through {m}"},

  // -- file_access --
  {"file_access", in_code, forbid, "open", R"re((?<![\w.])open\s*\()re", "opens a file"},
  {"file_access", in_code, forbid, "io.|codecs.",
   R"re(\b(?:io|codecs)\.(?:open|open_code|FileIO)\b)re",
   "opens a file ({m})"},
  {"file_access", in_code, forbid,
   "gzip|bz2|lzma|tarfile|zipfile|zipimport|fileinput|shutil|tempfile|glob|mmap|fcntl|pickle|"
   "shelve|dbm|sqlite3|linecache|pathlib",
   R"re((?<![\w.])(?:gzip|bz2|lzma|tarfile|zipfile|fileinput|shutil|tempfile|glob|mmap|fcntl|)re"
   R"re(pickle|shelve|dbm|sqlite3|linecache|pathlib)\b)re",
   "uses the file module {m}"},
  {"file_access", in_code, forbid, "Path",
   R"re((?<![\w.])Path\s*\()re", "builds a filesystem path"},
  {"file_access", in_code, forbid, "os.",
   R"re(\bos\.(?:open|fdopen|remove|unlink|rename|renames|replace|makedirs|mkdir|rmdir|)re"
   R"re(removedirs|listdir|scandir|walk|fwalk|chmod|fchmod|chown|lchown|chdir|fchdir|chroot|)re"
   R"re(stat|lstat|fstat|truncate|ftruncate|write|read|pread|pwrite|readv|writev|symlink|link|)re"
   R"re(readlink|utime|mkfifo|mknod|sendfile|memfd_create|pipe|pipe2|dup|dup2|access|lseek|)re"
   R"re(fsync|fdatasync|close|closerange|copy_file_range|splice|posix_fallocate|statvfs|getcwd|)re"
   R"re(getcwdb|listxattr|getxattr|setxattr|removexattr|umask|set_inheritable|)re"
   R"re(get_inheritable|set_blocking|openpty|fspath)\b)re",
   "uses the file function {m}"},
  {"file_access", in_code, suspect, "__file__",
   R"re(\b__file__\b)re", "locates its own source file"},
  {"file_access", in_code, forbid, "np.|numpy.|tofile",
   R"re(\b(?:np|numpy)\.(?:save|savez\w*|savetxt|load|loadtxt|genfromtxt|fromfile|memmap)\b|)re"
   R"re(\.tofile\s*\()re",
   "reads or writes files through {m}"},
  {"file_access", in_code, forbid, "torch.|safetensors|huggingface_hub",
   R"re(\btorch\.(?:save|load|from_file|hub)\b|\btorch\.jit\.(?:save|load)\b|\bsafetensors\b|)re"
   R"re(\bhuggingface_hub\b)re",
   "reads or writes files through {m}"},
  {"file_access", in_code, forbid, "build_directory", R"re(\bbuild_directory\s*=)re",
   "chooses its own extension build directory (kbrl owns the build cache)"},
  {"file_access", in_kernel, forbid,
   "open|fstream|filesystem|opendir|readdir|unlink|rmdir|mkdir|creat|mmap",
   R"re((?<![\w.>])(?:fopen|fdopen|freopen|open|openat|open64|opendir|readdir|unlink|unlinkat|)re"
   R"re(rmdir|mkdir|creat|mmap|truncate|rename)\s*\(|\b(?:std::)?[io]?fstream\b|)re"
   R"re(\bstd::filesystem\b)re",
   "the kernel source touches files ({m})"},
  {"file_access", in_kernel, forbid, "remove", R"re((?<![\w.>:])remove\s*\()re",
   "the kernel source deletes files ({m})"},
  {"file_access", in_kernel, forbid, "write|dup|ioctl|sendfile|syscall|fsync|lseek",
   R"re((?<![\w.>])(?:write|pwrite|writev|dup|dup2|dup3|ioctl|sendfile|syscall|fsync|)re"
   R"re(lseek)\s*\()re",
   "the kernel source uses file descriptors ({m})"},
  {"file_access", in_kernel, forbid, "include|incbin|embed",
   R"re(#\s*include\s*[<"]\s*(?:/|\.\.|~)|#\s*include\s*[<"](?:fstream|filesystem|dirent\.h|)re"
   R"re(fcntl\.h|unistd\.h|sys/(?:stat|mman|syscall|uio|ioctl|sendfile)\.h)[>"]|\.incbin\b|)re"
   R"re(#\s*embed\b|__has_embed)re",
   "the kernel source includes files from disk ({m})"},

  // -- network_access --
  {"network_access", in_code, forbid,
   "socket|urllib|requests|httpx|aiohttp|http|ftplib|smtplib|poplib|imaplib|nntplib|telnetlib|"
   "xmlrpc|websocket|paramiko|ssl|zmq|grpc|asyncssh|pycurl",
   R"re((?<![\w.])(?:socket|socketserver|urllib|urllib2|urllib3|requests|httpx|aiohttp|http|)re"
   R"re(ftplib|smtplib|poplib|imaplib|nntplib|telnetlib|xmlrpc|websocket|websockets|paramiko|)re"
   R"re(ssl|zmq|grpc|asyncssh|pycurl)\b)re",
   "uses the network ({m})"},
  {"network_access", in_kernel, forbid,
   "socket|connect|getaddrinfo|gethostbyname|inet_|sendto|recvfrom|curl_|include",
   R"re(\b(?:socket|connect|getaddrinfo|gethostbyname|inet_pton|inet_addr|sendto|recvfrom)\s*\(|)re"
   R"re(\bcurl_\w+|#\s*include\s*[<"](?:sys/socket\.h|netinet/\w+\.h|arpa/inet\.h|netdb\.h|)re"
   R"re(curl/curl\.h)[>"])re",
   "the kernel source uses the network ({m})"},

  // -- subprocess_spawn --
  {"subprocess_spawn", in_code, forbid, "subprocess|pty|pexpect|popen2",
   R"re((?<![\w.])(?:subprocess|pty|pexpect|popen2)\b)re", "runs other programs ({m})"},
  {"subprocess_spawn", in_code, forbid, "os.",
   R"re(\bos\.(?:system|popen|exec\w*|spawn\w*|posix_spawn\w*|startfile|wait\w*)\b)re",
   "runs other programs ({m})"},
  {"subprocess_spawn", in_kernel, forbid, "system|popen|exec|posix_spawn",
   R"re((?<![\w.>])(?:system|popen|execv\w*|execl\w*|execve|posix_spawn\w*)\s*\()re",
   "the kernel source runs other programs ({m})"},

  // -- ctypes_ffi --
  {"ctypes_ffi", in_code, forbid, "ctypes|cffi|cppyy|pythonnet|DLL|LoadLibrary|load_library|dlopen",
   R"re((?<![\w.])(?:ctypes|_ctypes|cffi|cppyy|pythonnet)\b|\b(?:CDLL|PyDLL|WinDLL|LoadLibrary|)re"
   R"re(load_library|dlopen)\b)re",
   "loads native code outside the build ({m})"},
  {"ctypes_ffi", in_kernel, forbid, "dlopen|dlsym|dlmopen|dlfcn",
   R"re(\b(?:dlopen|dlsym|dlmopen|dlvsym)\s*\(|#\s*include\s*[<"]dlfcn\.h)re",
   "the kernel source loads native code at run time ({m})"},

  {"ctypes_ffi", in_kernel, forbid, "--wrap|--defsym|-init|-fini|LD_PRELOAD|LD_LIBRARY_PATH",
   R"re(--wrap\b|--defsym\b|-Wl,-(?:init|fini)\b|\bLD_PRELOAD\b|\bLD_LIBRARY_PATH\b)re",
   "interposes native symbols at link or load time ({m})"},

  // -- precision_flags --
  {"precision_flags", in_code, forbid, "torch.backends",
   R"re(\btorch\.backends\.[\w.]+\s*=(?!=))re",
   "changes {m}: global math settings affect the reference too"},
  {"precision_flags", in_code, forbid, "allow_|fp32_precision",
   R"re(\.(?:allow_tf32|allow_fp16_reduced_precision_reduction|)re"
   R"re(allow_bf16_reduced_precision_reduction|fp32_precision)\s*=(?!=))re",
   "changes {m}: global math settings affect the reference too"},
  {"precision_flags", in_code, forbid, "set_|use_deterministic",
   R"re(\b(?:set_float32_matmul_precision|set_default_dtype|set_default_tensor_type|)re"
   R"re(set_flush_denormal|use_deterministic_algorithms|set_deterministic_debug_mode)\b)re",
   "changes global math settings ({m})"},
  {"precision_flags", in_code, forbid, "torch.backends",
   R"re(\bsetattr\s*\(\s*torch\.backends\b|\btorch\.backends\.\w+\.flags\s*\()re",
   "changes torch.backends settings ({m})"},
  {"precision_flags", in_kernel, forbid,
   "setAllow|setFloat32|setBenchmark|setDeterministic|TF32|cublasSetMathMode|FAST_",
   R"re(\bsetAllow\w*|\bsetFloat32MatmulPrecision\b|\bsetBenchmarkCuDNN\b|)re"
   R"re(\bsetDeterministicCuDNN\b|\bCUBLAS_TF32_TENSOR_OP_MATH\b|\bcublasSetMathMode\b|)re"
   R"re(\bCUBLAS_COMPUTE_32F_FAST_\w+)re",
   "the kernel source changes global math settings ({m})"},

  // -- rng_state --
  {"rng_state", in_code, forbid, "seed|rng_state|fork_rng|default_generator|graphsafe",
   R"re(\b(?:manual_seed\w*|initial_seed|get_rng_state\w*|set_rng_state\w*|fork_rng|)re"
   R"re(default_generator|graphsafe_[gs]et_state)\b)re",
   "touches the random number generator ({m}): the test inputs become predictable"},
  {"rng_state", in_code, forbid, "random.",
   R"re(\b(?:random|np\.random|numpy\.random)\.(?:seed|getstate|setstate|get_state|set_state)\b)re",
   "touches the random number generator ({m}): the test inputs become predictable"},

  // -- dynamic_code --
  {"dynamic_code", in_code, forbid, "eval|exec|compile|breakpoint",
   R"re((?<![\w.])(?:eval|exec|compile|execfile|breakpoint)\s*\()re",
   "runs code built at run time ({m})"},
  {"dynamic_code", in_code, forbid, "__import__",
   R"re(\b__import__\b)re", "imports by name (__import__)"},
  {"dynamic_code", in_code, forbid, "importlib|runpy|marshal|codeop|pkgutil|imp|zipimport",
   R"re(\bimportlib\b|(?<![\w.])(?:runpy|marshal|codeop|pkgutil|imp|zipimport)\b)re",
   "loads code dynamically ({m})"},
  {"dynamic_code", in_code, forbid, "Type",
   R"re(\btypes\.(?:FunctionType|CodeType|ModuleType|LambdaType|MethodType)\b|\b(?:FunctionType|)re"
   R"re(CodeType)\b)re",
   "builds code or modules at run time ({m})"},
  {"dynamic_code", as_written, forbid, "attr",
   R"re((?<![\w.])(?:getattr|setattr|delattr|hasattr)\s*\(\s*(?:os|sys|builtins|__builtins__|)re"
   R"re(time|subprocess|importlib|gc|inspect|socket|ctypes|shutil|io|signal|threading|)re"
   R"re(multiprocessing)\s*,)re",
   "reaches a sensitive module attribute by name ({m})"},
  {"dynamic_code", in_code, forbid, "operator.",
   R"re(\boperator\.(?:attrgetter|methodcaller)\b)re",
   "reaches attributes by name ({m})"},
  {"dynamic_code", in_kernel, forbid,
   "py::|PyRun_|PyImport_|PyEval_|Py_Compile|PyObject_CallMethod",
   R"re(\bpy::(?:exec|eval|eval_file|module_?::import|globals)\b|\bPyRun_\w+|\bPyImport_\w+|)re"
   R"re(\bPyEval_\w+|\bPy_CompileString\w*|\bPyObject_CallMethod\b)re",
   "the kernel source runs Python ({m})"},

  // -- env_write --
  {"env_write", in_code, forbid, "environ", R"re(\bos\.environ\s*\[[^\]\r\n]*\]\s*=(?!=))re",
   "writes os.environ"},
  {"env_write", in_code, forbid, "environ|putenv|unsetenv",
   R"re(\bos\.environ\s*\.\s*(?:update|setdefault|pop|popitem|clear|__setitem__|__delitem__)\b|)re"
   R"re(\bos\.environ\s*(?:\|=|=(?!=))|\bdel\s+os\.environ\b|\bos\.(?:putenv|unsetenv)\b)re",
   "writes the environment ({m})"},
  {"env_write", in_code, forbid, "environ", R"re(\bfrom\s+os\s+import\b[^\r\n]*\benviron\b)re",
   "imports os.environ by name"},
  {"env_write", in_kernel, forbid, "env",
   R"re((?<![\w.>])(?:setenv|putenv|unsetenv|clearenv)\s*\()re",
   "the kernel source writes the environment ({m})"},

  // -- signal_use --
  {"signal_use", in_code, forbid, "signal|faulthandler|os.",
   R"re((?<![\w.])(?:signal|faulthandler)\b|\bos\.(?:kill|killpg|pidfd_send_signal)\b)re",
   "uses signals ({m})"},
  {"signal_use", in_kernel, forbid, "signal|sigaction|raise|kill|alarm|setitimer|sigqueue",
   R"re((?<![\w.>])(?:signal|sigaction|raise|kill|killpg|alarm|setitimer|pthread_kill|)re"
   R"re(sigqueue)\s*\()re",
   "the kernel source uses signals ({m})"},

  // -- process_exit --
  {"process_exit", in_code, forbid, "exit|abort|quit|SystemExit",
   R"re(\bsys\.exit\b|\bos\.(?:_exit|abort)\b|(?<![\w.])(?:exit|quit)\s*\(|\batexit\b|)re"
   R"re(\bSystemExit\b)re",
   "ends the process ({m})"},
  // exit(1) after a failed CUDA call is honest host code; a crash is the candidate's failure.
  {"process_exit", in_kernel, suspect, "exit|Exit|abort|terminate",
   R"re((?<![\w.>])(?:exit|_exit|_Exit|quick_exit|abort|terminate)\s*\()re",
   "the kernel source ends the process ({m})"},

  // -- torch_monkey_patch --
  {"torch_monkey_patch", in_code, forbid, "torch.|F.|nn.|np.|numpy.|triton.|tl.|Tensor.|math.",
   R"re(:\s*(?:torch|F|nn|np|numpy|triton|tl|Tensor|math)(?:\.\w+)+\s*=(*SKIP)(*F)|)re"
   R"re((?<![\w.])(?!torch\.backends\b|torch\.cuda\.(?:Event|synchronize|current_stream|)re"
   R"re(default_stream|Stream)\b)(?:torch|F|nn|np|numpy|triton|tl|Tensor|)re"
   R"re(math)(?:\.\w+)+\s*=(?!=))re",
   "monkey-patches {m}"},
  {"torch_monkey_patch", in_code, forbid, "setattr",
   R"re(\bsetattr\s*\(\s*(?!torch\.backends\b)(?:torch|F|nn|np|numpy|triton|tl|Tensor|math)\b)re",
   "monkey-patches through {m}"},

  // -- torch_internals --
  {"torch_internals", in_code, forbid, "torch.|Library",
   R"re(\btorch\.(?:_C|_ops|_dynamo|_inductor|_functorch|_subclasses|_prims|)re"
   R"re(_refs|_decomp|_guards)\b)re",
   "uses PyTorch internals ({m})"},
  // torch.library.custom_op / Library("mylib", "DEF") register the candidate's own operators.
  {"torch_internals", in_code, suspect, "torch.|Library",
   R"re(\btorch\.(?:library|_library)\b|(?<![\w.])Library\s*\()re",
   "uses PyTorch internals ({m})"},
  {"torch_internals", in_kernel, forbid,
   "TORCH_LIBRARY|Dispatcher|RegisterOperators|registerFallback|c10::impl",
   R"re(\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\s*\(\s*(?:aten|prim|_)\b|\bc10::Dispatcher\b|)re"
   R"re(\bRegisterOperators\b|\bregisterFallback\b|\bc10::impl::)re",
   "the kernel source overrides PyTorch operators ({m})"},

  // -- encoding_trick (plus the declaration and \N{} checks in code) --
  {"encoding_trick", in_code, forbid, "", R"re([\x80-\xff]+)re",
   "non-ASCII characters in Python code: identifiers are NFKC-normalised, lookalikes can spell"
   " any name"},

  // -- cuda_graph --
  {"cuda_graph", in_code, forbid, "CUDAGraph|graph",
   R"re(\bCUDAGraph\b|\bcuda\.graphs?\b|\bmake_graphed_callables\b|\bgraph_pool_handle\b)re",
   "captures or replays CUDA graphs ({m})"},
  {"cuda_graph", in_kernel, forbid, "Graph|BeginCapture",
   R"re(\b(?:cuda|hip|cu)Graph\w*|\b(?:cuda|hip|cu)StreamBeginCapture\w*|\bCUDAGraph\b)re",
   "the kernel source captures or replays CUDA graphs ({m})"},

  // -- token_pasting --
  {"token_pasting", in_kernel, forbid, "##",
   R"re(##)re", "token pasting (##) in the kernel source"},
};

} // namespace

pattern_list sandbox_patterns() {
  return {defs, sizeof defs / sizeof defs[0]};
}

} // namespace kbrl::eval::static_impl
