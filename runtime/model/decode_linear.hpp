#pragma once
// The linear layers of a one-token decode step as one GEMV kernel each
// (cuda/decode_linear_kernel.cuh says why cuBLAS is slow there), with the SwiGLU folded into the
// down projection. Everywhere else, and with KBRL_DECODE_LINEAR=cublas (read once, to compare on
// a device), exactly the operations one by one (at::linear, swiglu()). Inference only: no
// autograd history.

#include "runtime/model/fused_ops.hpp"

#include <ATen/core/Tensor.h>

namespace kbrl::model {

/// at::linear(x, weight, bias): on CUDA in float16 / bfloat16 for one token (x's leading
/// dimensions' product 1), a contiguous weight and 16-byte aligned rows, the GEMV kernel
/// (float32 sums rounded once, in another order than cuBLAS's: within one rounding of the
/// dtype); otherwise at::linear.
at::Tensor decode_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

/// at::linear(swiglu(gate_up), weight, bias): with the GEMV kernel one kernel that computes
/// silu(gate) * up as it reads it, rounded as swiglu() rounds it; otherwise the two operations.
at::Tensor swiglu_linear(const at::Tensor& gate_up, const at::Tensor& weight,
                         const at::Tensor& bias);

} // namespace kbrl::model
