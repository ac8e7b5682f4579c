"""The comparison's figures in two GPU passes instead of a dozen torch kernels per chunk.

compare.py's statistics over an output of float32, bfloat16 or float16 on a CUDA device come
from two kernels of our own (plus two one-block reductions) and one synchronisation:

  pass 1 reads the reference output: its scale (max |value|) and how many values are not finite;
  pass 2 reads both outputs: the figures compare.py reports (max, sum and sum of squares of the
         differences, the sum of squares of the reference, each side's lowest and highest
         value), how many elements fail KernelBench's allclose, and how many fail the strict
         elementwise test with the floor that pass 1's scale gives.

Every elementwise step is the one torch runs, with the same rounding (no fused multiply-add:
--fmad=false and explicit _rn intrinsics): KernelBench's allclose is torch.isclose's
`|self - other| <= atol + |rtol * other|` in the output's own dtype (for bfloat16 and float16,
each step computed in float and rounded to the dtype, as torch's CUDA kernels do with a
scalar); the strict test is the same on the values widened to float32 with the floor scaled by
the output. Minima, maxima and the verdicts are therefore exactly the chunked path's; the sums
are float64 sums in another order (they agree to about 1e-15 relative).

When an output holds NaN or infinities, or a difference overflows, the caller takes the chunked
torch path instead: those rules are compare.py's, written once. So does every other case
(complex or float64 outputs, non-contiguous tensors, a CPU tensor, no NVRTC), and any failure
here turns this path off for the process and says so once.

The kernels are compiled in memory by NVRTC and loaded through the driver API (ctypes), so
nothing is read from a cache a candidate's process could write. KBRL_EVAL_FUSED_COMPARE=0
turns the path off."""

import ctypes
import glob
import os
import sys
import threading

import torch

THREADS = 256
UNROLL = 4
BLOCKS_PER_SM = 8
FIGURES = 11  # per block in pass 2, in the order of figures_pass's v[] and Figures' fields

# the constants above reach the kernels as macros: one value for both sides
_SOURCE = "#define THREADS %d\n#define UNROLL %d\n#define FIGURES %d\n" % (
    THREADS, UNROLL, FIGURES) + r"""
typedef unsigned long long u64;

__device__ __forceinline__ bool finite(float x) {
  return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ double pos_inf() { return __longlong_as_double(0x7ff0000000000000ll); }

// loads widen to float exactly; round_native rounds a float result to the output's dtype as
// torch's CUDA kernels do (round to nearest even)
struct F32 {
  static __device__ __forceinline__ float load(const void* p, u64 i) {
    return ((const float*)p)[i];
  }
  static __device__ __forceinline__ float round_native(float x) { return x; }
};
struct BF16 {
  static __device__ __forceinline__ float load(const void* p, u64 i) {
    return __uint_as_float(((unsigned)((const unsigned short*)p)[i]) << 16);
  }
  static __device__ __forceinline__ float round_native(float x) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return __uint_as_float(((unsigned)h) << 16);
  }
};
struct F16 {
  static __device__ __forceinline__ float load(const void* p, u64 i) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(((const unsigned short*)p)[i]));
    return f;
  }
  static __device__ __forceinline__ float round_native(float x) {
    unsigned short h;
    float f;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
};

enum { SUM = 0, LOW = 1, HIGH = 2 };

__device__ __forceinline__ double combine(double a, double b, int op) {
  return op == SUM ? __dadd_rn(a, b) : (op == LOW ? fmin(a, b) : fmax(a, b));
}
__device__ __forceinline__ double identity(int op) {
  return op == SUM ? 0.0 : (op == LOW ? pos_inf() : -pos_inf());
}

// the block's combination of one value per thread, in a fixed order (deterministic); valid in
// thread 0
__device__ double block_reduce(double v, int op) {
  __shared__ double per_warp[THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, o), op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // per_warp is reused by the next call
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < THREADS / 32 ? per_warp[lane] : identity(op);
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, o), op);
  }
  return v;
}

// pass 1: per block, max |reference| over its finite values, and how many are not finite
template <typename T>
__device__ void scale_pass(const void* e, u64 n, double* part) {
  float top = 0.0f;
  u64 nonfinite = 0;
  const u64 stride = (u64)gridDim.x * THREADS;
  for (u64 base = (u64)blockIdx.x * THREADS + threadIdx.x; base < n; base += stride * UNROLL) {
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const u64 i = base + k * stride;
      if (i < n) {
        const float x = T::load(e, i);
        if (finite(x)) top = fmaxf(top, fabsf(x)); else ++nonfinite;
      }
    }
  }
  const double a = block_reduce((double)top, HIGH);
  const double b = block_reduce((double)nonfinite, SUM);
  if (threadIdx.x == 0) { part[2 * blockIdx.x] = a; part[2 * blockIdx.x + 1] = b; }
}

// pass 2: the figures, with the strict floor from pass 1 (out[2])
template <typename T>
__device__ void figures_pass(const void* e, const void* g, u64 n, float kb_atol, float kb_rtol,
                             float strict_rtol, const double* out, double* part) {
  const float floor_abs = (float)out[2];
  const float inf = __int_as_float(0x7f800000);
  float e_lo = inf, e_hi = -inf, g_lo = inf, g_hi = -inf, d_max = 0.0f;
  double d_sum = 0.0, d_sq = 0.0, e_sq = 0.0;
  u64 nonfinite = 0, kb_fail = 0, strict_fail = 0;
  const u64 stride = (u64)gridDim.x * THREADS;
  for (u64 base = (u64)blockIdx.x * THREADS + threadIdx.x; base < n; base += stride * UNROLL) {
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const u64 i = base + k * stride;
      if (i >= n) continue;
      const float x = T::load(e, i), y = T::load(g, i);
      const float d = fabsf(__fsub_rn(x, y));
      if (!(finite(x) && finite(y) && finite(d))) { ++nonfinite; continue; }
      e_lo = fminf(e_lo, x); e_hi = fmaxf(e_hi, x);
      g_lo = fminf(g_lo, y); g_hi = fmaxf(g_hi, y);
      d_max = fmaxf(d_max, d);
      const double dd = (double)d, xd = (double)x;
      d_sum = __dadd_rn(d_sum, dd);
      d_sq = __dadd_rn(d_sq, __dmul_rn(dd, dd));
      e_sq = __dadd_rn(e_sq, __dmul_rn(xd, xd));
      // torch.isclose in the output's dtype: atol + |rtol * other| >= |self - other|
      const float kb_allowed =
          T::round_native(__fadd_rn(kb_atol, fabsf(T::round_native(__fmul_rn(y, kb_rtol)))));
      const float kb_diff = fabsf(T::round_native(__fsub_rn(x, y)));
      if (!(x == y || (finite(kb_diff) && kb_diff <= kb_allowed))) ++kb_fail;
      // the strict elementwise test, on the widened values
      if (!(d <= __fadd_rn(fabsf(__fmul_rn(y, strict_rtol)), floor_abs))) ++strict_fail;
    }
  }
  const double v[FIGURES] = {block_reduce(e_lo, LOW), block_reduce(e_hi, HIGH),
                        block_reduce(g_lo, LOW), block_reduce(g_hi, HIGH),
                        block_reduce(d_max, HIGH), block_reduce(d_sum, SUM),
                        block_reduce(d_sq, SUM), block_reduce(e_sq, SUM),
                        block_reduce((double)nonfinite, SUM), block_reduce((double)kb_fail, SUM),
                        block_reduce((double)strict_fail, SUM)};
  if (threadIdx.x == 0)
    for (int k = 0; k < FIGURES; ++k) part[FIGURES * blockIdx.x + k] = v[k];
}

#define PASSES(NAME, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS)                                      \
  scale_##NAME(const void* e, u64 n, double* part) { scale_pass<T>(e, n, part); }            \
  extern "C" __global__ void __launch_bounds__(THREADS)                                      \
  figures_##NAME(const void* e, const void* g, u64 n, float kb_atol, float kb_rtol,           \
                 float strict_rtol, const double* out, double* part) {                       \
    figures_pass<T>(e, g, n, kb_atol, kb_rtol, strict_rtol, out, part);                      \
  }
PASSES(f32, F32)
PASSES(bf16, BF16)
PASSES(f16, F16)

// one block: the per-block parts (fields per block, each combined by its op) into out[first..]
__device__ void reduce_parts(const double* part, unsigned blocks, int fields, const int* ops,
                             double* out) {
  for (int f = 0; f < fields; ++f) {
    double v = identity(ops[f]);
    for (unsigned b = threadIdx.x; b < blocks; b += THREADS)
      v = combine(v, part[b * fields + f], ops[f]);
    v = block_reduce(v, ops[f]);
    if (threadIdx.x == 0) out[f] = v;
  }
}

// out[0] scale, out[1] non-finite reference values, out[2] the strict floor as the float torch
// adds (float(floor * scale))
extern "C" __global__ void __launch_bounds__(THREADS)
reduce_scale(const double* part, unsigned blocks, double floor, double* out) {
  const int ops[2] = {HIGH, SUM};
  reduce_parts(part, blocks, 2, ops, out);
  if (threadIdx.x == 0) out[2] = (double)__double2float_rn(__dmul_rn(floor, out[0]));
}

extern "C" __global__ void __launch_bounds__(THREADS)
reduce_figures(const double* part, unsigned blocks, double* out) {
  const int ops[FIGURES] = {LOW, HIGH, LOW, HIGH, HIGH, SUM, SUM, SUM, SUM, SUM, SUM};
  reduce_parts(part, blocks, FIGURES, ops, out + 3);
}
"""

_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


class Figures:
    """What the two passes found over one output (all finite: see `usable`)."""

    def __init__(self, values):
        (self.scale, self.reference_nonfinite, self.floor_abs, self.ref_lo, self.ref_hi,
         self.got_lo, self.got_hi, self.diff_max, self.diff_sum, self.diff_sq, self.ref_sq,
         nonfinite, kb_fail, strict_fail) = values
        self.nonfinite = int(nonfinite) + int(self.reference_nonfinite)
        self.kernelbench_failures = int(kb_fail)
        self.strict_failures = int(strict_fail)

    @property
    def usable(self):
        """False when a value or a difference was not finite: compare.py's own rules decide."""
        return self.nonfinite == 0


class _Unavailable(Exception):
    pass


def _library(names, loaded_hint, extra_dirs):
    """A ctypes handle on the first library found: one this process already loaded (matching
    loaded_hint), then the directories given, then the loader's search path."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1] if line.strip() else ""
                if loaded_hint in os.path.basename(p) and p not in paths:
                    paths.append(p)
    except OSError:
        pass
    for d in extra_dirs:
        paths += sorted(glob.glob(os.path.join(d, loaded_hint + "*")), reverse=True)
    paths += list(names)
    errors = []
    for p in paths:
        try:
            return ctypes.CDLL(p)
        except OSError as e:
            errors.append(str(e))
    raise _Unavailable("%s not found (%s)" % (loaded_hint, "; ".join(errors[-2:])))


def _nvrtc_dirs():
    """Where NVRTC lies beside torch: pip's nvidia-* packages, torch/lib, the CUDA toolkit."""
    dirs = []
    torch_dir = os.path.dirname(torch.__file__)
    site = os.path.dirname(torch_dir)
    dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
    dirs.append(os.path.join(torch_dir, "lib"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            dirs += [os.path.join(home, "lib64"), os.path.join(home, "lib")]
    return dirs


class _Kernels:
    """The compiled module on one device: its kernels (two passes per dtype, two reductions)
    and a launcher."""

    def __init__(self, device):
        self.device = device
        self.cuda = _library(["libcuda.so.1", "libcuda.so"], "libcuda.so", [])
        nvrtc = _library(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                          "libnvrtc.so"], "libnvrtc.so", _nvrtc_dirs())
        major, minor = torch.cuda.get_device_capability(device)
        self.sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        image = self._compile(nvrtc, major, minor)
        torch.empty(1, device=device)  # the device's primary context current on this thread
        ctx = ctypes.c_void_p()
        self._check(self.cuda.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise _Unavailable("no current CUDA context")
        module = ctypes.c_void_p()
        self._check(self.cuda.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        self.functions = {}
        names = ["reduce_scale", "reduce_figures"] + [
            "%s_%s" % (p, t) for p in ("scale", "figures") for t in _DTYPES.values()]
        for name in names:
            fn = ctypes.c_void_p()
            self._check(self.cuda.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
                        "cuModuleGetFunction(%s)" % name)
            self.functions[name] = fn

    @staticmethod
    def _compile(nvrtc, major, minor):
        """A CUBIN for this device's architecture (or PTX when NVRTC cannot write one)."""
        prog = ctypes.c_void_p()
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p

        def check(code, what):
            if code != 0:
                raise _Unavailable("%s: %s" % (what, nvrtc.nvrtcGetErrorString(code).decode()))

        check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), _SOURCE.encode(), b"kbrl_compare.cu",
                                       0, None, None), "nvrtcCreateProgram")
        try:
            cubin = hasattr(nvrtc, "nvrtcGetCUBIN")
            arch = ("--gpu-architecture=sm_%d%d" if cubin else
                    "--gpu-architecture=compute_%d%d") % (major, minor)
            opts = [arch.encode(), b"--fmad=false", b"--std=c++14"]
            code = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
            if code != 0:
                size = ctypes.c_size_t()
                nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                nvrtc.nvrtcGetProgramLog(prog, log)
                raise _Unavailable("NVRTC could not compile the comparison kernels: %s" %
                                   log.value.decode(errors="replace")[-400:])
            size = ctypes.c_size_t()
            get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin else
                             (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
            check(get_size(prog, ctypes.byref(size)), "nvrtc image size")
            image = ctypes.create_string_buffer(size.value)
            check(get(prog, image), "nvrtc image")
            return image
        finally:
            nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))

    def _check(self, code, what):
        if code != 0:
            text = ctypes.c_char_p()
            self.cuda.cuGetErrorString(code, ctypes.byref(text))
            raise _Unavailable("%s failed: %s" % (what, (text.value or b"?").decode()))

    def launch(self, name, blocks, args):
        """args: ctypes values, in the kernel's parameter order; on torch's current stream."""
        params = (ctypes.c_void_p * len(args))(
            *[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        stream = ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)
        self._check(self.cuda.cuLaunchKernel(self.functions[name], blocks, 1, 1, THREADS, 1, 1,
                                             0, stream, params, None), "cuLaunchKernel(%s)" % name)

    def figures(self, expected, got, kb_atol, kb_rtol, strict_rtol, floor):
        n = expected.numel()
        kind = _DTYPES[expected.dtype]
        blocks = max(1, min(self.sm_count * BLOCKS_PER_SM, -(-n // (THREADS * UNROLL))))
        part = torch.empty(blocks * FIGURES, dtype=torch.float64, device=self.device)
        out = torch.empty(3 + FIGURES, dtype=torch.float64, device=self.device)
        e_ptr, g_ptr = ctypes.c_void_p(expected.data_ptr()), ctypes.c_void_p(got.data_ptr())
        part_ptr, out_ptr = ctypes.c_void_p(part.data_ptr()), ctypes.c_void_p(out.data_ptr())
        count, nblocks = ctypes.c_ulonglong(n), ctypes.c_uint(blocks)
        self.launch("scale_" + kind, blocks, [e_ptr, count, part_ptr])
        self.launch("reduce_scale", 1, [part_ptr, nblocks, ctypes.c_double(floor), out_ptr])
        self.launch("figures_" + kind, blocks, [
            e_ptr, g_ptr, count, ctypes.c_float(kb_atol), ctypes.c_float(kb_rtol),
            ctypes.c_float(strict_rtol), out_ptr, part_ptr])
        self.launch("reduce_figures", 1, [part_ptr, nblocks, out_ptr])
        return Figures(out.tolist())  # the one synchronisation


_lock = threading.Lock()
_kernels = {}      # device index -> _Kernels
_disabled = None   # why this path is off in this process (None: not decided yet, "": on)


def _log(message):
    print("kbrl evaluation worker: " + message, file=sys.stderr, flush=True)


def enabled():
    return os.environ.get("KBRL_EVAL_FUSED_COMPARE", "1") != "0" and not _disabled


def _kernels_for(device):
    global _disabled
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _lock:
        if index not in _kernels:
            try:
                _kernels[index] = _Kernels(torch.device("cuda", index))
                _disabled = ""
            except Exception as e:  # noqa: BLE001 - any failure: the chunked path, said once
                _disabled = str(e)
                _log("the fused output comparison is off (%s); outputs are compared with torch "
                     "kernels, chunk by chunk" % _disabled)
                return None
        return _kernels[index]


def applies(expected, got):
    """Whether the two passes can take this pair (else compare.py's chunked path does)."""
    return (enabled() and expected.is_cuda and got.is_cuda and expected.device == got.device
            and expected.dtype in _DTYPES and got.dtype == expected.dtype
            and expected.shape == got.shape
            and expected.is_contiguous() and got.is_contiguous())


def prepare(device):
    """Compiles and loads the kernels now (about 0.2 s) rather than at the first comparison."""
    if enabled() and device.type == "cuda":
        _kernels_for(device)


def figures(expected, got, kb_atol, kb_rtol, strict_rtol, floor):
    """Figures of the pair (see the module's docstring), or None when this path is off or
    failed (the caller compares chunk by chunk)."""
    global _disabled
    if not applies(expected, got):
        return None
    k = _kernels_for(expected.device)
    if k is None:
        return None
    try:
        return k.figures(expected, got, kb_atol, kb_rtol, strict_rtol, floor)
    except Exception as e:  # noqa: BLE001
        _disabled = str(e)
        _log("the fused output comparison failed and is off from now on (%s)" % e)
        return None
