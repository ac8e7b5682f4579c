#include "runtime/model/train_ops.hpp"

#include "runtime/model/fused_ops.hpp"
#include "runtime/model/transformer.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

// CMakeLists.txt defines KBRL_WITH_FUSED_KERNELS=1 for this file where the kernels compile.
#ifndef KBRL_WITH_FUSED_KERNELS
#define KBRL_WITH_FUSED_KERNELS 0
#endif

#if KBRL_WITH_FUSED_KERNELS
#include "runtime/model/cuda/fused_kernels.hpp"
#include "runtime/model/fused_launch.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>
#endif

namespace kbrl::model {

bool train_kernels_wanted() {
  static const bool wanted = [] {
    const char* choice = std::getenv("KBRL_TRAIN_KERNELS");
    const std::string text = choice == nullptr ? "" : choice;
    if (text == "composition")
      return false;
    if (!text.empty() && text != "fused")
      std::fprintf(stderr,
                   "kbrl: KBRL_TRAIN_KERNELS=%s is neither 'fused' nor 'composition'; using the "
                   "fused training kernels\n",
                   text.c_str());
    return true;
  }();
  return wanted;
}

namespace {

at::Tensor swiglu_composition(const at::Tensor& gate, const at::Tensor& up) {
  return at::silu(gate) * up;
}

#if KBRL_WITH_FUSED_KERNELS

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct rms_norm_function : torch::autograd::Function<rms_norm_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            double eps) {
    c10::cuda::CUDAGuard guard(x.device());
    const auto xc = x.contiguous(), wc = weight.contiguous();
    const int64_t dim = xc.size(-1);
    auto out = at::empty_like(xc);
    check_launch(cuda::add_rms_norm(element_type_of(xc.scalar_type()), xc.data_ptr(), nullptr,
                                    nullptr, out.data_ptr(), wc.data_ptr(), xc.numel() / dim, dim,
                                    static_cast<float>(eps), stream_of(xc)),
                 "rms_norm");
    ctx->save_for_backward({xc, wc});
    ctx->saved_data["eps"] = eps;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    c10::cuda::CUDAGuard guard(x.device());
    const auto gy = grads[0].to(x.scalar_type()).contiguous();
    const int64_t dim = x.size(-1);
    auto gx = at::empty_like(x);
    check_launch(cuda::rms_norm_backward(element_type_of(x.scalar_type()), gy.data_ptr(),
                                         x.data_ptr(), weight.data_ptr(), gx.data_ptr(),
                                         x.numel() / dim, dim,
                                         static_cast<float>(ctx->saved_data["eps"].toDouble()),
                                         stream_of(x)),
                 "rms_norm_backward");
    return {gx, at::Tensor(), at::Tensor()}; // the weight is frozen (train_rms_norm's rule)
  }
};

/// The layout of separate contiguous gate and up tensors of one shape for cuda::swiglu_pair.
cuda::swiglu_layout separate_swiglu_layout(const at::Tensor& gate) {
  const int64_t width = gate.size(-1);
  return {width > 0 ? gate.numel() / width : 0, width, width, width};
}

/// The layout of one stacked gate|up tensor [..., 2 * width] and its result [..., width].
cuda::swiglu_layout stacked_swiglu_layout(const at::Tensor& gate_up) {
  const int64_t width = gate_up.size(-1) / 2;
  return {width > 0 ? gate_up.numel() / (2 * width) : 0, width, 2 * width, width};
}

/// `t`'s data `elements` elements in (the up half of a stacked row).
void* offset(const at::Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

struct swiglu_function : torch::autograd::Function<swiglu_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    c10::cuda::CUDAGuard guard(gate.device());
    const auto g = gate.contiguous(), u = up.contiguous();
    auto out = at::empty_like(g);
    check_launch(cuda::swiglu_pair(element_type_of(g.scalar_type()), g.data_ptr(), u.data_ptr(),
                                   out.data_ptr(), separate_swiglu_layout(g), stream_of(g)),
                 "swiglu");
    ctx->save_for_backward({g, u});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& g = saved[0];
    const auto& u = saved[1];
    c10::cuda::CUDAGuard guard(g.device());
    const auto gy = grads[0].to(g.scalar_type()).contiguous();
    auto grad_gate = at::empty_like(g), grad_up = at::empty_like(u);
    check_launch(cuda::swiglu_pair_backward(element_type_of(g.scalar_type()), gy.data_ptr(),
                                            g.data_ptr(), u.data_ptr(), grad_gate.data_ptr(),
                                            grad_up.data_ptr(), separate_swiglu_layout(g),
                                            stream_of(g)),
                 "swiglu_backward");
    return {grad_gate, grad_up};
  }
};

/// SwiGLU of the two halves of one stacked gate|up tensor (the stacked projection's output):
/// the input gradient comes back stacked too, as one tensor for the projection's backward.
struct stacked_swiglu_function : torch::autograd::Function<stacked_swiglu_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_up) {
    c10::cuda::CUDAGuard guard(gate_up.device());
    const auto gu = gate_up.contiguous();
    const auto layout = stacked_swiglu_layout(gu);
    auto shape = gu.sizes().vec();
    shape.back() = layout.width;
    auto out = at::empty(shape, gu.options());
    check_launch(cuda::swiglu_pair(element_type_of(gu.scalar_type()), gu.data_ptr(),
                                   offset(gu, layout.width), out.data_ptr(), layout,
                                   stream_of(gu)),
                 "swiglu");
    ctx->save_for_backward({gu});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto gu = ctx->get_saved_variables()[0];
    c10::cuda::CUDAGuard guard(gu.device());
    const auto layout = stacked_swiglu_layout(gu);
    const auto gy = grads[0].to(gu.scalar_type()).contiguous();
    auto grad = at::empty_like(gu);
    check_launch(cuda::swiglu_pair_backward(element_type_of(gu.scalar_type()), gy.data_ptr(),
                                            gu.data_ptr(), offset(gu, layout.width),
                                            grad.data_ptr(), offset(grad, layout.width), layout,
                                            stream_of(gu)),
                 "swiglu_backward");
    return {grad};
  }
};

/// x's (or a gradient's) layout for cuda::rotary: [batch, heads, seq, dim], last dim contiguous.
cuda::rotary_layout rotary_layout_of(const at::Tensor& x, const at::Tensor& out) {
  cuda::rotary_layout l;
  l.batch = x.size(0);
  l.heads = x.size(1);
  l.seq = x.size(2);
  l.dim = x.size(3);
  for (int i = 0; i < 3; ++i) {
    l.x_strides[i] = x.stride(i);
    l.out_strides[i] = out.stride(i);
  }
  return l;
}

/// x rotated (or, backward, a gradient taken back through the rotation) by cuda::rotary, into a
/// new tensor laid out as x is: a transposed view ([batch, seq, heads, dim] in memory, as the
/// projections leave q and k) stays a dense transposed layout, even when x is a column slice of
/// the stacked q|k|v projection, so the gradient that comes back through it reshapes without a
/// copy.
at::Tensor run_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                      bool backward) {
  const auto in = x.stride(3) == 1 ? x : x.contiguous();
  const bool sequence_major = in.stride(1) < in.stride(2);
  auto out = sequence_major
               ? at::empty({in.size(0), in.size(2), in.size(1), in.size(3)}, in.options())
                   .transpose(1, 2)
               : at::empty_like(in); // empty_like keeps a dense layout's strides
  if (out.stride(3) != 1)
    out = at::empty(in.sizes(), in.options());
  check_launch(cuda::rotary(element_type_of(in.scalar_type()), in.data_ptr(), cos.data_ptr(),
                            sin.data_ptr(), out.data_ptr(), rotary_layout_of(in, out), backward,
                            stream_of(in)),
               backward ? "rotary_backward" : "rotary");
  return out;
}

struct rotary_function : torch::autograd::Function<rotary_function> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin) {
    c10::cuda::CUDAGuard guard(x.device());
    ctx->save_for_backward({cos, sin});
    return run_rotary(x, cos, sin, /*backward=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    c10::cuda::CUDAGuard guard(saved[0].device());
    const auto& g = grads[0];
    return {run_rotary(g.to(saved[0].scalar_type()), saved[0], saved[1], /*backward=*/true),
            at::Tensor(), at::Tensor()}; // the angles take no gradient
  }
};

#endif

} // namespace

at::Tensor train_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return train_rms_norm(x, weight, eps, train_kernels_wanted());
}

at::Tensor train_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, bool fused) {
#if KBRL_WITH_FUSED_KERNELS
  const bool fits = fused && fused_kernel_applies(x) && x.dim() >= 1 && x.size(-1) > 0
                    && weight.dim() == 1 && weight.size(0) == x.size(-1)
                    && weight.scalar_type() == x.scalar_type() && weight.device() == x.device()
                    && !weight.requires_grad();
  if (fits)
    return rms_norm_function::apply(x, weight, eps);
#else
  (void)fused;
#endif
  return rms_norm(x, weight, eps);
}

at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary) {
  return train_rotary(x, rotary, train_kernels_wanted());
}

at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary, bool fused) {
#if KBRL_WITH_FUSED_KERNELS
  const bool fits = fused && fused_kernel_applies(x) && x.dim() == 4 && x.size(3) % 2 == 0
                    && rotary.cos.dim() == 3 && rotary.cos.size(0) == x.size(0)
                    && rotary.cos.size(1) == x.size(2) && rotary.cos.size(2) == x.size(3)
                    && rotary.sin.sizes() == rotary.cos.sizes()
                    && rotary.cos.scalar_type() == x.scalar_type()
                    && rotary.sin.scalar_type() == x.scalar_type()
                    && rotary.cos.device() == x.device() && rotary.sin.device() == x.device()
                    && !rotary.cos.requires_grad() && !rotary.sin.requires_grad();
  if (fits)
    return rotary_function::apply(x, rotary.cos.contiguous(), rotary.sin.contiguous());
#else
  (void)fused;
#endif
  return apply_rotary(x, rotary);
}

at::Tensor train_swiglu(const at::Tensor& gate, const at::Tensor& up) {
  return train_swiglu(gate, up, train_kernels_wanted());
}

at::Tensor train_swiglu(const at::Tensor& gate, const at::Tensor& up, bool fused) {
#if KBRL_WITH_FUSED_KERNELS
  const bool fits = fused && fused_kernel_applies(gate) && gate.dim() >= 1
                    && gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type()
                    && gate.device() == up.device();
  if (fits)
    return swiglu_function::apply(gate, up);
#else
  (void)fused;
#endif
  return swiglu_composition(gate, up);
}

at::Tensor train_swiglu_stacked(const at::Tensor& gate_up) {
  return train_swiglu_stacked(gate_up, train_kernels_wanted());
}

at::Tensor train_swiglu_stacked(const at::Tensor& gate_up, bool fused) {
  TORCH_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0,
              "train_swiglu_stacked: expected [..., 2 * width], got ", gate_up.sizes());
#if KBRL_WITH_FUSED_KERNELS
  if (fused && fused_kernel_applies(gate_up))
    return stacked_swiglu_function::apply(gate_up);
#else
  (void)fused;
#endif
  const int64_t width = gate_up.size(-1) / 2;
  return swiglu_composition(gate_up.narrow(-1, 0, width), gate_up.narrow(-1, width, width));
}

} // namespace kbrl::model
