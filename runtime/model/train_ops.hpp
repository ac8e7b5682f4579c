#pragma once
// RMSNorm, SwiGLU and RoPE of the training path (transformer::run_layer), fused on CUDA with
// their own backward (cuda/train_kernels.cuh): each replaces a chain of libtorch kernels and their
// autograd nodes. Elsewhere - on the CPU, for weights that take a gradient, dtypes the kernels
// lack, or with the fused kernels not compiled in - they are the libtorch compositions, so
// callers use them unconditionally.
//
// The fused versions are the default: on an H200 they made a Qwen2-1.5B 8 x 2048 LoRA step 1.15x
// faster than the compositions (37,775 against 32,762 tokens/s, BENCHMARKS.md);
// KBRL_TRAIN_KERNELS=composition (read once) keeps the compositions, to compare or to rule the
// kernels out. The golden tests call both with `fused` given.

#include "runtime/model/rotary.hpp"

#include <ATen/ATen.h>

namespace kbrl::model {

/// weight * to_T(x * rsqrt(mean(x^2) + eps)) over the last dimension, x in float32 for the
/// statistics: transformer.cpp's rms_norm(), with autograd.
at::Tensor train_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor train_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, bool fused);

/// at::silu(gate) * up, with autograd.
at::Tensor train_swiglu(const at::Tensor& gate, const at::Tensor& up);
at::Tensor train_swiglu(const at::Tensor& gate, const at::Tensor& up, bool fused);

/// train_swiglu() of the two halves of gate_up ([..., 2 * width]: gate, then up, as the stacked
/// gate|up projection leaves them), with autograd; the input gradient comes back as one
/// [..., 2 * width] tensor. Precondition (TORCH_CHECK): an even last dimension.
at::Tensor train_swiglu_stacked(const at::Tensor& gate_up);
at::Tensor train_swiglu_stacked(const at::Tensor& gate_up, bool fused);

/// apply_rotary(x, rotary) (x [batch, heads, seq, head_dim], any strides with the last dimension
/// contiguous), with autograd for x.
at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary);
at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary, bool fused);

/// Whether the fused versions are wanted: yes unless KBRL_TRAIN_KERNELS=composition.
bool train_kernels_wanted();

} // namespace kbrl::model
