#include "runtime/model/sampling.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <mutex>

namespace kbrl::model {

sampled_tokens sample_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens: logits must be [rows, vocab], got ",
              logits.sizes());
  const int64_t n = logits.size(0), vocab = logits.size(1);
  TORCH_CHECK(static_cast<int64_t>(rows.size()) == n, "sample_tokens: ", rows.size(),
              " settings for ", n, " rows");
  const auto device = logits.device();
  const auto wide = logits.to(at::kFloat);

  // The rows' settings go to the device in one copy: [4, n] float32 rows temperature, top_k
  // (exact in float32: a vocabulary is far below 2^24), top_p and greedy (1 or 0).
  std::vector<float> settings(4 * static_cast<std::size_t>(n));
  float* temperature = settings.data();
  float* top_k = temperature + n;
  float* top_p = top_k + n;
  float* greedy = top_p + n;
  bool any_sampled = false, any_greedy = false, any_truncated = false;
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    const bool is_greedy = r.temperature <= 0;
    greedy[i] = is_greedy ? 1.0f : 0.0f;
    temperature[i] = is_greedy ? 1.0f : static_cast<float>(r.temperature);
    top_k[i] = static_cast<float>(r.top_k > 0 && r.top_k < vocab ? r.top_k : vocab);
    // A top_p of 1 must keep everything, even where the float cumulative sum reaches 1 early.
    top_p[i] = r.top_p < 1.0 ? static_cast<float>(r.top_p) : std::numeric_limits<float>::infinity();
    if (is_greedy) {
      any_greedy = true;
    } else {
      TORCH_CHECK(r.generator != nullptr, "sample_tokens: row ", i, " samples without a generator");
      any_sampled = true;
      any_truncated = any_truncated || (r.top_k > 0 && r.top_k < vocab) || r.top_p < 1.0;
    }
  }
  // On the CPU this is a view of `settings`, which outlives every use below.
  const auto on_device =
    at::from_blob(settings.data(), {4, n}, at::TensorOptions().dtype(at::kFloat)).to(device);
  const auto logp = at::log_softmax(wide / on_device[0].unsqueeze(1), -1);
  auto choice = wide.argmax(-1);

  if (any_sampled) {
    auto kept_logp = logp;
    if (any_truncated) {
      // Sorted most likely first; a stable sort keeps the lower id first among equals.
      auto [sorted, order] = logp.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
      const auto rank = at::arange(vocab, order.options()).unsqueeze(0);
      auto drop = rank >= on_device[1].to(at::kLong).unsqueeze(1);
      const auto probs = sorted.exp().masked_fill(drop, 0.0);
      const auto before = (probs.cumsum(-1) - probs) / probs.sum(-1, /*keepdim=*/true);
      drop = drop.logical_or(before >= on_device[2].unsqueeze(1));
      const auto dropped = at::zeros_like(drop).scatter(-1, order, drop);
      kept_logp = logp.masked_fill(dropped, -std::numeric_limits<float>::infinity());
    }
    // Each sampled row draws its noise from its own generator (what makes a request's tokens
    // independent of its batch); greedy rows keep a noise of 1, whose draw is discarded.
    auto noise = any_greedy ? at::ones_like(wide) : at::empty_like(wide);
    for (int64_t i = 0; i < n; ++i)
      if (greedy[i] == 0.0f)
        noise.select(0, i).exponential_(1.0, *rows[i].generator);
    const auto drawn = (kept_logp - noise.clamp_min(1e-30).log()).argmax(-1);
    choice = any_greedy ? at::where(on_device[3] > 0.5f, choice, drawn) : drawn;
  }
  const auto chosen_logp = logp.gather(-1, choice.unsqueeze(1)).squeeze(1);

  // One copy back (one synchronisation): ids as float32 are exact below 2^24.
  sampled_tokens out;
  out.ids.resize(n);
  out.logprobs.resize(n);
  if (vocab <= (int64_t{1} << 24)) {
    const auto both = at::stack({choice.to(at::kFloat), chosen_logp}).to(at::kCPU).contiguous();
    const float* p = both.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      out.ids[i] = static_cast<int32_t>(p[i]);
      out.logprobs[i] = p[n + i];
    }
  } else {
    const auto ids = choice.to(at::kCPU, at::kInt).contiguous();
    const auto lps = chosen_logp.to(at::kCPU).contiguous();
    out.ids.assign(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + n);
    out.logprobs.assign(lps.data_ptr<float>(), lps.data_ptr<float>() + n);
  }
  return out;
}

at::Generator make_generator(uint64_t seed, at::Device device) {
  if (device.is_cpu())
    return at::detail::createCPUGenerator(seed);
  at::Generator base = at::globalContext().defaultGenerator(device); // shares the generator
  at::Generator gen;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    gen = base.clone();
  }
  gen.set_current_seed(seed);
  return gen;
}

caf::expected<void> check_sampling_params(const sampling_params& p) {
  std::vector<std::string> problems;
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    problems.push_back("temperature: expected a number >= 0 (0: greedy), got "
                       + std::to_string(p.temperature));
  if (!(p.top_p > 0 && p.top_p <= 1))
    problems.push_back("top_p: expected a number in (0, 1], got " + std::to_string(p.top_p));
  if (p.top_k < 0)
    problems.push_back("top_k: expected an integer >= 0 (0: off), got "
                       + std::to_string(p.top_k));
  if (p.max_new_tokens <= 0)
    problems.push_back("max_new_tokens: expected an integer > 0, got "
                       + std::to_string(p.max_new_tokens));
  for (const auto& s : p.stop_strings)
    if (s.empty())
      problems.push_back("stop_strings: an empty stop string would stop before any text");
  if (!problems.empty())
    return make_error(errc::invalid_argument, "sampling parameters: " + join(problems, "; "));
  return {};
}

} // namespace kbrl::model
