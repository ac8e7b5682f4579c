#include "runtime/model/fused_ops.hpp"

#include "runtime/model/attention.hpp"
#include "runtime/model/decode_linear.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <string>

// CMakeLists.txt defines KBRL_WITH_FUSED_KERNELS=1 for this file where it compiles
// runtime/model/cuda/*.cu (a libtorch with CUDA and nvcc).
#ifndef KBRL_WITH_FUSED_KERNELS
#define KBRL_WITH_FUSED_KERNELS 0
#endif

#if KBRL_WITH_FUSED_KERNELS
#include "runtime/model/cuda/fused_kernels.hpp"
#include "runtime/model/fused_launch.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace kbrl::model {

namespace {

bool kernel_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

/// The LoRA term of `l` for input `x`, cast to `dtype`: what linear_layer::forward adds to its
/// GEMM when dropout is off (keep the two in step).
at::Tensor lora_term(const linear_layer& l, const at::Tensor& x, at::ScalarType dtype) {
  const auto input = x.to(l.lora.a.scalar_type());
  const auto delta = at::linear(at::linear(input, l.lora.a), l.lora.b);
  return (delta * l.lora.scaling).to(dtype);
}

/// decode_attention_kind::from_environment resolved: KBRL_DECODE_ATTENTION, read once (to compare
/// the kinds on a device, as bench/sampler_throughput/gpu_bench.sh does).
decode_attention_kind decode_attention_from_environment() {
  static const decode_attention_kind kind = [] {
    const char* choice = std::getenv("KBRL_DECODE_ATTENTION");
    const std::string text = choice == nullptr ? "" : choice;
    return text == "sdpa"      ? decode_attention_kind::sdpa
           : text == "grouped" ? decode_attention_kind::grouped
                               : decode_attention_kind::standard;
  }();
  return kind;
}

#if KBRL_WITH_FUSED_KERNELS

/// `t` is defined, on `like`'s device and of its dtype.
bool same_place(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.device() == like.device() && t.scalar_type() == like.scalar_type();
}

#endif

// ---- the libtorch compositions (run_layer's own steps) -------------------------------------------

normed_residual add_rms_norm_reference(const at::Tensor& x, const at::Tensor& delta,
                                       const at::Tensor& weight, double eps) {
  auto residual = delta.defined() ? x + delta : x;
  auto normed = rms_norm(residual, weight, eps);
  return {residual, normed};
}

at::Tensor swiglu_reference(const at::Tensor& gate_up) {
  const int64_t n = gate_up.size(-1) / 2;
  return at::silu(gate_up.narrow(-1, 0, n)) * gate_up.narrow(-1, n, n);
}

attention_inputs rope_qkv_reference(const at::Tensor& qkv, const qkv_layout& l,
                                    const rotary_embedding& rotary, const at::Tensor& q_norm,
                                    const at::Tensor& k_norm, double eps,
                                    const at::Tensor& positions, const at::Tensor& cache_keys,
                                    const at::Tensor& cache_values) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), dim = l.head_dim;
  auto q = qkv.narrow(-1, 0, l.heads * dim).view({batch, seq, l.heads, dim});
  auto k = qkv.narrow(-1, l.heads * dim, l.kv_heads * dim).view({batch, seq, l.kv_heads, dim});
  auto v = qkv.narrow(-1, (l.heads + l.kv_heads) * dim, l.kv_heads * dim)
             .view({batch, seq, l.kv_heads, dim});
  if (q_norm.defined()) {
    q = rms_norm(q, q_norm, eps);
    k = rms_norm(k, k_norm, eps);
  }
  q = apply_rotary(q.transpose(1, 2), rotary).contiguous(); // [batch, heads, seq, dim]
  k = apply_rotary(k.transpose(1, 2), rotary);             // [batch, kv_heads, seq, dim]
  v = v.transpose(1, 2);
  if (!cache_keys.defined())
    return {q, k.contiguous(), v.contiguous()};
  // As run_layer: row b's token s goes to [b, :, positions[b, s], :].
  const auto where = positions.to(at::kLong)
                       .reshape({batch, 1, seq, 1})
                       .expand({batch, l.kv_heads, seq, dim});
  cache_keys.scatter_(2, where, k);
  cache_values.scatter_(2, where, v);
  return {q, cache_keys, cache_values};
}

} // namespace

bool fused_kernels_compiled_in() { return KBRL_WITH_FUSED_KERNELS != 0; }

bool fused_kernel_applies(const at::Tensor& x) {
  return KBRL_WITH_FUSED_KERNELS != 0 && x.defined() && x.is_cuda()
         && kernel_dtype(x.scalar_type());
}

// ---- add + RMSNorm -------------------------------------------------------------------------------

normed_residual add_rms_norm(const at::Tensor& x, const at::Tensor& delta,
                             const at::Tensor& weight, double eps) {
#if KBRL_WITH_FUSED_KERNELS
  const int64_t dim = x.dim() > 0 ? x.size(-1) : 0;
  const bool fits = fused_kernel_applies(x) && same_place(weight, x) && weight.dim() == 1
                    && weight.size(0) == dim && dim > 0
                    && (!delta.defined() || (same_place(delta, x) && delta.sizes() == x.sizes()));
  if (fits) {
    c10::cuda::CUDAGuard guard(x.device());
    const auto xc = x.contiguous();
    const auto dc = delta.defined() ? delta.contiguous() : at::Tensor{};
    const auto wc = weight.contiguous();
    auto residual = delta.defined() ? at::empty(xc.sizes(), xc.options()) : x;
    auto normed = at::empty(xc.sizes(), xc.options());
    check_launch(cuda::add_rms_norm(element_type_of(x.scalar_type()), xc.data_ptr(),
                                    dc.defined() ? dc.data_ptr() : nullptr,
                                    dc.defined() ? residual.data_ptr() : nullptr,
                                    normed.data_ptr(), wc.data_ptr(), xc.numel() / dim, dim,
                                    static_cast<float>(eps),
                                    stream_of(x)),
                 "add_rms_norm");
    return {residual, normed};
  }
#endif
  return add_rms_norm_reference(x, delta, weight, eps);
}

// ---- SwiGLU --------------------------------------------------------------------------------------

at::Tensor swiglu(const at::Tensor& gate_up) {
  TORCH_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0,
              "swiglu: expected [..., 2 n] (gate then up), got ", gate_up.sizes());
#if KBRL_WITH_FUSED_KERNELS
  if (fused_kernel_applies(gate_up) && gate_up.size(-1) > 0) {
    c10::cuda::CUDAGuard guard(gate_up.device());
    const auto in = gate_up.contiguous();
    const int64_t width = in.size(-1) / 2;
    auto shape = in.sizes().vec();
    shape.back() = width;
    auto out = at::empty(shape, in.options());
    check_launch(cuda::swiglu(element_type_of(in.scalar_type()), in.data_ptr(), out.data_ptr(),
                              in.numel() / (2 * width), width,
                              stream_of(in)),
                 "swiglu");
    return out;
  }
#endif
  return swiglu_reference(gate_up);
}

// ---- RoPE + kv cache -----------------------------------------------------------------------------

attention_inputs rope_qkv(const at::Tensor& qkv, const qkv_layout& l,
                          const rotary_embedding& rotary, const at::Tensor& q_norm,
                          const at::Tensor& k_norm, double eps, const at::Tensor& positions,
                          const at::Tensor& cache_keys, const at::Tensor& cache_values) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) == (l.heads + 2 * l.kv_heads) * l.head_dim,
              "rope_qkv: expected qkv [batch, seq, (", l.heads, " + 2 x ", l.kv_heads, ") x ",
              l.head_dim, "], got ", qkv.sizes());
  TORCH_CHECK(cache_keys.defined() == cache_values.defined(),
              "rope_qkv: cache keys and values go together");
#if KBRL_WITH_FUSED_KERNELS
  const int64_t batch = qkv.size(0), seq = qkv.size(1), dim = l.head_dim;
  const std::vector<int64_t> rot_shape{batch, seq, dim};
  auto norm_fits = [&](const at::Tensor& w) {
    return !w.defined() || (same_place(w, qkv) && w.dim() == 1 && w.size(0) == dim);
  };
  auto cache_fits = [&]() {
    if (!cache_keys.defined())
      return true;
    return same_place(cache_keys, qkv) && same_place(cache_values, qkv) && cache_keys.dim() == 4
           && cache_keys.sizes() == cache_values.sizes()
           && cache_keys.strides() == cache_values.strides() && cache_keys.size(0) == batch
           && cache_keys.size(1) == l.kv_heads && cache_keys.size(3) == dim
           && cache_keys.stride(3) == 1 && positions.defined()
           && positions.device() == qkv.device() && positions.dim() == 2
           && positions.size(0) == batch && positions.size(1) == seq;
  };
  const bool fits = fused_kernel_applies(qkv) && dim > 0 && dim % 2 == 0 && dim <= 2048
                    && l.heads > 0 && l.kv_heads > 0 && seq > 0
                    && same_place(rotary.cos, qkv) && same_place(rotary.sin, qkv)
                    && rotary.cos.sizes() == rot_shape && rotary.sin.sizes() == rot_shape
                    && q_norm.defined() == k_norm.defined() && norm_fits(q_norm)
                    && norm_fits(k_norm) && cache_fits();
  if (fits) {
    c10::cuda::CUDAGuard guard(qkv.device());
    const auto in = qkv.contiguous();
    const auto cos = rotary.cos.contiguous(), sin = rotary.sin.contiguous();
    const auto qn = q_norm.defined() ? q_norm.contiguous() : at::Tensor{};
    const auto kn = k_norm.defined() ? k_norm.contiguous() : at::Tensor{};
    auto q = at::empty({batch, l.heads, seq, dim}, in.options());
    at::Tensor keys = cache_keys, values = cache_values, where;
    cuda::kv_destination kv;
    if (cache_keys.defined()) {
      where = positions.to(at::kLong).contiguous(); // no copy for int64 positions of one row
      kv.positions = where.data_ptr<int64_t>();
      kv.position_limit = cache_keys.size(2);
    } else {
      keys = at::empty({batch, l.kv_heads, seq, dim}, in.options());
      values = at::empty({batch, l.kv_heads, seq, dim}, in.options());
    }
    point_at(kv, keys, values);
    cuda::qkv_shape shape;
    shape.batch = batch;
    shape.seq = seq;
    shape.heads = l.heads;
    shape.kv_heads = l.kv_heads;
    shape.head_dim = dim;
    shape.row_stride = in.size(2);
    check_launch(cuda::rope_qkv(element_type_of(in.scalar_type()), in.data_ptr(), cos.data_ptr(),
                                sin.data_ptr(), qn.defined() ? qn.data_ptr() : nullptr,
                                kn.defined() ? kn.data_ptr() : nullptr, static_cast<float>(eps),
                                q.data_ptr(), kv, shape,
                                stream_of(in)),
                 "rope_qkv");
    return {q, keys, values};
  }
#endif
  return rope_qkv_reference(qkv, l, rotary, q_norm, k_norm, eps, positions, cache_keys,
                            cache_values);
}

// ---- decode attention ----------------------------------------------------------------------------

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& positions, const at::Tensor& mask,
                            decode_attention_kind kind) {
  TORCH_CHECK(q.dim() == 4 && q.size(2) == 1 && keys.dim() == 4 && keys.sizes() == values.sizes()
                && keys.size(0) == q.size(0) && keys.size(3) == q.size(3) && keys.size(1) > 0
                && q.size(1) % keys.size(1) == 0,
              "decode_attention: expected q [batch, heads, 1, dim] and keys/values [batch, "
              "kv_heads, key_len, dim], got ", q.sizes(), ", ", keys.sizes(), ", ", values.sizes());
  TORCH_CHECK(positions.dim() == 2 && positions.size(0) == q.size(0) && positions.size(1) == 1,
              "decode_attention: expected positions [batch, 1], got ", positions.sizes());
  if (kind == decode_attention_kind::from_environment)
    kind = decode_attention_from_environment();
#if KBRL_WITH_FUSED_KERNELS
  const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(3), key_len = keys.size(2);
  const int64_t vector = 16 / static_cast<int64_t>(q.element_size());
  const int64_t group = q.size(1) / keys.size(1);
  // The tensor-core kernel serves every GQA group of up to 8 query heads in float16 / bfloat16:
  // it reads each cached row once and only up to each sequence's position (SDPA reads the whole
  // bucket). On an H200 (Qwen2-1.5B shapes) it took a batch-128 decode step with 1k + 4k tokens
  // from 9.16 ms (SDPA) to 6.95, and batch 1 from 2.16 (the per-head kernel) to 2.00. The
  // per-head kernel (one block per query head) serves one sequence in the other cases; the
  // CUDA-core grouped kernel lost to SDPA at batch 128 and stays opt-in (BENCHMARKS.md).
  const bool tensor_cores =
    kind == decode_attention_kind::standard
    && (q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16)
    && group <= cuda::decode_mma_max_group_size && (dim == 64 || dim == 128);
  const bool grouped = !tensor_cores && batch > 1 && kind == decode_attention_kind::grouped
                       && group <= 8; // cuda::decode_max_group
  const bool per_head = !tensor_cores && batch == 1 && kind != decode_attention_kind::sdpa;
  const bool fits = (tensor_cores || grouped || per_head) && fused_kernel_applies(q)
                    && same_place(keys, q) && same_place(values, q)
                    && keys.strides() == values.strides() && keys.stride(3) == 1
                    && positions.device() == q.device() && dim > 0 && dim <= 256
                    && dim % vector == 0 && key_len > 0;
  if (fits) {
    c10::cuda::CUDAGuard guard(q.device());
    cuda::decode_kv kv;
    point_at(kv, keys, values);
    cuda::decode_attention_shape shape;
    shape.batch = batch;
    shape.heads = heads;
    shape.kv_heads = keys.size(1);
    shape.head_dim = dim;
    shape.key_len = key_len;
    const int64_t multiprocessors =
      at::cuda::getDeviceProperties(q.device().index())->multiProcessorCount;
    const int64_t keys_per_split =
      tensor_cores ? cuda::decode_attention_mma_keys_per_split(batch, shape.kv_heads, key_len,
                                                               multiprocessors)
      : grouped    ? cuda::decode_attention_group_keys_per_split(batch, shape.kv_heads, key_len,
                                                                 multiprocessors)
                   : cuda::decode_chunk_keys;
    shape.splits = (key_len + keys_per_split - 1) / keys_per_split;
    shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
    const auto in = q.contiguous();
    const auto where = positions.to(at::kLong).contiguous();
    auto partials = at::empty({batch * heads * shape.splits, dim + 2},
                              q.options().dtype(at::kFloat));
    auto out = at::empty({batch, heads, 1, dim}, q.options());
    const auto stream = stream_of(q);
    const auto type = element_type_of(q.scalar_type());
    const auto* where_ptr = where.data_ptr<int64_t>();
    const auto err =
      tensor_cores ? cuda::decode_attention_mma(type, in.data_ptr(), kv, where_ptr,
                                                partials.data_ptr<float>(), out.data_ptr(), shape,
                                                keys_per_split, stream)
      : grouped    ? cuda::decode_attention_grouped(type, in.data_ptr(), kv, where_ptr,
                                                    partials.data_ptr<float>(), out.data_ptr(),
                                                    shape, keys_per_split, stream)
                   : cuda::decode_attention(type, in.data_ptr(), kv, where_ptr,
                                            partials.data_ptr<float>(), out.data_ptr(), shape,
                                            stream);
    if (err != cudaErrorInvalidValue) { // invalid: the cache's alignment; the composition below
      check_launch(err, "decode_attention");
      return out;
    }
  }
#endif
  return grouped_attention(q, keys, values, mask);
}

// ---- fused projections ---------------------------------------------------------------------------

bool rows_of(const at::Tensor& fused, const std::vector<const at::Tensor*>& parts) {
  bool any = false, all = true;
  for (const auto* p : parts) {
    any = any || p->defined();
    all = all && p->defined();
  }
  if (!any)
    return !fused.defined();
  if (!all || !fused.defined() || !fused.is_contiguous() || fused.dim() < 1)
    return false;
  const auto row_bytes = static_cast<int64_t>(fused.element_size())
                         * (fused.size(0) > 0 ? fused.numel() / fused.size(0) : 0);
  const char* base = static_cast<const char*>(fused.data_ptr());
  int64_t row = 0;
  for (const auto* p : parts) {
    const auto& t = *p;
    if (t.dim() != fused.dim() || t.scalar_type() != fused.scalar_type()
        || t.device() != fused.device() || !t.is_contiguous()
        || t.sizes().slice(1) != fused.sizes().slice(1)
        || static_cast<const char*>(t.data_ptr()) != base + row * row_bytes)
      return false;
    row += t.size(0);
  }
  return row == fused.size(0);
}

bool fused_without_lora(const at::Tensor& weight, const at::Tensor& bias,
                        const std::vector<const linear_layer*>& parts) {
  std::vector<const at::Tensor*> weights, biases;
  for (const auto* p : parts) {
    if (p->lora.defined())
      return false;
    weights.push_back(&p->weight);
    biases.push_back(&p->bias);
  }
  return rows_of(weight, weights) && rows_of(bias, biases);
}

at::Tensor fuse_rows(const std::vector<at::Tensor*>& parts) {
  std::vector<at::Tensor> tensors;
  for (auto* p : parts)
    if (p->defined())
      tensors.push_back(*p);
  if (tensors.empty())
    return {};
  TORCH_CHECK(tensors.size() == parts.size(), "fuse_rows: some parts are undefined");
  auto fused = at::cat(tensors, 0);
  int64_t row = 0;
  for (auto* p : parts) {
    const int64_t n = p->size(0);
    *p = fused.narrow(0, row, n);
    row += n;
  }
  return fused;
}

at::Tensor fused_projection(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::vector<const linear_layer*>& parts) {
  std::vector<const at::Tensor*> weights, biases;
  for (const auto* p : parts) {
    weights.push_back(&p->weight);
    biases.push_back(&p->bias);
  }
  if (!rows_of(weight, weights) || !rows_of(bias, biases)) {
    std::vector<at::Tensor> outs;
    for (const auto* p : parts)
      outs.push_back(p->forward(x));
    return at::cat(outs, -1);
  }
  auto y = decode_linear(x, weight, bias);
  int64_t column = 0;
  for (const auto* p : parts) {
    const int64_t n = p->weight.size(0);
    if (p->lora.defined())
      y.narrow(-1, column, n).add_(lora_term(*p, x, y.scalar_type()));
    column += n;
  }
  return y;
}

} // namespace kbrl::model
