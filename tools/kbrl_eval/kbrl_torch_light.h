// kbrl_torch_light.h: what <torch/types.h> gives a load_inline CUDA source, made lighter for
// nvcc. light_cuda_header.py puts it in place of <torch/extension.h>, <torch/types.h>,
// <torch/torch.h> and <torch/all.h> in a candidate's .cu file.
//
// Kept: all of ATen (at::Tensor with every method, every at:: function, TensorOptions, the
// dispatch macros, indexing), so overload resolution and argument-dependent lookup see the same
// at:: functions as with the full header, and the names torch/types.h adds to namespace torch.
// Left out: Python and pybind11, torch/all.h (nn, optim, jit, data), torch/library.h, and
// autograd's factory wrappers (torch::empty and the like), which differ from at::empty only
// for requires_grad=true; light_cuda_header.py builds a source that mentions requires_grad with
// the full header. A source that needs anything left out fails to compile here and is built
// again, as written, with the full header.
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include <optional>

namespace torch {
using namespace at;  // NOLINT: torch/types.h does the same

#if TORCH_VERSION_MAJOR >= 2
using std::nullopt;  // NOLINT
using std::optional;  // NOLINT
#else
using c10::nullopt;
using c10::optional;
#endif

using Dtype = at::ScalarType;

constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
#endif

constexpr auto kU8 = kUInt8;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
