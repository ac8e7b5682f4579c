#include "runtime/model/train_projection.hpp"

#include "runtime/model/fused_ops.hpp"
#include "runtime/model/train_ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace kbrl::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// What the autograd node needs besides the tensors autograd tracks (the LoRA factors).
struct projection_plan {
  at::Tensor weight, bias;          ///< stacked, frozen
  std::vector<int64_t> widths;      ///< each part's output features
  std::vector<int64_t> lora_parts;  ///< the part of each factor pair, in factor order
  std::vector<double> scalings;     ///< each factor pair's scaling
  bool stacked_output = false;      ///< one [..., sum of widths] output instead of one per part
};

std::vector<int64_t> first_columns(const std::vector<int64_t>& widths) {
  std::vector<int64_t> first;
  int64_t column = 0;
  for (const auto w : widths) {
    first.push_back(column);
    column += w;
  }
  return first;
}

/// Forward: y = x W^T + b over the stacked weight plus each LoRA term on its part's columns,
/// (x A^T) B^T scaled, A and B cast to x's dtype: what linear_layer::forward does for one part
/// (the GEMMs' order below). Backward: the parts' output gradients side by side (dy), dx =
/// sum_j (s dy_j B_j) A_j + dy W in two GEMMs, and each factor's gradient in its dtype (as
/// autograd through the cast gives it).
struct stacked_projection_function : torch::autograd::Function<stacked_projection_function> {
  /// `factors` is A, B of each LoRA term in plan->lora_parts order.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList factors,
                               const projection_plan* plan) {
    const int64_t in = x.size(-1);
    const auto rows = x.reshape({-1, in});
    const auto columns = first_columns(plan->widths);
    // Every part with a term and no bias: the terms first, each written into its columns by its
    // rank-r GEMM (beta 0: the fresh memory is not read), then the base GEMM adds onto them
    // (beta 1), where reading the output costs little because that GEMM is compute-bound. The
    // other order adds each term with a rank-r GEMM that reads and writes the whole output
    // again: 36 ms of a 7B step. (A bias would need its own pass here; with one, the base GEMM
    // with its bias comes first, as linear_layer::forward does.)
    const bool terms_first =
      !plan->bias.defined() && plan->lora_parts.size() == plan->widths.size();
    auto y = terms_first ? at::empty({rows.size(0), plan->weight.size(0)}, rows.options())
                         : at::linear(rows, plan->weight, plan->bias); // [rows, sum of widths]
    variable_list saved{rows};
    std::vector<int64_t> factor_dtypes;
    for (std::size_t j = 0; j < plan->lora_parts.size(); ++j) {
      const auto& a = factors[2 * j];
      const auto& b = factors[2 * j + 1];
      const auto a_x = a.to(x.scalar_type()), b_x = b.to(x.scalar_type());
      const auto u = at::mm(rows, a_x.t()); // [rows, r]
      const int64_t part = plan->lora_parts[j];
      y.narrow(1, columns[part], plan->widths[part])
        .addmm_(u, b_x.t(), /*beta=*/terms_first ? 0 : 1, /*alpha=*/plan->scalings[j]);
      saved.insert(saved.end(), {a_x, b_x, u});
      factor_dtypes.push_back(static_cast<int64_t>(a.scalar_type()));
      factor_dtypes.push_back(static_cast<int64_t>(b.scalar_type()));
    }
    if (terms_first)
      y.addmm_(rows, plan->weight.t());
    ctx->save_for_backward(saved);
    ctx->saved_data["weight"] = plan->weight;
    ctx->saved_data["widths"] = plan->widths;
    ctx->saved_data["lora_parts"] = plan->lora_parts;
    ctx->saved_data["scalings"] = plan->scalings;
    ctx->saved_data["factor_dtypes"] = factor_dtypes;
    ctx->saved_data["x_sizes"] = x.sizes().vec();

    ctx->saved_data["stacked_output"] = plan->stacked_output;

    auto shape = x.sizes().vec();
    if (plan->stacked_output) {
      shape.back() = y.size(1);
      return {y.view(shape)};
    }
    variable_list outputs;
    for (std::size_t i = 0; i < plan->widths.size(); ++i) {
      shape.back() = plan->widths[i];
      outputs.push_back(y.narrow(1, columns[i], plan->widths[i]).view(shape));
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& rows = saved[0];
    const auto weight = ctx->saved_data["weight"].toTensor();
    const auto widths = ctx->saved_data["widths"].toIntVector();
    const auto lora_parts = ctx->saved_data["lora_parts"].toIntVector();
    const auto scalings = ctx->saved_data["scalings"].toDoubleVector();
    const auto factor_dtypes = ctx->saved_data["factor_dtypes"].toIntVector();
    const auto x_sizes = ctx->saved_data["x_sizes"].toIntVector();
    const int64_t n = rows.size(0);

    // The stacked GEMM's output gradient: as it came, or the parts' side by side (one cat
    // kernel, whatever the layouts autograd hands over).
    std::vector<at::Tensor> pieces;
    int64_t total = 0;
    for (const auto w : widths)
      total += w;
    const bool stacked_output = ctx->saved_data["stacked_output"].toBool();
    const auto piece_widths = stacked_output ? std::vector<int64_t>{total} : widths;
    for (std::size_t i = 0; i < piece_widths.size(); ++i) {
      auto shape = x_sizes;
      shape.back() = piece_widths[i];
      pieces.push_back(grads[i].defined() ? grads[i].to(rows.scalar_type())
                                          : at::zeros(shape, rows.options()));
    }
    const auto dy = (pieces.size() == 1 ? pieces[0] : at::cat(pieces, -1)).reshape({n, total});
    const auto columns = first_columns(widths);

    // The terms' input gradients du_j A_j go first, as one GEMM over the concatenated ranks
    // that writes dx; the base GEMM dy W then adds onto it (beta 1), the order of the forward.
    const bool need_dx = ctx->needs_input_grad(0);
    std::vector<at::Tensor> term_grads, term_factors; // du_j, A_j
    variable_list out{at::Tensor()};
    for (std::size_t j = 0; j < lora_parts.size(); ++j) {
      const auto& a = saved[1 + 3 * j];
      const auto& b = saved[2 + 3 * j];
      const auto& u = saved[3 + 3 * j];
      const int64_t part = lora_parts[j];
      const double s = scalings[j];
      const auto dy_part = dy.narrow(1, columns[part], widths[part]);
      auto du = at::mm(dy_part, b); // the gradient of u = x A^T, as autograd's addmm gives it
      if (s != 1)
        du.mul_(s);
      if (need_dx) {
        term_grads.push_back(du);
        term_factors.push_back(a);
      }
      at::Tensor da, db;
      if (ctx->needs_input_grad(1 + 2 * j))
        da = at::mm(du.t(), rows).to(static_cast<at::ScalarType>(factor_dtypes[2 * j]));
      if (ctx->needs_input_grad(2 + 2 * j)) {
        db = at::mm(dy_part.t(), u);
        if (s != 1)
          db.mul_(s);
        db = db.to(static_cast<at::ScalarType>(factor_dtypes[2 * j + 1]));
      }
      out.push_back(da);
      out.push_back(db);
    }
    if (need_dx) {
      at::Tensor dx;
      if (term_grads.empty()) {
        dx = at::mm(dy, weight);
      } else {
        dx = term_grads.size() == 1 ? at::mm(term_grads[0], term_factors[0])
                                    : at::mm(at::cat(term_grads, 1), at::cat(term_factors, 0));
        dx.addmm_(dy, weight);
      }
      out[0] = dx.view(x_sizes);
    }
    out.push_back(at::Tensor()); // the plan
    return out;
  }
};

std::vector<at::Tensor> separate_projections(const at::Tensor& x,
                                             const std::vector<const linear_layer*>& parts) {
  std::vector<at::Tensor> outs;
  for (const auto* p : parts)
    outs.push_back(p->forward(x));
  return outs;
}

/// The autograd node for `parts` (stacked_projection_applies holds).
variable_list apply_stacked(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::vector<const linear_layer*>& parts, bool stacked_output) {
  projection_plan plan{weight, bias, {}, {}, {}, stacked_output};
  std::vector<at::Tensor> factors;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& p = *parts[i];
    plan.widths.push_back(p.weight.size(0));
    if (!p.lora.defined())
      continue;
    plan.lora_parts.push_back(static_cast<int64_t>(i));
    plan.scalings.push_back(p.lora.scaling);
    factors.push_back(p.lora.a);
    factors.push_back(p.lora.b);
  }
  return stacked_projection_function::apply(x, at::TensorList(factors), &plan);
}

} // namespace

bool stacked_projection_applies(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias,
                                const std::vector<const linear_layer*>& parts) {
  if (parts.empty() || !x.defined() || x.dim() < 1 || !weight.defined()
      || weight.requires_grad() || (bias.defined() && bias.requires_grad()))
    return false;
  std::vector<const at::Tensor*> weights, biases;
  for (const auto* p : parts) {
    weights.push_back(&p->weight);
    biases.push_back(&p->bias);
    const auto& lora = p->lora;
    if (!lora.defined())
      continue;
    const bool in_x_dtype = lora.compute_in_input_dtype
                            || (lora.a.scalar_type() == x.scalar_type()
                                && lora.b.scalar_type() == x.scalar_type());
    if (!in_x_dtype || p->draws_lora_dropout())
      return false;
  }
  // One part is its own stack.
  if (parts.size() == 1)
    return weight.is_same(parts[0]->weight) && bias.is_same(parts[0]->bias);
  return rows_of(weight, weights) && rows_of(bias, biases);
}

std::vector<at::Tensor> train_projections(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias,
                                          const std::vector<const linear_layer*>& parts) {
  return train_projections(x, weight, bias, parts, train_kernels_wanted());
}

std::vector<at::Tensor> train_projections(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias,
                                          const std::vector<const linear_layer*>& parts,
                                          bool fused) {
  if (!fused || !stacked_projection_applies(x, weight, bias, parts))
    return separate_projections(x, parts);
  return apply_stacked(x, weight, bias, parts, /*stacked_output=*/false);
}

at::Tensor train_stacked_projection(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias,
                                    const std::vector<const linear_layer*>& parts) {
  return train_stacked_projection(x, weight, bias, parts, train_kernels_wanted());
}

at::Tensor train_stacked_projection(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias,
                                    const std::vector<const linear_layer*>& parts, bool fused) {
  if (!fused || !stacked_projection_applies(x, weight, bias, parts)) {
    const auto outs = separate_projections(x, parts);
    return outs.size() == 1 ? outs[0] : at::cat(outs, -1);
  }
  return apply_stacked(x, weight, bias, parts, /*stacked_output=*/true)[0];
}

} // namespace kbrl::model
