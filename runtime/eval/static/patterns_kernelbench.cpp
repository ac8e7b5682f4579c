// Patterns of KernelBench's rules (src/kernelbench/kernel_static_checker.py, same ids) and of
// the backend requirements. The code_bypass shapes that need the block structure (try/except,
// pass) are checked in code_bypass.cpp.

#include "runtime/eval/static/pattern_table.hpp"

namespace kbrl::eval::static_impl {

namespace {

constexpr auto forbid = pattern_kind::forbid;
constexpr auto suspect = pattern_kind::suspect;
constexpr auto require = pattern_kind::require;
constexpr auto in_code = scope::code;
constexpr auto in_kernel = scope::kernel;
constexpr auto as_written = scope::written;

// Names of PyTorch compute ops (KernelBench's list, plus reductions and a few more).
#define KBRL_TORCH_OPS                                                                            \
  "mm|bmm|matmul|einsum|addmm|addbmm|baddbmm|addmv|mv|dot|vdot|tensordot|inner|outer|kron|"     \
  "conv1d|conv2d|conv3d|conv_transpose1d|conv_transpose2d|conv_transpose3d|convolution|conv|"    \
  "avg_pool1d|avg_pool2d|avg_pool3d|max_pool1d|max_pool2d|max_pool3d|"                           \
  "adaptive_avg_pool1d|adaptive_avg_pool2d|adaptive_avg_pool3d|"                                 \
  "adaptive_max_pool1d|adaptive_max_pool2d|adaptive_max_pool3d|"                                 \
  "relu|relu_|hardtanh|elu|selu|celu|leaky_relu|prelu|rrelu|gelu|softsign|softplus|softmax|"     \
  "log_softmax|tanh|sigmoid|hardsigmoid|hardswish|silu|mish|logsigmoid|"                         \
  "batch_norm|group_norm|layer_norm|instance_norm|rms_norm|normalize|linear|bilinear|"           \
  "cross_entropy|nll_loss|kl_div|mse_loss|l1_loss|smooth_l1_loss|huber_loss|"                    \
  "triplet_margin_loss|margin_ranking_loss|hinge_embedding_loss|cosine_similarity|"              \
  "cosine_embedding_loss|pairwise_distance|cdist|logsumexp|clamp|clip|dropout|cumsum|cumprod|"   \
  "sum|mean|amax|amin|argmax|argmin|max|min|prod|std|var|norm|sort|topk|"                        \
  "scaled_dot_product_attention"

const pattern_def defs[] = {
  // -- code_bypass (KernelBench) --
  {"code_bypass", in_code, forbid, "suppress", R"re(\bsuppress\s*\()re",
   "contextlib.suppress swallows errors like try/except"},
  {"code_bypass", in_code, forbid, "__exit__", R"re(\bdef\s+__exit__\b)re",
   "a context manager's __exit__ can swallow errors"},

  // -- timing_event_patch (KernelBench) --
  {"timing_event_patch", in_code, forbid, "cuda.",
   R"re((?<![\w.])(?:torch\.)?cuda\.(?:Event|synchronize|current_stream|default_stream|)re"
   R"re(Stream)\b(?:\.\w+)*\s*=(?!=))re",
   "reassigns {m}: a patched CUDA timer fakes the speed-up"},
  {"timing_event_patch", in_code, forbid, "time.", R"re((?<![\w.])time\.\w+\s*=(?!=))re",
   "reassigns {m} of the time module"},
  {"timing_event_patch", in_code, forbid,
   "elapsed_time|synchronize|perf_counter|monotonic|time_ns|process_time|record|query|Event",
   R"re(\bself\s*\.\s*(?:record|query)\s*=(*SKIP)(*F)|)re"
   R"re(\.(?:elapsed_time|synchronize|perf_counter(?:_ns)?|monotonic(?:_ns)?|time_ns|)re"
   R"re(process_time(?:_ns)?|record|query|Event)\s*=(?!=))re",
   "reassigns the timing method {m}"},
  {"timing_event_patch", in_code, forbid, "testing.|timeit.|benchmark.",
   R"re((?<![\w.])(?:triton\.testing|timeit|torch\.utils\.benchmark)(?:\.\w+)+\s*=(?!=))re",
   "reassigns the benchmarking function {m}"},
  {"timing_event_patch", in_code, forbid, "setattr",
   R"re(\bsetattr\s*\(\s*(?:torch\.cuda(?:\.Event)?|cuda(?:\.Event)?|time|triton\.testing|)re"
   R"re(timeit)\s*,)re",
   "setattr on a timing module: {m}"},
  {"timing_event_patch", in_kernel, forbid, "EventElapsedTime|EventRecord",
   R"re(\b(?:cu|cuda|hip)Event(?:ElapsedTime|Record)\w*)re",
   "uses CUDA event timing ({m}) in the kernel source"},

  // -- thread_injection (KernelBench) --
  {"thread_injection", in_code, forbid, "threading|_thread|multiprocessing|asyncio",
   R"re(\b(?:threading|_thread|multiprocessing|asyncio)\b)re",
   "uses {m}: work can run outside the timed region"},
  {"thread_injection", in_code, forbid, "concurrent|PoolExecutor",
   R"re(\bconcurrent\.futures\b|\b\w*PoolExecutor\b)re",
   "uses {m}: work can run outside the timed region"},
  {"thread_injection", in_code, forbid, "os.", R"re(\bos\.(?:fork|forkpty|register_at_fork)\b)re",
   "forks the process ({m})"},
  {"thread_injection", in_kernel, forbid, "std::|pthread_create|fork|include",
   R"re(\bstd::(?:thread|jthread|async)\b|\bpthread_create\b|(?<![\w.>:])v?fork\s*\(|)re"
   R"re(#\s*include\s*[<"](?:thread|future|pthread\.h)[>"])re",
   "starts host threads or processes in the kernel source ({m})"},

  // -- lazy_eval (KernelBench) --
  {"lazy_eval", in_code, forbid, "_make_", R"re(\b_make_(?:wrapper_)?subclass\b)re",
   "creates a tensor subclass instance ({m}): lazy or fake results"},
  {"lazy_eval", in_code, forbid, "Tensor",
   R"re(\bclass\s+\w+\s*\([^:]*?\bTensor\b)re",
   "subclasses torch.Tensor: lazy or fake results"},
  {"lazy_eval", in_code, forbid, "__torch_", R"re(__torch_(?:function|dispatch)__)re",
   "overrides {m}: tensor operations can be faked"},
  {"lazy_eval", in_code, forbid,
   "__new__|TorchFunctionMode|TorchDispatchMode|overrides|_python_dispatch|FakeTensor|"
   "fake_tensor|as_subclass",
   R"re(\bTensor\.__new__\b|\b(?:TorchFunctionMode|TorchDispatchMode)\b|\btorch\.overrides\b|)re"
   R"re(\b_python_dispatch\b|\bFakeTensor\w*|\bfake_tensor\b|\.as_subclass\s*\()re",
   "uses {m}: lazy or fake tensors"},

  // -- stream_injection (KernelBench) --
  {"stream_injection", in_code, forbid, "cuda.",
   R"re(\bcuda\.(?:Stream|ExternalStream|stream|set_stream|StreamContext)\b)re",
   "uses {m}: work on another stream escapes the timing"},
  {"stream_injection", in_code, forbid, "Stream",
   R"re(\b(?:Stream|ExternalStream|StreamContext)\s*\()re",
   "creates a stream ({m}): work on another stream escapes the timing"},
  {"stream_injection", in_code, forbid, "wait_stream|record_stream|wait_event|set_stream",
   R"re(\.(?:wait_stream|record_stream|wait_event|set_stream)\s*\()re",
   "synchronises across streams ({m})"},
  {"stream_injection", in_kernel, forbid, "Stream|STREAM",
   R"re(\b(?:cu|cuda|hip)Stream(?:Create\w*|PerThread)\b|\b(?:cuda|hip)StreamNonBlocking\b|)re"
   R"re(\bCU_STREAM_NON_BLOCKING\b|\bgetStreamFromPool\b|\bsetCurrent(?:CUDA|HIP)Stream\b|)re"
   R"re(\bgetStreamFromExternal\b)re",
   "uses a non-default stream in the kernel source ({m})"},

  // -- precision_downgrade (KernelBench) --
  {"precision_downgrade", in_code, forbid, ".half|.bfloat16", R"re(\.(?:half|bfloat16)\s*\()re",
   "casts with {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid,
   "float16|half|bfloat16|float8|chalf|HalfTensor|BFloat16Tensor",
   R"re(\btorch\.(?:float16|half|bfloat16|float8_\w+|chalf)\b|\b(?:Half|BFloat16)Tensor\b)re",
   "uses {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "tl.", R"re(\btl\.(?:float16|bfloat16|float8\w*)\b)re",
   "uses {m} in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "autocast|GradScaler|amp",
   R"re(\b(?:autocast|GradScaler)\b|\b(?:cuda|torch)\.amp\b)re",
   "uses mixed precision ({m}) in an fp32 problem"},
  {"precision_downgrade", in_code, forbid, "allow_tf32", R"re((?<![\w.])allow_tf32\s*=\s*True\b)re",
   "asks for TF32 ({m}) in an fp32 problem"},
  {"precision_downgrade", in_kernel, forbid, "half|bfloat16|fp8",
   R"re(\b__half2?\b|\bhalf2\b|\b__nv_bfloat16\w*|\bnv_bfloat16\b|\b__nv_fp8\w*|)re"
   R"re(\b__floats?2(?:half|bfloat16)\w*|\b(?:static_cast|)re"
   R"re(reinterpret_cast)\s*<\s*(?:const\s+)?(?:__)?half\b|\bhalf\s+[A-Za-z_]\w*\s*(?:=|;|\[))re",
   "uses half/bfloat16 types ({m}) in an fp32 problem"},
  {"precision_downgrade", in_kernel, forbid,
   "Half|BFloat16|Float16|half_t|bfloat16_t|tk::half|tf32|__h",
   R"re(\b(?:at|c10|torch)::(?:Half|BFloat16|kHalf|kBFloat16|kFloat16)\b|\bk(?:Half|BFloat16|)re"
   R"re(Float16)\b|\b(?:half_t|bfloat16_t)\b|\btk::half\b|\bwmma::precision::tf32\b|)re"
   R"re(\b__float_to_tf32\b|\btf32\b|\b__h(?:add|sub|mul|fma|div)2?\w*)re",
   "computes in reduced precision ({m}) in an fp32 problem"},

  {"precision_downgrade", in_kernel, forbid, "f16|bf16|tf32|e4m3|e5m2",
   R"re(\b(?:cvt|mma|wgmma|fma|add|sub|mul|ld|st|mov|ex2|max|min)(?:\.\w+)*?)re"
   R"re(\.(?:f16|f16x2|bf16|bf16x2|tf32|e4m3|e5m2)\b)re",
   "computes in reduced precision in inline PTX ({m}) in an fp32 problem"},

  // -- pytorch_wrap (KernelBench) --
  {"pytorch_wrap", in_code, forbid, "nn.",
   R"re((?<![\w.])(?:torch\.)?nn\.(?!(?:Module|Parameter|ParameterList|ParameterDict|ModuleList|)re"
   R"re(ModuleDict|init|parameter|functional|Buffer)\b)[A-Za-z_]\w*)re",
   "uses the torch.nn layer {m} instead of a kernel"},

  // -- torch_computation_ops (KernelBench) --
  {"torch_computation_ops", in_code, forbid, "torch.",
   "(?<![\\w.])torch\\.(?:" KBRL_TORCH_OPS ")\\b(?!\\s*=)",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "functional.|F.",
   R"re((?<![\w.])(?:torch\.nn\.functional|nn\.functional|F)\.\w+\s*\()re",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "torch.",
   R"re((?<![\w.])torch\.(?:linalg|fft|special)\.\w+|(?<![\w.])torch\.ops\.aten\b|)re"
   R"re((?<![\w.])torch\.compile\b)re",
   "uses the PyTorch op {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "matmul|mm|einsum|softmax|relu|gelu|sigmoid|tanh|conv",
   R"re(\btorch\s*\.\s*ops(?:\s*\.\s*\w+)+\s*\((*SKIP)(*F)|\.(?:matmul|mm|bmm|addmm|baddbmm|)re"
   R"re(einsum|softmax|log_softmax|relu|gelu|sigmoid|tanh|conv2d)\s*\()re",
   "uses the PyTorch tensor method {m} instead of a kernel"},
  {"torch_computation_ops", in_code, forbid, "@", R"re((?<=[\w)\]])[ \t]*@[ \t]*[\w(])re",
   "uses the @ matrix product instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "torch::|at::",
   "\\b(?:torch|at)::(?:" KBRL_TORCH_OPS ")\\s*\\(|\\bat::native::\\w+|\\bat::cuda::blas::\\w+",
   "the kernel source calls the library op {m} instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "blas|BLAS|cudnn|miopen",
   R"re(\b(?:cublas|cublasLt|cudnn|hipblas|hipblasLt|rocblas|miopen)\w*\s*\()re",
   "the kernel source calls the library function {m} instead of a kernel"},
  {"torch_computation_ops", in_kernel, forbid, "matmul|mm|softmax|relu|conv",
   R"re(\.(?:matmul|mm|bmm|addmm|baddbmm|softmax|relu|conv2d)\s*\()re",
   "the kernel source calls the tensor method {m} instead of a kernel"},

  // -- backend requirements (KernelBench's *_impl, kbrl's hip_impl) --
  {"cuda_impl", in_kernel, require, "__global__", R"re(\b__global__\b)re",
   "no __global__ kernel in the C++/CUDA source strings", 0},
  {"cuda_impl", in_code, require, "load",
   R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re",
   "the CUDA source is never compiled with torch.utils.cpp_extension.load_inline/load", 1},
  {"cuda_impl", in_kernel, require, "<<<|LaunchKernel|LaunchCooperativeKernel",
   R"re(<<<|\bcu(?:da)?Launch(?:Cooperative)?Kernel\w*\s*\()re",
   "no kernel launch (<<<...>>> or cudaLaunchKernel) in the C++/CUDA source strings", 2},
  {"hip_impl", in_kernel, require, "__global__", R"re(\b__global__\b)re",
   "no __global__ kernel in the C++/HIP source strings", 0},
  {"hip_impl", in_code, require, "load",
   R"re((?:(?<![\w.])|(?<=cpp_extension\.))load(?:_inline)?\s*\()re",
   "the HIP source is never compiled with torch.utils.cpp_extension.load_inline/load", 1},
  {"hip_impl", in_kernel, require, "<<<|LaunchKernel",
   R"re(<<<|\bhip(?:Module)?LaunchKernel\w*\s*\()re",
   "no kernel launch (<<<...>>> or hipLaunchKernelGGL) in the C++/HIP source strings", 2},
  {"triton_impl", in_code, require, "triton.", R"re(@\s*triton\.(?:jit|autotune)\b)re",
   "no @triton.jit or @triton.autotune kernel", 0},
  {"triton_impl", in_code, require, "tl.",
   R"re(\btl\.\w+)re", "no tl.* operations in the Triton code", 1},
  {"tk_impl", in_kernel, require, "warp",
   R"re(\bkittens::warp(?:group)?\b|::warpgroup::|::warp::|\bwarpgroup::|\bwarp::)re",
   "no ThunderKittens warp/warpgroup code (kittens::warp, warpgroup::)", 0},
  {"tk_impl", in_kernel, require, "st_|rt_", R"re((?:kittens::)?\b(?:st|rt)_\w+\s*<[^>]+>)re",
   "no ThunderKittens tile declarations (st_*<...>, rt_*<...>)", 1},
  {"cute_impl", in_kernel, require, "cute|cutlass",
   R"re(\bcute::|\bcutlass::|\busing\s+namespace\s+(?:cute|cutlass)\b|)re"
   R"re(#\s*include\s*[<"](?:cute|cutlass)/)re",
   "no cute:: or cutlass:: code", 0},
  {"cute_impl", in_code, require, "cutlass", R"re(\b(?:from|import)\s+cutlass\b)re",
   "no cute:: or cutlass:: code", 0},
  {"tilelang_impl", in_code, require, "T.prim_func", R"re(@\s*T\.prim_func\b)re",
   "no @T.prim_func kernel", 0},

};

#undef KBRL_TORCH_OPS

} // namespace

pattern_list kernelbench_patterns() {
  return {defs, sizeof defs / sizeof defs[0]};
}

} // namespace kbrl::eval::static_impl
