#include "runtime/model/logprob_gradient.hpp"

#include "runtime/model/fused_ops.hpp"
#include "runtime/model/train_ops.hpp"

#include <ATen/ATen.h>

// CMakeLists.txt defines KBRL_WITH_FUSED_KERNELS=1 for this file where the kernels compile.
#ifndef KBRL_WITH_FUSED_KERNELS
#define KBRL_WITH_FUSED_KERNELS 0
#endif

#if KBRL_WITH_FUSED_KERNELS
#include "runtime/model/fused_launch.hpp"

#include <c10/cuda/CUDAGuard.h>
#endif

namespace kbrl::model {

std::optional<logprobs_and_gradient> fused_logprobs_and_gradient(const transformer& model,
                                                                 const at::Tensor& hidden,
                                                                 const at::Tensor& targets,
                                                                 double temperature) {
#if KBRL_WITH_FUSED_KERNELS
  const auto& lm_head = model.lm_head();
  const bool fits = train_kernels_wanted() && fused_kernel_applies(hidden) && hidden.dim() == 3
                    && targets.dim() == 2 && targets.size(0) == hidden.size(0)
                    && targets.size(1) == hidden.size(1) && targets.device() == hidden.device()
                    && lm_head.scalar_type() == hidden.scalar_type()
                    && lm_head.device() == hidden.device() && temperature >= 0;
  if (!fits)
    return std::nullopt;
  c10::cuda::CUDAGuard guard(hidden.device());
  const int64_t batch = hidden.size(0), n = hidden.size(1), width = hidden.size(2);
  const double t = temperature > 0 ? temperature : 1.0; // as token_logprobs
  // The logits as transformer::logits() computes them before widening them to float32.
  auto logits = at::linear(hidden.reshape({batch * n, width}), lm_head).contiguous();
  const auto rows_targets = targets.reshape({batch * n}).to(at::kLong).contiguous();
  auto out = at::empty({batch * n}, hidden.options().dtype(at::kFloat));
  check_launch(cuda::token_logprob_gradient(element_type_of(logits.scalar_type()),
                                            logits.data_ptr(), rows_targets.data_ptr<int64_t>(),
                                            out.data_ptr<float>(), batch * n, logits.size(1),
                                            static_cast<float>(t), stream_of(logits)),
               "token_logprob_gradient");
  // `logits` now holds d logprob / d logits: the linear's input gradient.
  const auto grad_hidden = at::mm(logits, lm_head).view({batch, n, width});
  return logprobs_and_gradient{out.view({batch, n}), grad_hidden};
#else
  (void)model, (void)hidden, (void)targets, (void)temperature;
  return std::nullopt;
#endif
}

} // namespace kbrl::model
