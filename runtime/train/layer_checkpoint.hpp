#pragma once
// Gradient checkpointing of decoder layers. libtorch's C++ API has no checkpoint utility, so this
// is a custom autograd function (torch::autograd::Function): its forward runs the layer without
// recording a graph and keeps only the layer's input; its backward runs the layer's forward again
// with autograd on (from the saved input and the same LoRA factors) and back-propagates through
// that. Activation memory per layer drops from everything the layer computes to its input
// [batch, seq, hidden], for about one more forward per backward.
//
// LoRA dropout is reproduced exactly: the dropout generator's state is saved before the forward
// and restored for the recomputation (then put back), so the recomputed layer draws the masks the
// forward drew and later layers continue from where they would have.

#include "runtime/model/rotary.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace kbrl::train {

/// transformer::run_layer(index, hidden, rotary, positions, mask) with the layer's activations
/// recomputed in the backward pass (see above). `mask` may be undefined: causal attention
/// (model/attention.hpp). Gradients reach `hidden` and the LoRA factors
/// attached to the layer's linear layers (the same tensors must stay attached until the backward
/// pass has run). With autograd off, or nothing requiring grad, it is run_layer() itself.
/// The model must outlive the graph.
at::Tensor checkpointed_layer(model::transformer& model, int64_t index, const at::Tensor& hidden,
                              const model::rotary_embedding& rotary, const at::Tensor& positions,
                              const at::Tensor& mask);

} // namespace kbrl::train
