// Runs the fused inference kernels (runtime/model/cuda/*_kernel.cuh) on the CPU through
// emulated_device.hpp and compares them with the libtorch compositions they replace (CPU
// libtorch): indexing, strides, cache positions, partial warps, q/k norm, GQA, in every element
// type. The kernels' real home is a GPU (test/test_fused_ops.cpp there); this catches their
// logic errors on a machine without one. Build and run: bash test/cuda_emulation/run.sh
// Exit status: the number of failed checks.

#include "emulated_device.hpp"

#include "runtime/model/cuda/add_rms_norm_kernel.cuh"
#include "runtime/model/cuda/decode_attention_group_kernel.cuh"
#include "runtime/model/cuda/decode_attention_kernel.cuh"
#include "runtime/model/cuda/decode_attention_mma_kernel.cuh"
#include "runtime/model/cuda/decode_linear_kernel.cuh"
#include "runtime/model/cuda/logprob_kernel.cuh"
#include "runtime/model/cuda/rope_qkv_kernel.cuh"
#include "runtime/model/cuda/sample_kernel.cuh"
#include "runtime/model/cuda/swiglu_kernel.cuh"
#include "runtime/model/cuda/train_kernels.cuh"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace k = kbrl::model::cuda;

namespace {

int failures = 0, checks = 0;

void check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("FAIL %s\n", what.c_str());
  }
}

void check_close(const at::Tensor& got, const at::Tensor& want, double rel, const std::string& what) {
  if (got.sizes() != want.sizes()) {
    check(false, what + ": shapes differ");
    return;
  }
  const auto g = got.to(at::kDouble), w = want.to(at::kDouble);
  const double scale = std::max(w.abs().max().item<double>(), 1e-6);
  const double diff = (g - w).abs().max().item<double>();
  check(diff <= rel * scale, what + ": max |diff| " + std::to_string(diff) + " > "
                               + std::to_string(rel * scale));
}

void check_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  check(got.sizes() == want.sizes() && at::equal(got, want), what + ": not equal");
}

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, at::ScalarType t) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen, at::TensorOptions(at::kFloat)).to(t);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const auto wide = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  const auto normed = wide * at::rsqrt(wide.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // As kbrl's apply_rotary: `sin` carries rotate_half's sign ([-s, s]).
  // addcmul adds in float (CPU 1.13 has no half addcmul, so spelled out here).
  const auto product = x.roll(x.size(-1) / 2, -1).to(at::kFloat) * sin.unsqueeze(1).to(at::kFloat);
  return ((x * cos.unsqueeze(1)).to(at::kFloat) + product).to(x.scalar_type());
}

template <class T>
T* ptr(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

std::string name_of(at::ScalarType t) { return c10::toString(t); }

struct precision {
  at::ScalarType dtype;
  double rel;
};
// The host's 1/sqrt differs from the device's rsqrtf in the last bits and CPU libtorch's
// reduced-precision silu rounds inside: float32 to 1e-6, bf16 / fp16 to two units in the last
// place.
const std::vector<precision> precisions{
  {at::kFloat, 1e-6}, {at::kBFloat16, 1.0 / 64}, {at::kHalf, 1.0 / 512}};

/// add_rms_norm_kernel<T, items> over `rows` rows, as add_rms_norm.cu launches it.
template <class T>
void run_add_rms_norm(int items, const T* x, const T* delta, T* residual, T* normed,
                      const T* w, int64_t rows, int64_t dim, float eps) {
  emu::launch(static_cast<unsigned>(rows), k::add_rms_norm_threads(dim), [&] {
    k::for_add_rms_norm_items(items, [&](auto n) {
      k::add_rms_norm_kernel<T, decltype(n)::value>(x, delta, residual, normed, w, dim, eps);
    });
  });
}

/// The version the launcher picks for `dim` and, where that is not it already, the general one
/// (items 0): both must give the same values.
template <class T>
void add_rms_norm_case(at::ScalarType t, double rel, int64_t rows, int64_t dim, bool with_delta) {
  const int picked = k::add_rms_norm_items(dim, k::add_rms_norm_threads(dim));
  for (int items : picked == 0 ? std::vector<int>{0} : std::vector<int>{picked, 0}) {
    const std::string what = "add_rms_norm " + name_of(t) + " rows " + std::to_string(rows)
                             + " dim " + std::to_string(dim) + " items "
                             + std::to_string(items) + (with_delta ? " +delta" : "");
    const auto x = randn({rows, dim}, dim, t) * 3;
    const auto delta = randn({rows, dim}, dim + 1, t);
    const auto w = (randn({dim}, dim + 2, at::kFloat) * 0.2 + 1).to(t);
    auto residual = at::full({rows, dim}, 7.0, at::TensorOptions(t)); // must be overwritten
    auto normed = at::empty({rows, dim}, at::TensorOptions(t));
    const float eps = 1e-6f;
    run_add_rms_norm<T>(items, ptr<T>(x), with_delta ? ptr<T>(delta) : nullptr,
                        with_delta ? ptr<T>(residual) : nullptr, ptr<T>(normed), ptr<T>(w),
                        rows, dim, eps);
    const auto h = with_delta ? x + delta : x;
    if (with_delta)
      check_equal(residual, h, what + " residual");
    check_close(normed, rms_norm(h, w, eps), rel, what + " normed");
    // In place: the residual written over x.
    if (with_delta) {
      auto xi = x.clone();
      run_add_rms_norm<T>(items, ptr<T>(xi), ptr<T>(delta), ptr<T>(xi), ptr<T>(normed),
                          ptr<T>(w), rows, dim, eps);
      check_equal(xi, h, what + " residual in place");
      check_close(normed, rms_norm(h, w, eps), rel, what + " normed in place");
    }
  }
}

template <class T>
void swiglu_case(at::ScalarType t, double rel, int64_t rows, int64_t width, unsigned max_blocks) {
  const std::string what = "swiglu " + name_of(t) + " rows " + std::to_string(rows) + " width "
                           + std::to_string(width) + " blocks <= " + std::to_string(max_blocks);
  const auto gu = randn({rows, 2 * width}, width, t) * 4;
  auto out = at::full({rows, width}, 7.0, at::TensorOptions(t));
  const int64_t total = rows * width;
  const int64_t wanted = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(wanted, max_blocks));
  emu::launch(blocks, 256, [&] { k::swiglu_kernel<T>(ptr<T>(gu), ptr<T>(out), rows, width); });
  const auto want = at::silu(gu.narrow(-1, 0, width).to(at::kFloat)).to(t)
                    * gu.narrow(-1, width, width);
  check_close(out, want, rel, what);
}

/// decode_linear_kernel<T, input> as decode_linear.cu launches it (with `threads` threads:
/// fewer than the row's chunks makes each thread take several), against at::linear in float32
/// of the same T values rounded to T (the kernel sums in another order: within rel).
template <class T>
void decode_linear_case(at::ScalarType t, double rel, int64_t in, int64_t out_f, bool with_bias,
                        bool swiglu, int threads) {
  const std::string what = "decode_linear " + name_of(t) + " in " + std::to_string(in) + " out "
                           + std::to_string(out_f) + (with_bias ? " +bias" : "")
                           + (swiglu ? " swiglu" : "") + " threads " + std::to_string(threads);
  const auto x = randn({swiglu ? 2 * in : in}, in + out_f, t) * 2;
  const auto w = randn({out_f, in}, in * out_f, t) * 0.1;
  const auto bias = randn({out_f}, out_f, t);
  auto out = at::full({out_f + 3}, 7.0, at::TensorOptions(t)); // 3 past the end stay untouched
  const auto row = swiglu ? at::silu(x.narrow(0, 0, in).to(at::kFloat)).to(t) * x.narrow(0, in, in)
                          : x;
  const auto want = at::linear(row.to(at::kFloat), w.to(at::kFloat),
                               with_bias ? bias.to(at::kFloat) : at::Tensor())
                      .to(t);
  // with 4 rows a block, with 8, and with 8 in the instance bounded at 512 threads (what
  // decode_linear.cu can launch): each thread adds its chunks in the same order, so all give
  // the same bits
  auto run = [&](auto input_constant, auto rows_constant, auto bound_constant, at::Tensor& into) {
    constexpr int rows = decltype(rows_constant)::value;
    const auto blocks = static_cast<unsigned>((out_f + rows - 1) / rows);
    emu::launch(blocks, static_cast<unsigned>(threads), [&] {
      k::decode_linear_kernel<T, decltype(input_constant)::value, rows,
                              decltype(bound_constant)::value>(
        ptr<T>(x), ptr<T>(w), with_bias ? ptr<T>(bias) : nullptr, ptr<T>(into), out_f, in, {},
        false);
    });
  };
  auto out8 = out.clone(), out8_512 = out.clone();
  using kind = k::decode_linear_input;
  auto run_all = [&](auto input_constant) {
    using rows = std::integral_constant<int, 8>;
    using bound = std::integral_constant<int, k::decode_linear_max_threads>;
    run(input_constant, std::integral_constant<int, 4>{}, bound{}, out);
    run(input_constant, rows{}, bound{}, out8);
    run(input_constant, rows{}, std::integral_constant<int, 512>{}, out8_512);
  };
  if (swiglu)
    run_all(std::integral_constant<kind, kind::swiglu>{});
  else
    run_all(std::integral_constant<kind, kind::plain>{});
  check_close(out.narrow(0, 0, out_f), want, rel, what);
  check_equal(out.narrow(0, out_f, 3), at::full({3}, 7.0, at::TensorOptions(t)),
              what + " past the end untouched");
  check_equal(out8, out, what + ": 8 rows a block, the same bits as 4");
  check_equal(out8_512, out, what + ": 8 rows, bounded at 512 threads, the same bits as 4");
}

/// decode_qkv_rope_kernel<T> (the q|k|v GEMV with RoPE and the cache write in its epilogue)
/// against what it replaces, decode_linear_kernel then rope_qkv_kernel (no q/k norm), on the same
/// inputs: q and the whole cache must be the same bits. `position` outside the cache writes
/// neither keys nor values.
/// With `normed`, x is a residual row and the one kernel normalises it itself (rms_normed
/// input), against add_rms_norm_kernel (no delta) before the two.
template <class T>
void qkv_rope_case(at::ScalarType t, int64_t heads, int64_t kv_heads, int64_t dim, int64_t in,
                   bool with_bias, int64_t position, int threads, bool normed = false) {
  const std::string what = "decode_qkv_rope " + name_of(t) + " heads " + std::to_string(heads)
                           + "/" + std::to_string(kv_heads) + " dim " + std::to_string(dim)
                           + " in " + std::to_string(in) + (with_bias ? " +bias" : "")
                           + " position " + std::to_string(position) + " threads "
                           + std::to_string(threads) + (normed ? " normed input" : "");
  const int64_t rows = (heads + 2 * kv_heads) * dim, max_len = 9;
  const auto residual = randn({in}, in + dim, t) * 2;
  const auto norm_weight = randn({in}, in + 1, t) * 0.5 + 1;
  const float eps = 1e-5f;
  auto x = residual;
  if (normed) {
    x = at::full({in}, 7.0, at::TensorOptions(t));
    run_add_rms_norm<T>(k::add_rms_norm_items(in, k::add_rms_norm_threads(in)), ptr<T>(residual),
                        nullptr, nullptr, ptr<T>(x), ptr<T>(norm_weight), 1, in, eps);
  }
  const auto w = randn({rows, in}, rows * in, t) * 0.1;
  const auto bias = randn({rows}, rows, t);
  const auto inv_freq = at::rand({dim / 2}) * 0.5;
  const auto angles = at::full({1}, static_cast<double>(position)).unsqueeze(-1) * inv_freq;
  const auto cos = at::cat({angles, angles}, -1).cos().to(t).contiguous();
  const auto sin = at::cat({angles.sin().neg(), angles.sin()}, -1).to(t).contiguous();
  const auto positions = at::full({1, 1}, position, at::TensorOptions(at::kLong));
  struct outputs {
    at::Tensor q, keys, values;
  };
  auto fresh = [&] {
    return outputs{at::full({1, heads, 1, dim}, 7.0, at::TensorOptions(t)),
                   randn({1, kv_heads, max_len, dim}, 3, t), randn({1, kv_heads, max_len, dim}, 4, t)};
  };
  auto destination = [&](outputs& o) {
    k::kv_destination kv;
    kv.keys = o.keys.data_ptr();
    kv.values = o.values.data_ptr();
    kv.batch_stride = o.keys.stride(0);
    kv.head_stride = o.keys.stride(1);
    kv.position_stride = o.keys.stride(2);
    kv.positions = positions.data_ptr<int64_t>();
    kv.position_limit = max_len;
    return kv;
  };
  k::qkv_shape s;
  s.batch = s.seq = 1;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = dim;
  s.row_stride = rows;
  const T* b = with_bias ? ptr<T>(bias) : nullptr;
  // the two kernels
  auto two = fresh();
  auto qkv = at::full({rows}, 7.0, at::TensorOptions(t));
  emu::launch(static_cast<unsigned>(rows / k::decode_linear_rows), static_cast<unsigned>(threads),
              [&] {
                k::decode_linear_kernel<T, k::decode_linear_input::plain>(
                  ptr<T>(x), ptr<T>(w), b, ptr<T>(qkv), rows, in, {}, false);
              });
  const auto kv_two = destination(two);
  emu::launch(static_cast<unsigned>(heads + 2 * kv_heads), k::warp_multiple(dim / 2, 1024), [&] {
    k::rope_qkv_kernel<T>(ptr<T>(qkv), ptr<T>(cos), ptr<T>(sin), nullptr, nullptr, 1e-6f,
                          ptr<T>(two.q), kv_two, s);
  });
  // the one
  auto one = fresh();
  const auto kv_one = destination(one);
  emu::launch(static_cast<unsigned>(rows / k::decode_linear_rows), static_cast<unsigned>(threads),
              [&] {
                using kind = k::decode_linear_input;
                if (normed)
                  k::decode_qkv_rope_kernel<T, kind::rms_normed>(
                    ptr<T>(residual), ptr<T>(w), b, ptr<T>(cos), ptr<T>(sin), ptr<T>(one.q),
                    kv_one, s, in, k::folded_norm<T>{ptr<T>(norm_weight), eps, 0.0f});
                else
                  k::decode_qkv_rope_kernel<T, kind::plain>(ptr<T>(x), ptr<T>(w), b, ptr<T>(cos),
                                                            ptr<T>(sin), ptr<T>(one.q), kv_one, s,
                                                            in, {});
              });
  check_equal(one.q, two.q, what + " q");
  check_equal(one.keys, two.keys, what + " keys");
  check_equal(one.values, two.values, what + " values");
  const bool written = position >= 0 && position < max_len;
  check(written != at::equal(one.keys, fresh().keys), what + " keys written where they belong");
}

/// The decode step's norms folded into its GEMVs, against the kernels they replace, on the same
/// inputs, the same bits: decode_linear_kernel with rms_normed input against add_rms_norm_kernel
/// (no delta) and then the plain GEMV; with add_to_out (plain or swiglu input) against the GEMV
/// and then add_rms_norm_kernel's residual add.
template <class T>
void folded_norm_case(at::ScalarType t, int64_t in, int64_t out_f, bool with_bias, int threads) {
  const std::string what = "folded norm " + name_of(t) + " in " + std::to_string(in) + " out "
                           + std::to_string(out_f) + (with_bias ? " +bias" : "") + " threads "
                           + std::to_string(threads);
  using kind = k::decode_linear_input;
  const float eps = 1e-6f;
  const auto norm_weight = randn({in}, in + 6, t) * 0.5 + 1;
  const auto w = randn({out_f, in}, in * out_f, t) * 0.1;
  const auto bias = randn({out_f}, out_f, t);
  const T* b = with_bias ? ptr<T>(bias) : nullptr;
  const auto blocks = static_cast<unsigned>((out_f + k::decode_linear_rows - 1)
                                            / k::decode_linear_rows);
  const int items = k::add_rms_norm_items(in, k::add_rms_norm_threads(in));
  // input normalised in the GEMV, for several rows: a sum of squares in another order often
  // rounds to the same float, so one row would seldom show a wrong order
  at::Tensor residual, two;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    residual = randn({in}, in + 5 + seed, t) * 3;
    auto normed = at::full({in}, 7.0, at::TensorOptions(t));
    run_add_rms_norm<T>(items, ptr<T>(residual), nullptr, nullptr, ptr<T>(normed),
                        ptr<T>(norm_weight), 1, in, eps);
    two = at::full({out_f}, 7.0, at::TensorOptions(t));
    auto one = two.clone();
    emu::launch(blocks, static_cast<unsigned>(threads), [&] {
      k::decode_linear_kernel<T, kind::plain>(ptr<T>(normed), ptr<T>(w), b, ptr<T>(two), out_f,
                                              in, {}, false);
    });
    emu::launch(blocks, static_cast<unsigned>(threads), [&] {
      k::decode_linear_kernel<T, kind::rms_normed>(ptr<T>(residual), ptr<T>(w), b, ptr<T>(one),
                                                   out_f, in, {ptr<T>(norm_weight), eps, 0.0f},
                                                   false);
    });
    check_equal(one, two, what + " rms_normed input, row " + std::to_string(seed));
  }
  // a spoiled norm weight must show: the check can fail
  const auto spoiled = norm_weight * 1.5;
  auto other = at::full({out_f}, 7.0, at::TensorOptions(t));
  emu::launch(blocks, static_cast<unsigned>(threads), [&] {
    k::decode_linear_kernel<T, kind::rms_normed>(ptr<T>(residual), ptr<T>(w), b, ptr<T>(other),
                                                 out_f, in, {ptr<T>(spoiled), eps, 0.0f}, false);
  });
  check(!at::equal(other, two), what + " a spoiled norm weight differs");

  // the residual add where the delta is made: out_f wide rows of the residual
  for (const bool swiglu : {false, true}) {
    const auto x = randn({swiglu ? 2 * in : in}, in + 7, t) * 2;
    const auto start = randn({out_f}, out_f + 8, t) * 4;
    auto delta = at::full({out_f}, 7.0, at::TensorOptions(t));
    auto run = [&](auto input, T* out, bool add) {
      emu::launch(blocks, static_cast<unsigned>(threads), [&] {
        k::decode_linear_kernel<T, decltype(input)::value>(ptr<T>(x), ptr<T>(w), b, out, out_f,
                                                           in, {}, add);
      });
    };
    auto summed = start.clone();
    if (swiglu) {
      run(std::integral_constant<kind, kind::swiglu>{}, ptr<T>(delta), false);
      run(std::integral_constant<kind, kind::swiglu>{}, ptr<T>(summed), true);
    } else {
      run(std::integral_constant<kind, kind::plain>{}, ptr<T>(delta), false);
      run(std::integral_constant<kind, kind::plain>{}, ptr<T>(summed), true);
    }
    auto want = at::full({out_f}, 7.0, at::TensorOptions(t));
    auto scratch = at::full({out_f}, 7.0, at::TensorOptions(t));
    run_add_rms_norm<T>(k::add_rms_norm_items(out_f, k::add_rms_norm_threads(out_f)),
                        ptr<T>(start), ptr<T>(delta), ptr<T>(want), ptr<T>(scratch),
                        ptr<T>(norm_weight), 1, out_f, eps);
    check_equal(summed, want, what + (swiglu ? " swiglu" : " plain") + " added to the residual");
  }
}

template <class T>
void rope_case(at::ScalarType t, double rel, int64_t batch, int64_t seq, int64_t heads,
               int64_t kv_heads, int64_t dim, bool normed, bool cached) {
  const std::string what = "rope_qkv " + name_of(t) + " batch " + std::to_string(batch) + " seq "
                           + std::to_string(seq) + " heads " + std::to_string(heads) + "/"
                           + std::to_string(kv_heads) + " dim " + std::to_string(dim)
                           + (normed ? " norm" : "") + (cached ? " cache" : "");
  const int64_t width = (heads + 2 * kv_heads) * dim;
  const auto qkv = randn({batch, seq, width}, dim, t);
  const auto pos = at::arange(seq, at::kLong).unsqueeze(0)
                   + 3 * at::arange(batch, at::kLong).unsqueeze(1) + 1;
  const auto inv_freq = at::rand({dim / 2}) * 0.5;
  const auto angles = pos.to(at::kFloat).unsqueeze(-1) * inv_freq;
  const auto both = at::cat({angles, angles}, -1);
  const auto cos = both.cos().to(t).contiguous();
  const auto sin = at::cat({angles.sin().neg(), angles.sin()}, -1).to(t).contiguous();
  const auto qn = (randn({dim}, 1, at::kFloat) * 0.2 + 1).to(t);
  const auto kn = (randn({dim}, 2, at::kFloat) * 0.2 + 1).to(t);
  const float eps = 1e-6f;
  const int64_t max_len = 3 * batch + seq + 2;
  // Slots 1 .. batch of a cache with one slot more on either side.
  auto cache_k = randn({batch + 2, kv_heads, max_len, dim}, 3, t);
  auto cache_v = randn({batch + 2, kv_heads, max_len, dim}, 4, t);
  auto ref_k = cache_k.clone(), ref_v = cache_v.clone();
  auto q = at::full({batch, heads, seq, dim}, 7.0, at::TensorOptions(t));
  auto fresh_k = at::full({batch, kv_heads, seq, dim}, 7.0, at::TensorOptions(t));
  auto fresh_v = at::full({batch, kv_heads, seq, dim}, 7.0, at::TensorOptions(t));
  k::kv_destination kv;
  const auto slot_k = cache_k.narrow(0, 1, batch), slot_v = cache_v.narrow(0, 1, batch);
  const auto& keys = cached ? slot_k : fresh_k;
  kv.keys = cached ? slot_k.data_ptr() : fresh_k.data_ptr();
  kv.values = cached ? slot_v.data_ptr() : fresh_v.data_ptr();
  kv.batch_stride = keys.stride(0);
  kv.head_stride = keys.stride(1);
  kv.position_stride = keys.stride(2);
  const auto pos_flat = pos.contiguous();
  kv.positions = cached ? pos_flat.data_ptr<int64_t>() : nullptr;
  kv.position_limit = max_len;
  k::qkv_shape s;
  s.batch = batch;
  s.seq = seq;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = dim;
  s.row_stride = width;
  emu::launch(static_cast<unsigned>(batch * seq * (heads + 2 * kv_heads)),
              k::warp_multiple(dim / 2, 1024), [&] {
                k::rope_qkv_kernel<T>(ptr<T>(qkv), ptr<T>(cos), ptr<T>(sin),
                                      normed ? ptr<T>(qn) : nullptr,
                                      normed ? ptr<T>(kn) : nullptr, eps, ptr<T>(q), kv, s);
              });
  // The composition.
  auto rq = qkv.narrow(-1, 0, heads * dim).reshape({batch, seq, heads, dim});
  auto rk = qkv.narrow(-1, heads * dim, kv_heads * dim).reshape({batch, seq, kv_heads, dim});
  auto rv = qkv.narrow(-1, (heads + kv_heads) * dim, kv_heads * dim)
              .reshape({batch, seq, kv_heads, dim});
  if (normed) {
    rq = rms_norm(rq, qn, eps);
    rk = rms_norm(rk, kn, eps);
  }
  rq = apply_rotary(rq.transpose(1, 2), cos, sin);
  rk = apply_rotary(rk.transpose(1, 2), cos, sin);
  rv = rv.transpose(1, 2);
  // Without the norm: the same roundings exactly, except that float32's last step is one fused
  // multiply-add in the kernel (as in libtorch's CUDA addcmul) and a multiply then an add here.
  const double r = normed ? 2 * rel : (t == at::kFloat ? 1e-6 : 0);
  auto compare = [&](const at::Tensor& got, const at::Tensor& want, const std::string& part) {
    if (r == 0)
      check_equal(got, want.contiguous(), what + " " + part);
    else
      check_close(got, want, r, what + " " + part);
  };
  compare(q, rq, "q");
  if (cached) {
    const auto where = pos.reshape({batch, 1, seq, 1}).expand({batch, kv_heads, seq, dim});
    ref_k.narrow(0, 1, batch).scatter_(2, where, rk);
    ref_v.narrow(0, 1, batch).scatter_(2, where, rv);
    compare(cache_k, ref_k, "key cache");
    check_equal(cache_v, ref_v, what + " value cache");
  } else {
    compare(fresh_k, rk, "keys");
    check_equal(fresh_v, rv.contiguous(), what + " values");
  }
}

/// decode attention against softmax(q k^T / sqrt(dim)) v in float64 over each row's positions
/// [0, position], reading a cache of `slots` rows from slot 1 on (strides of a real cache).
/// keys_per_split 0: the per-head kernel; else the grouped kernel with splits of that many keys,
/// or with `mma` the tensor-core kernel (__half and bfloat16 only).
template <class T>
void decode_attention_case(at::ScalarType t, double rel, int64_t batch, int64_t heads,
                           int64_t kv_heads, int64_t dim, int64_t key_len,
                           std::vector<int64_t> positions, int64_t keys_per_split = 0,
                           bool mma = false) {
  const std::string what = std::string(keys_per_split ? std::string(mma ? "decode_attention_mma"
                                                                        : "decode_attention_grouped")
                                                            + " (split "
                                                            + std::to_string(keys_per_split) + ") "
                                                      : "decode_attention ")
                           + name_of(t) + " batch " + std::to_string(batch)
                           + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads)
                           + " dim " + std::to_string(dim) + " keys " + std::to_string(key_len);
  const int64_t max_len = key_len + 9;
  const auto cache_k = randn({batch + 2, kv_heads, max_len, dim}, 11 + dim, t);
  const auto cache_v = randn({batch + 2, kv_heads, max_len, dim}, 12 + dim, t);
  const auto keys = cache_k.narrow(0, 1, batch), values = cache_v.narrow(0, 1, batch);
  const auto q = randn({batch, heads, 1, dim}, 13 + dim, t) * 2;
  const auto pos = at::tensor(positions, at::kLong);
  k::decode_attention_shape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.kv_heads = kv_heads;
  shape.head_dim = dim;
  shape.key_len = key_len;
  const int64_t split_keys = keys_per_split ? keys_per_split : k::decode_keys_per_block;
  shape.splits = (key_len + split_keys - 1) / split_keys;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  k::decode_kv kv;
  kv.keys = keys.data_ptr();
  kv.values = values.data_ptr();
  kv.batch_stride = keys.stride(0);
  kv.head_stride = keys.stride(1);
  kv.position_stride = keys.stride(2);
  auto partials = at::full({batch * heads * shape.splits, dim + 2}, 7.0, at::kFloat);
  auto out = at::full({batch, heads, 1, dim}, 7.0, at::TensorOptions(t));
  if (keys_per_split == 0)
    emu::launch(static_cast<unsigned>(batch * heads * shape.splits), k::decode_keys_per_block,
                [&] {
                  k::decode_attention_partial_kernel<T>(ptr<T>(q), kv, pos.data_ptr<int64_t>(),
                                                        partials.data_ptr<float>(), shape);
                });
  else if (mma) {
    if constexpr (!std::is_same_v<T, float>)
      emu::launch(static_cast<unsigned>(batch * kv_heads * shape.splits),
                  32 * k::decode_mma_warps, [&] {
                    k::decode_mma_kernel_for<T>(dim)(ptr<T>(q), kv, pos.data_ptr<int64_t>(),
                                                     partials.data_ptr<float>(), shape,
                                                     keys_per_split);
                  });
  } else
    emu::launch(static_cast<unsigned>(batch * kv_heads * shape.splits), k::decode_keys_per_block,
                [&] {
                  k::decode_group_kernel_for<T>(heads / kv_heads, dim)(
                    ptr<T>(q), kv, pos.data_ptr<int64_t>(), partials.data_ptr<float>(), shape,
                    keys_per_split);
                });
  emu::launch(static_cast<unsigned>(batch * heads), k::warp_multiple(dim, 256), [&] {
    k::decode_attention_merge_kernel<T>(partials.data_ptr<float>(), ptr<T>(out), shape);
  });
  const int64_t group = heads / kv_heads;
  auto want = at::empty({batch, heads, 1, dim}, at::kDouble);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t n = std::min(positions[b] + 1, key_len);
      const auto kk = keys[b][h / group].narrow(0, 0, n).to(at::kDouble);
      const auto vv = values[b][h / group].narrow(0, 0, n).to(at::kDouble);
      const auto scores = at::matmul(kk, q[b][h][0].to(at::kDouble)) / std::sqrt(double(dim));
      want[b][h][0].copy_(at::matmul(at::softmax(scores, 0), vv));
    }
  // float32 sums over 256-element dot products in another order than the reference's: 1e-5.
  check_close(out, want, std::max(rel, 1e-5), what);
}

/// RMSNorm's input gradient (frozen weight) against autograd through the composition in float64.
template <class T>
void rms_norm_backward_case(at::ScalarType t, double rel, int64_t rows, int64_t dim) {
  const std::string what = "rms_norm_backward " + name_of(t) + " rows " + std::to_string(rows)
                           + " dim " + std::to_string(dim);
  const auto x = randn({rows, dim}, 31 + dim, t) * 3;
  const auto w = (randn({dim}, 32 + dim, at::kFloat) * 0.2 + 1).to(t);
  const auto gy = randn({rows, dim}, 33 + dim, t);
  auto gx = at::full({rows, dim}, 7.0, at::TensorOptions(t));
  const float eps = 1e-6f;
  emu::launch(static_cast<unsigned>(rows), k::add_rms_norm_threads(dim), [&] {
    k::rms_norm_backward_kernel<T>(ptr<T>(gy), ptr<T>(x), ptr<T>(w), ptr<T>(gx), dim, eps);
  });
  const auto xd = x.to(at::kDouble).set_requires_grad(true);
  const auto normed = xd * at::rsqrt(xd.pow(2).mean(-1, true) + eps);
  (w.to(at::kDouble) * normed).backward(gy.to(at::kDouble));
  // float32 sums over the row: 1e-5 of the largest gradient at least
  check_close(gx, xd.grad(), std::max(rel, 1e-5), what);
}

/// SwiGLU forward (as the fused gate|up kernel rounds it) and backward (against autograd in
/// float64), row by row: gate and up separate [rows, width] tensors, or (`stacked`) the two
/// halves of one [rows, 2 * width] tensor whose gradient comes back in one tensor too.
/// `vectorized`: the rows go through the kernels' 16-byte loop, as the launcher asks for where
/// every row starts 16-byte aligned (so width is a multiple of the vector: no tail).
template <class T>
void swiglu_pair_case(at::ScalarType t, double rel, int64_t rows, int64_t width, bool stacked,
                      unsigned blocks, bool vectorized) {
  const std::string what = "swiglu_pair " + name_of(t) + " " + std::to_string(rows) + "x"
                           + std::to_string(width) + (stacked ? " stacked" : " separate")
                           + (vectorized ? " vectorized" : "");
  const auto gate_up = randn({rows, 2 * width}, 41 + width, t) * 3;
  const auto gate = stacked ? gate_up.narrow(1, 0, width) : gate_up.narrow(1, 0, width).contiguous();
  const auto up = stacked ? gate_up.narrow(1, width, width)
                          : gate_up.narrow(1, width, width).contiguous();
  const auto gy = randn({rows, width}, 43, t);
  const k::swiglu_layout l{rows, width, stacked ? 2 * width : width, width};
  auto out = at::full({rows, width}, 7.0, at::TensorOptions(t));
  auto grads = at::full({rows, 2 * width}, 7.0, at::TensorOptions(t)); // stacked gradients
  auto g_gate = stacked ? grads.narrow(1, 0, width) : at::full({rows, width}, 7.0, at::TensorOptions(t));
  auto g_up = stacked ? grads.narrow(1, width, width) : at::full({rows, width}, 7.0, at::TensorOptions(t));
  emu::launch(blocks, 32, [&] {
    k::swiglu_pair_kernel<T>(ptr<T>(gate), ptr<T>(up), ptr<T>(out), l, vectorized);
  });
  emu::launch(blocks, 32, [&] {
    k::swiglu_pair_backward_kernel<T>(ptr<T>(gy), ptr<T>(gate), ptr<T>(up), ptr<T>(g_gate),
                                      ptr<T>(g_up), l, vectorized);
  });
  check_close(out, at::silu(gate.to(at::kFloat)).to(t).to(at::kFloat) * up.to(at::kFloat), rel,
              what + " forward");
  const auto gd = gate.to(at::kDouble).set_requires_grad(true);
  const auto ud = up.to(at::kDouble).set_requires_grad(true);
  (at::silu(gd) * ud).backward(gy.to(at::kDouble));
  // two roundings to T on the way (silu, grad_out * up): twice the forward's tolerance
  check_close(g_up, ud.grad(), std::max(2 * rel, 1e-6), what + " grad up");
  check_close(g_gate, gd.grad(), std::max(2 * rel, 1e-6), what + " grad gate");
}

/// RoPE of the training path on a transposed view (run_layer's q.transpose(1, 2)): forward
/// against apply_rotary's composition, backward against autograd in float64.
template <class T>
void rotary_case(at::ScalarType t, double rel, int64_t batch, int64_t heads, int64_t seq,
                 int64_t dim) {
  const std::string what = "rotary " + name_of(t) + " " + std::to_string(batch) + "x"
                           + std::to_string(heads) + "x" + std::to_string(seq) + "x"
                           + std::to_string(dim);
  const auto x = randn({batch, seq, heads, dim}, 61 + dim, t).transpose(1, 2);
  const auto gy = randn({batch, heads, seq, dim}, 62 + dim, t);
  const auto angles = randn({batch, seq, dim / 2}, 63, at::kFloat) * 3;
  const auto cos = at::cat({angles.cos(), angles.cos()}, -1).to(t);
  const auto sin = at::cat({angles.sin().neg(), angles.sin()}, -1).to(t);
  k::rotary_layout l;
  l.batch = batch;
  l.heads = heads;
  l.seq = seq;
  l.dim = dim;
  auto out = at::full({batch, heads, seq, dim}, 7.0, at::TensorOptions(t));
  auto gx = at::full({batch, heads, seq, dim}, 7.0, at::TensorOptions(t));
  for (int i = 0; i < 3; ++i) {
    l.x_strides[i] = x.stride(i);
    l.out_strides[i] = out.stride(i);
  }
  emu::launch(5, 64, [&] {
    k::rotary_kernel<T>(ptr<T>(x), ptr<T>(cos), ptr<T>(sin), ptr<T>(out), l, false);
  });
  check_close(out, apply_rotary(x, cos, sin), rel, what + " forward");
  for (int i = 0; i < 3; ++i)
    l.x_strides[i] = gy.stride(i);
  emu::launch(5, 64, [&] {
    k::rotary_kernel<T>(ptr<T>(gy), ptr<T>(cos), ptr<T>(sin), ptr<T>(gx), l, true);
  });
  const auto xd = x.to(at::kDouble).set_requires_grad(true);
  const auto want = xd * cos.to(at::kDouble).unsqueeze(1)
                    + xd.roll(dim / 2, -1) * sin.to(at::kDouble).unsqueeze(1);
  want.backward(gy.to(at::kDouble));
  check_close(gx, xd.grad(), std::max(2 * rel, 1e-6), what + " backward");
}

/// The learner's log-probability and its gradient in place (logprob_kernel.cuh) against the
/// composition through autograd in float64: log_softmax(x / tau)[target] and
/// (onehot - softmax(x / tau)) / tau. A target outside the vocabulary: NaN, no one-hot.
template <class T>
void token_logprob_case(at::ScalarType t, double rel, int64_t rows, int64_t vocab, float tau,
                        unsigned blocks, bool vectorized) {
  const std::string what = "token_logprob " + name_of(t) + " " + std::to_string(rows) + "x"
                           + std::to_string(vocab) + " tau " + std::to_string(tau)
                           + (vectorized ? " vectorized" : "");
  const auto x = randn({rows, vocab}, 71 + vocab, t) * 4;
  auto targets = at::randint(vocab, {rows}, at::detail::createCPUGenerator(72), at::kLong);
  targets[rows - 1] = vocab; // outside: NaN
  auto work = x.clone();
  auto out = at::full({rows}, 7.0, at::kFloat);
  emu::launch(blocks, 64, [&] {
    k::token_logprob_gradient_kernel<T>(ptr<T>(work), targets.data_ptr<int64_t>(),
                                        out.data_ptr<float>(), rows, vocab, tau, vectorized);
  });
  const auto xd = x.to(at::kDouble).set_requires_grad(true);
  const auto logp = at::log_softmax(xd / static_cast<double>(tau), -1);
  const auto valid = targets.narrow(0, 0, rows - 1);
  const auto picked = logp.narrow(0, 0, rows - 1).gather(-1, valid.unsqueeze(-1)).squeeze(-1);
  // the last row's gradient: d(sum of log_softmax weighted 0) = -softmax / tau (no one-hot)
  picked.sum().backward();
  auto want_grad = xd.grad().clone();
  want_grad[rows - 1] = -at::softmax(xd.detach()[rows - 1] / static_cast<double>(tau), -1) / tau;
  // float32 sums of exp over the row: a few units in the last place of the log-sum
  check_close(out.narrow(0, 0, rows - 1), picked.detach(), 1e-5, what + " logprob");
  check(std::isnan(out[rows - 1].item<float>()), what + " target outside the vocabulary: NaN");
  check_close(work, want_grad, std::max(rel, 1e-6), what + " gradient");
}

template <class T>
void all_cases(at::ScalarType t, double rel) {
  for (int64_t dim : {1, 5, 33, 64, 1000, 1536, 8200}) // 8200: wider than 16 x 512
    for (bool d : {false, true})
      add_rms_norm_case<T>(t, rel, 3, dim, d);
  for (int64_t width : {1, 7, 300})
    swiglu_case<T>(t, rel, 5, width, 4096);
  swiglu_case<T>(t, rel, 7, 300, 2); // the grid-stride loop: 2 blocks for 8 blocks' work
  struct shape {
    int64_t batch, seq, heads, kv_heads, dim;
  };
  for (const auto& sh : std::vector<shape>{{3, 1, 12, 2, 128}, {2, 5, 3, 1, 80}, {1, 5, 4, 4, 64},
                                           {4, 1, 2, 1, 2}, {3, 4, 6, 2, 16}})
    for (bool normed : {false, true})
      for (bool cached : {false, true})
        rope_case<T>(t, rel, sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.dim, normed, cached);
  // One split, several (the last partly or wholly past a row's position), GQA and MHA, a
  // position past key_len (clamped), head_dim 16 .. 256.
  decode_attention_case<T>(t, rel, 2, 12, 2, 128, 300, {299, 0});
  decode_attention_case<T>(t, rel, 3, 4, 4, 64, 40, {5, 39, 77});
  decode_attention_case<T>(t, rel, 1, 2, 1, 256, 129, {128});
  decode_attention_case<T>(t, rel, 2, 6, 3, 16, 400, {130, 255});
  // The grouped kernel: Qwen2-1.5B's group of 6, Qwen2.5-7B's 7, 8 (the most), MHA; one chunk
  // per split and several (a split's chunks partly or wholly past a row's position), a split
  // wholly past it, a clamped position, head_dim 64, 128 and 256 (the instances there are).
  decode_attention_case<T>(t, rel, 2, 12, 2, 128, 300, {299, 0}, 128);
  decode_attention_case<T>(t, rel, 2, 12, 2, 128, 300, {299, 140}, 256);
  decode_attention_case<T>(t, rel, 3, 7, 1, 64, 700, {5, 699, 900}, 384);
  decode_attention_case<T>(t, rel, 1, 16, 2, 256, 129, {128}, 128);
  decode_attention_case<T>(t, rel, 3, 4, 4, 64, 40, {5, 39, 77}, 128);
  decode_attention_case<T>(t, rel, 2, 6, 3, 64, 400, {130, 255}, 512);
  decode_attention_case<T>(t, rel, 2, 10, 2, 128, 300, {299, 17}, 128); // group 5 (of 8)
  // The tensor-core kernel (16-bit types): groups of 6, 7, 8, 5 and 1 (MHA), head_dim 128 and
  // 64; one round per split and several, the last round partly or wholly past a row's position
  // (warps with no key), position 0, a split wholly past a position, a clamped position.
  if constexpr (!std::is_same_v<T, float>) {
    decode_attention_case<T>(t, rel, 2, 12, 2, 128, 300, {299, 0}, 128, true);
    decode_attention_case<T>(t, rel, 3, 7, 1, 64, 700, {5, 699, 900}, 384, true);
    decode_attention_case<T>(t, rel, 2, 16, 2, 128, 129, {128, 3}, 64, true);
    decode_attention_case<T>(t, rel, 4, 4, 4, 64, 100, {99, 0, 50, 200}, 64, true);
    decode_attention_case<T>(t, rel, 2, 10, 2, 128, 300, {299, 17}, 192, true);
    decode_attention_case<T>(t, rel, 1, 6, 1, 128, 1000, {777}, 1024, true);
  }
  // The decode GEMV (16-bit types): one chunk a thread and several, a last block with rows
  // past out_features, with and without bias, both input kinds.
  if constexpr (!std::is_same_v<T, float>) {
    const int64_t c = 16 / static_cast<int64_t>(sizeof(T));
    decode_linear_case<T>(t, rel, 24 * c, 10, true, false, 32);
    decode_linear_case<T>(t, rel, 40 * c, 8, false, false, 32);
    decode_linear_case<T>(t, rel, 5 * c, 7, true, true, 32);
    decode_linear_case<T>(t, rel, 70 * c, 13, false, true, 64);
    // with RoPE and the cache write folded in: Qwen2's layout in small (a group of 6, bias),
    // head_dim 4 (one pair a head a block) and 16, several chunks a thread, no bias, a position
    // outside the cache
    qkv_rope_case<T>(t, 12, 2, 16, 24 * c, true, 5, 32);
    qkv_rope_case<T>(t, 2, 1, 4, 70 * c, false, 0, 32);
    qkv_rope_case<T>(t, 4, 2, 32, 8 * c, true, 8, 64);
    qkv_rope_case<T>(t, 3, 1, 16, 8 * c, true, 9, 32);
    // and the layer's input norm folded in too
    qkv_rope_case<T>(t, 12, 2, 16, 24 * c, true, 5, 32, true);
    qkv_rope_case<T>(t, 4, 2, 32, 8 * c, false, 3, 64, true);
  }
  // The norms folded into the GEMVs: Qwen2-1.5B's width (the norm kernel's 512 threads played
  // by 192), 7B's (by 256), a row the norm kernel takes in its general loop (> 16 x 512), a
  // short row (threads of 32 playing 64), 5 x 32 threads playing 512. Also in float32 (which
  // the launcher leaves to cuBLAS): there a scale summed in another order shows in the result's
  // last bits, where bf16 / fp16 rounding mostly hides it.
  folded_norm_case<T>(t, 1536, 8, true, 192);
  folded_norm_case<T>(t, 3584, 5, false, 256);
  folded_norm_case<T>(t, 8448, 4, true, 256);
  folded_norm_case<T>(t, 40, 7, true, 32);
  folded_norm_case<T>(t, 2000, 6, false, 160);
  // (not dim 1: x / |x| has a gradient of about eps / x^2, all cancellation)
  for (int64_t dim : {2, 33, 128, 1536})
    rms_norm_backward_case<T>(t, rel, 3, dim);
  swiglu_pair_case<T>(t, rel, 5, 96, false, 8, true);  // a block a row, whole vectors
  swiglu_pair_case<T>(t, rel, 5, 96, true, 2, true);   // stacked halves; grid-stride over rows
  swiglu_pair_case<T>(t, rel, 3, 100, false, 3, false); // one element a thread
  swiglu_pair_case<T>(t, rel, 4, 331, true, 3, false); // odd halves: element by element
  swiglu_pair_case<T>(t, rel, 3, 200, false, 2, true);  // more vectors than a block's threads
  rotary_case<T>(t, rel, 2, 3, 5, 16);
  rotary_case<T>(t, rel, 1, 2, 7, 128);
  rotary_case<T>(t, rel, 2, 2, 3, 6); // a row's half (3) short of a thread's 4 pairs
  token_logprob_case<T>(t, rel, 3, 1000, 1.0f, 3, true);  // 16-byte loads, a block a row
  token_logprob_case<T>(t, rel, 4, 1003, 0.7f, 2, false); // element by element, rows striding
}

/// Philox4x32-10 against the known-answer vectors of its authors' Random123 (kat_vectors):
/// counter, key, result.
void philox_cases() {
  struct vector {
    k::philox_words counter;
    uint32_t key0, key1;
    k::philox_words want;
  };
  const std::vector<vector> vectors{
    {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
    {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
     {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
    {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
     {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}}};
  for (const auto& v : vectors) {
    const auto got = k::philox4x32_10(v.counter, v.key0, v.key1);
    bool same = true;
    for (int i = 0; i < 4; ++i)
      same = same && got.w[i] == v.want.w[i];
    char text[64];
    std::snprintf(text, sizeof text, "philox4x32-10 of counter %08x...", v.counter.w[0]);
    check(same, text);
  }
}

/// The race's noise draws from the softmax: 8 logits, 40000 streams (offsets) of one seed, each
/// token's frequency against its probability (4 standard deviations).
void race_noise_distribution_case() {
  const float logits[8] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
  double total = 0;
  for (float x : logits)
    total += std::exp(double(x));
  const int draws = 40000;
  std::vector<int> counts(8, 0);
  for (int d = 0; d < draws; ++d) {
    const auto words = k::philox_group(1234, 4 * static_cast<uint64_t>(d), 0);
    const auto more = k::philox_group(1234, 4 * static_cast<uint64_t>(d), 1);
    int best = 0;
    float best_score = -INFINITY;
    for (int v = 0; v < 8; ++v) {
      const float score = logits[v] + k::race_noise(v < 4 ? words.w[v] : more.w[v - 4]);
      if (score > best_score) {
        best_score = score;
        best = v;
      }
    }
    ++counts[best];
  }
  for (int v = 0; v < 8; ++v) {
    const double p = std::exp(double(logits[v])) / total;
    const double sd = std::sqrt(p * (1 - p) / draws);
    check(std::abs(counts[v] / double(draws) - p) <= 4 * sd + 1e-9,
          "race noise: token " + std::to_string(v) + " drawn " + std::to_string(counts[v])
            + " times in " + std::to_string(draws) + ", probability " + std::to_string(p));
  }
}

/// race_sample's two kernels (as sample.cu launches them) against the rule computed on the host:
/// greedy and sampled rows at several temperatures, a vocabulary of 3 slices (the last partial),
/// rows row_stride apart, a NaN and -inf logits, a row with no finite logit.
template <class T>
void race_sample_case(at::ScalarType t) {
  const int64_t rows = 6, vocab = 10000, stride = 10007;
  auto logits = (randn({rows, stride}, 41, at::kFloat) * 3).to(t);
  logits[4][17] = NAN;
  logits[4].narrow(0, 100, 50).fill_(-INFINITY);
  logits[5].fill_(-INFINITY);
  std::vector<k::sample_row> settings(rows);
  const float temperatures[rows] = {1.0f, 1.0f, 0.7f, 1.3f, 1.0f, 1.0f};
  for (int64_t r = 0; r < rows; ++r) {
    settings[r].greedy = r == 0;
    settings[r].temperature = temperatures[r];
    settings[r].seed = 1000 + r;
    settings[r].offset = 4 * r;
  }
  const int64_t slices = k::sample_slices(vocab);
  auto partials = at::full({rows * slices * 4}, 7.0, at::kFloat);
  auto result = at::full({2, rows}, 7.0, at::kFloat);
  emu::launch(static_cast<unsigned>(rows * slices), k::sample_threads, [&] {
    k::sample_slice_kernel<T>(ptr<T>(logits), stride, vocab, settings.data(),
                              partials.data_ptr<float>(), slices);
  });
  emu::launch(1, 128, [&] {
    k::sample_merge_kernel<T>(ptr<T>(logits), stride, settings.data(), partials.data_ptr<float>(),
                              slices, rows, result.data_ptr<float>());
  });
  const auto wide = logits.to(at::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    const std::string what = "race_sample " + name_of(t) + " row " + std::to_string(r);
    const float* x = wide[r].data_ptr<float>();
    int best = -1;
    float best_score = -INFINITY;
    double top = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) {
      const float xv = x[v] / settings[r].temperature;
      const auto words = k::philox_group(settings[r].seed, settings[r].offset, v / 4);
      const float score = settings[r].greedy ? xv : xv + k::race_noise(words.w[v % 4]);
      if (!std::isnan(score) && (best < 0 || score > best_score)) {
        best = static_cast<int>(v);
        best_score = score;
      }
      if (!std::isnan(xv))
        top = std::max(top, double(xv));
    }
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      if (!std::isnan(x[v]) && std::isfinite(top))
        sum += std::exp(double(x[v] / settings[r].temperature) - top);
    const int want_token = best < 0 ? 0 : best;
    const int got_token = static_cast<int>(result[0][r].item<float>());
    check(got_token == want_token,
          what + ": token " + std::to_string(got_token) + ", want " + std::to_string(want_token));
    const double got_logp = result[1][r].item<double>();
    if (sum > 0) {
      const double want_logp = double(x[want_token] / settings[r].temperature) - top - std::log(sum);
      check(std::abs(got_logp - want_logp) <= 1e-5 * std::max(1.0, std::abs(want_logp)),
            what + ": logprob " + std::to_string(got_logp) + ", want "
              + std::to_string(want_logp));
    } else {
      check(std::isnan(got_logp), what + ": no finite logit, logprob NaN");
    }
  }
}

/// The grouped kernel's split length: one chunk while the device has blocks to spare, longer
/// splits (whole chunks, never more than the cache) once it has several blocks per SM.
void keys_per_split_cases() {
  check(k::decode_attention_group_keys_per_split(1, 2, 768, 132) == 128, "split: batch 1");
  check(k::decode_attention_group_keys_per_split(32, 2, 1024, 132) == 128, "split: batch 32 1k");
  const int64_t long_split = k::decode_attention_group_keys_per_split(128, 2, 5120, 132);
  const int64_t blocks = 128 * 2 * ((5120 + long_split - 1) / long_split);
  check(long_split % 128 == 0 && long_split > 128 && blocks >= 4 * 132,
        "split: batch 128 5k keys: " + std::to_string(long_split) + " keys, "
          + std::to_string(blocks) + " blocks");
  check(k::decode_attention_group_keys_per_split(4096, 8, 200, 1) == 256,
        "split: never longer than the cache's chunks");
  check(k::decode_attention_group_keys_per_split(0, 2, 5120, 132) == 128, "split: no sequences");
  // The tensor-core kernel's: 64-key rounds; equal splits, enough of them for 4 blocks per SM.
  check(k::decode_attention_mma_keys_per_split(1, 2, 768, 132) == 64, "mma split: batch 1");
  const int64_t mma_split = k::decode_attention_mma_keys_per_split(128, 2, 3072, 132);
  const int64_t mma_splits = (3072 + mma_split - 1) / mma_split;
  check(mma_split == 1024 && 128 * 2 * mma_splits >= 4 * 132,
        "mma split: batch 128 3k keys: " + std::to_string(mma_split) + " keys");
  check(k::decode_attention_mma_keys_per_split(4096, 8, 200, 1) == 256,
        "mma split: never longer than the cache's rounds");
  check(k::decode_attention_mma_keys_per_split(0, 2, 5120, 132) == 64, "mma split: no sequences");
}

} // namespace

int main() {
  keys_per_split_cases();
  philox_cases();
  race_noise_distribution_case();
  race_sample_case<float>(at::kFloat);
  race_sample_case<__nv_bfloat16>(at::kBFloat16);
  race_sample_case<__half>(at::kHalf);
  all_cases<float>(at::kFloat, precisions[0].rel);
  all_cases<__nv_bfloat16>(at::kBFloat16, precisions[1].rel);
  all_cases<__half>(at::kHalf, precisions[2].rel);
  std::printf("%d of %d checks failed\n", failures, checks);
  return failures;
}
