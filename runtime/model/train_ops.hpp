#pragma once
// RMSNorm, SwiGLU and RoPE of the training path (transformer::run_layer), fused on CUDA with
// their own backward (cuda/train_kernels.cuh): each replaces a chain of libtorch kernels and their
// autograd nodes. Elsewhere - on the CPU, for weights that take a gradient, dtypes the kernels
// lack, or with the fused kernels not compiled in - they are the libtorch compositions, so
// callers use them unconditionally.
//
// Until the fused versions are measured against the compositions on a GPU they run only with
// KBRL_TRAIN_KERNELS=fused (read once); the golden tests call them with `fused` set.

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

/// apply_rotary(x, rotary) (x [batch, heads, seq, head_dim], any strides with the last dimension
/// contiguous), with autograd for x.
at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary);
at::Tensor train_rotary(const at::Tensor& x, const rotary_embedding& rotary, bool fused);

/// Whether KBRL_TRAIN_KERNELS=fused asks for the fused versions.
bool train_kernels_wanted();

} // namespace kbrl::model
