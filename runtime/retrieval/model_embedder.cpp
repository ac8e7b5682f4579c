#include "runtime/retrieval/model_embedder.hpp"
#include "runtime/retrieval/embedder_spec.hpp"

#include "messages/errors.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/transformer.hpp"
#include "messages/error_codes.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace kbrl::retrieval {

struct model_embedder::impl {
  model_embedder_options options;
  model::transformer model;
  tok::tokenizer tokenizer;
  std::optional<int32_t> eos;
  std::string name;
};

namespace {

caf::expected<at::Device> parse_device(const std::string& text) {
  if (text == "cpu")
    return at::Device(at::kCPU);
  if (text == "cuda")
    return at::Device(at::kCUDA, 0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5
      && std::all_of(text.begin() + 5, text.end(), ::isdigit) && text.size() < 9)
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(std::stoi(text.substr(5))));
  return make_error(errc::invalid_config, "model_embedder_options.device: expected cpu, cuda or "
                                          "cuda:N, got \"" + text + "\"");
}

caf::expected<void> check_options(const model_embedder_options& o) {
  std::vector<std::string> problems;
  if (o.path.empty())
    problems.push_back("model_embedder_options.path: required (a model directory)");
  if (o.pooling != "last" && o.pooling != "mean")
    problems.push_back("model_embedder_options.pooling: expected last or mean, got \"" + o.pooling
                       + "\"");
  if (o.dtype != "fp32" && o.dtype != "bf16")
    problems.push_back("model_embedder_options.dtype: expected fp32 or bf16, got \"" + o.dtype
                       + "\"");
  if (o.batch_size < 1 || o.batch_size > 1024)
    problems.push_back("model_embedder_options.batch_size: expected 1..1024, got "
                       + std::to_string(o.batch_size));
  if (o.max_tokens < 2 || o.max_tokens > 131072)
    problems.push_back("model_embedder_options.max_tokens: expected 2..131072, got "
                       + std::to_string(o.max_tokens));
  if (problems.empty())
    return {};
  std::string text;
  for (auto& p : problems)
    text += (text.empty() ? "" : "\n") + p;
  return make_error(errc::invalid_config, std::move(text));
}

} // namespace

model_embedder::model_embedder(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
model_embedder::~model_embedder() = default;

caf::expected<std::unique_ptr<model_embedder>>
model_embedder::load(const model_embedder_options& options) {
  if (auto ok = check_options(options); !ok)
    return std::move(ok.error());
  auto device = parse_device(options.device);
  if (!device)
    return std::move(device.error());
  model::transformer_options topts;
  topts.device = *device;
  topts.dtype = options.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  auto m = [&]() -> caf::expected<model::transformer> {
    try {
      return model::transformer::load(options.path, topts);
    } catch (const std::exception& e) { // e.g. CUDA unavailable
      return make_error(errc::internal, "model embedder " + options.path + ": " + e.what());
    }
  }();
  if (!m)
    return reworded(m.error(), "model embedder: ");
  auto t = tok::tokenizer::load(options.path);
  if (!t)
    return reworded(t.error(), "model embedder: ");
  std::optional<int32_t> eos = t->eos_id();
  if (!eos && !m->eos_token_ids().empty())
    eos = static_cast<int32_t>(m->eos_token_ids().front());
  if (options.append_eos && !eos)
    return make_error(errc::invalid_config,
                      "model embedder " + options.path
                        + ": append_eos is set but neither tokenizer_config.json nor the model "
                          "config names an end-of-sequence token");
  auto p = std::make_unique<impl>(impl{options, std::move(*m), std::move(*t), eos,
                                       std::filesystem::path(options.path).filename().string()});
  if (p->name.empty()) // a path ending in "/"
    p->name = std::filesystem::path(options.path).parent_path().filename().string();
  return std::unique_ptr<model_embedder>(new model_embedder(std::move(p)));
}

embedder_identity model_embedder::identity() const {
  return {"model", impl_->name, impl_->options.pooling,
          static_cast<int32_t>(impl_->model.config().hidden_size)};
}

std::vector<int32_t> model_embedder::token_ids(const std::string& text) const {
  auto ids = impl_->tokenizer.encode_ordinary(text);
  const bool eos = impl_->options.append_eos && impl_->eos.has_value();
  const size_t keep = static_cast<size_t>(impl_->options.max_tokens) - (eos ? 1 : 0);
  if (ids.size() > keep)
    ids.resize(keep);
  if (eos)
    ids.push_back(*impl_->eos);
  if (ids.empty()) // an empty text without an end token: embed one padding-like token
    ids.push_back(0);
  return ids;
}

caf::expected<std::vector<float>> model_embedder::embed(const std::vector<std::string>& texts) {
  auto& st = *impl_;
  const int64_t hidden = st.model.config().hidden_size;
  const int64_t vocab = st.model.config().vocab_size;
  std::vector<float> out(texts.size() * static_cast<size_t>(hidden));
  std::vector<std::vector<int32_t>> ids(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ids[i] = token_ids(texts[i]);
    for (int32_t id : ids[i])
      if (id < 0 || id >= vocab)
        return make_error(errc::invalid_argument,
                          "model embedder " + st.name + ": token id " + std::to_string(id)
                            + " of text " + std::to_string(i) + " is outside the model's "
                            + std::to_string(vocab) + "-token vocabulary");
  }
  // Similar lengths together: less padding.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  const auto device = st.model.options().device;
  try {
    c10::InferenceMode guard;
    const size_t batch = static_cast<size_t>(st.options.batch_size);
    for (size_t from = 0; from < order.size(); from += batch) {
      const size_t to = std::min(order.size(), from + batch);
      const int64_t rows = static_cast<int64_t>(to - from);
      int64_t seq = 0;
      for (size_t k = from; k < to; ++k)
        seq = std::max<int64_t>(seq, static_cast<int64_t>(ids[order[k]].size()));
      auto tokens = at::zeros({rows, seq}, at::kLong);
      auto valid = at::zeros({rows, seq}, at::kBool);
      auto lengths = at::zeros({rows}, at::kLong);
      auto tok = tokens.accessor<int64_t, 2>();
      auto val = valid.accessor<bool, 2>();
      auto len = lengths.accessor<int64_t, 1>();
      for (int64_t r = 0; r < rows; ++r) {
        const auto& t = ids[order[from + static_cast<size_t>(r)]];
        for (size_t j = 0; j < t.size(); ++j) {
          tok[r][static_cast<int64_t>(j)] = t[j];
          val[r][static_cast<int64_t>(j)] = true;
        }
        len[r] = static_cast<int64_t>(t.size());
      }
      tokens = tokens.to(device);
      valid = valid.to(device);
      auto positions = at::arange(seq, at::TensorOptions().dtype(at::kLong).device(device))
                         .unsqueeze(0)
                         .expand({rows, seq});
      auto h = st.model.forward(tokens, positions, model::causal_mask(valid)).to(at::kFloat);
      at::Tensor pooled;
      if (st.options.pooling == "last") {
        auto last = (lengths - 1).to(device);
        pooled = h.index({at::arange(rows, last.options()), last});
      } else {
        auto w = valid.to(at::kFloat).unsqueeze(-1);
        pooled = (h * w).sum(1) / w.sum(1);
      }
      pooled = pooled.to(at::kCPU).contiguous();
      const float* src = pooled.data_ptr<float>();
      for (int64_t r = 0; r < rows; ++r)
        std::copy(src + r * hidden, src + (r + 1) * hidden,
                  out.begin() + static_cast<std::ptrdiff_t>(order[from + static_cast<size_t>(r)]
                                                            * static_cast<size_t>(hidden)));
    }
  } catch (const std::exception& e) {
    return make_error(errc::internal, "model embedder " + st.name + ": forward failed: "
                                        + e.what());
  }
  for (float x : out)
    if (!std::isfinite(x))
      return make_error(errc::internal, "model embedder " + st.name
                                          + ": the hidden states hold non-finite values");
  normalize_rows(out, static_cast<int32_t>(hidden));
  return out;
}

void install_model_embedder() {
  set_model_embedder_loader(
    [](const model_embedder_options& options) -> caf::expected<std::unique_ptr<embedder>> {
      auto e = model_embedder::load(options);
      if (!e)
        return std::move(e.error());
      return std::unique_ptr<embedder>(std::move(*e));
    });
}

} // namespace kbrl::retrieval
