#pragma once
// The trainable LoRA factors of a model, kept in one flat parameter vector and one flat gradient
// vector (the "bucket"):
//
//   values    [P]  A of the first targeted module, then its B, then the next module's, ... in
//                  network order (model.layers.0.self_attn.q_proj first)
//   grads     [P]  the same layout
//
// Each factor is a leaf tensor viewing its slice of `values`, with requires_grad; its .grad is
// set to the matching slice of `grads` before the first backward, so autograd accumulates every
// factor's gradient straight into the bucket (in place: autograd adds into an existing .grad).
// Clipping, the optimiser and a data-parallel all-reduce then each act on one tensor, and
// updating `values` in place updates the factors the model uses.
//
// The factors are attached to the model's linear layers for as long as this object lives (the
// model then computes with the current values); the model must outlive it and stay at its
// address, and nothing else may change the model's LoRA factors meanwhile (the generation
// engine's set_adapter would).

#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kbrl::train {

/// Where one targeted module's factors lie in the flat vectors.
struct lora_slot {
  std::string module;                    ///< "model.layers.0.self_attn.q_proj"
  int64_t in_features = 0, out_features = 0;
  int64_t a_offset = 0;                  ///< A [r, in] starts here
  int64_t b_offset = 0;                  ///< B [out, r] starts here
  model::linear_layer* layer = nullptr;  ///< the model's layer it is attached to
  at::Tensor a, b;                       ///< leaf views of values (see above)
};

/// The flat trainable adapter of one model.
class lora_parameters {
public:
  /// Fresh factors for the modules `config` targets, initialised as PEFT does: A from
  /// kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), B zero, drawn in slot order
  /// by a CPU generator seeded with `seed`; stored in `dtype` on the model's device and attached
  /// to the model. Fails with errc::invalid_argument if the config targets no module of the
  /// model, for r < 1 or lora_alpha <= 0.
  static caf::expected<lora_parameters> create(model::transformer& model,
                                               const model::lora_config& config, uint64_t seed,
                                               at::ScalarType dtype = at::kFloat);

  /// Factors copied from `adapter` (checked against the model first).
  static caf::expected<lora_parameters> from_adapter(model::transformer& model,
                                                     const model::lora_adapter& adapter,
                                                     at::ScalarType dtype = at::kFloat);

  lora_parameters(lora_parameters&& other) noexcept;
  lora_parameters& operator=(lora_parameters&& other) noexcept;
  /// Detaches the factors from the model.
  ~lora_parameters();

  const model::lora_config& config() const { return config_; }
  const std::vector<lora_slot>& slots() const { return slots_; }
  /// Number of trainable values, P.
  int64_t size() const { return values_.numel(); }

  /// The flat parameters; in-place changes (under no_grad) are seen by the model.
  at::Tensor& values() { return values_; }
  const at::Tensor& values() const { return values_; }
  /// The flat gradient bucket.
  at::Tensor& grads() { return grads_; }
  const at::Tensor& grads() const { return grads_; }

  /// The leaf factor tensors in slot order (A, B, A, B, ...), for autograd.
  std::vector<at::Tensor> leaves() const;

  /// Zeroes the gradient bucket (and re-points each factor's .grad at it, in case autograd
  /// replaced one).
  void zero_grad();

  /// Sets LoRA dropout on every attached layer: probability `p` with masks from `generator`
  /// (training), or none (p = 0: evaluation).
  void set_dropout(double p, const at::Generator& generator);

  /// Whether the attached factors compute their terms in the layer input's dtype (cast to it in
  /// each forward) rather than widening the input to theirs: lora_factors::compute_in_input_dtype
  /// on every attached layer, now and on later attaches. Default false.
  void set_compute_in_input_dtype(bool on);

  /// Detaches the factors from the model (the base model) or attaches them again.
  void detach_from_model();
  void attach_to_model();

  /// The current factors as a PEFT adapter: float32 copies on the CPU.
  model::lora_adapter to_adapter() const;

  /// Copies the factors of `adapter` (same modules and rank) into `values`. Fails with
  /// errc::invalid_argument naming the module whose factor is missing or of another shape.
  caf::expected<void> load(const model::lora_adapter& adapter);

private:
  lora_parameters() = default;
  /// Lays out the slots of `config` over the model's layers and allocates the vectors.
  static caf::expected<lora_parameters> layout(model::transformer& model,
                                               const model::lora_config& config,
                                               at::ScalarType dtype);
  void bind_views();

  model::transformer* model_ = nullptr;
  model::lora_config config_;
  std::vector<lora_slot> slots_;
  at::Tensor values_, grads_;
  double dropout_ = 0;
  at::Generator generator_;
  bool compute_in_input_dtype_ = false;
  bool attached_ = false;
};

} // namespace kbrl::train
