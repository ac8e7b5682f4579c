#include "runtime/model/sampling.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/device_transfer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>

// CMakeLists.txt defines KBRL_WITH_FUSED_KERNELS=1 for this file where it compiles
// runtime/model/cuda/*.cu (a libtorch with CUDA and nvcc).
#ifndef KBRL_WITH_FUSED_KERNELS
#define KBRL_WITH_FUSED_KERNELS 0
#endif

#if KBRL_WITH_FUSED_KERNELS
#include "runtime/model/fused_launch.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace kbrl::model {

namespace {

bool truncates(const sampling_row& r, int64_t vocab) {
  return (r.top_k > 0 && r.top_k < vocab) || r.top_p < 1.0;
}

#if KBRL_WITH_FUSED_KERNELS
/// KBRL_SAMPLING=composition keeps CUDA rows on the libtorch composition (to compare the two on a
/// device, as bench/sampler_throughput does); read once.
bool race_kernels_enabled() {
  static const bool enabled = [] {
    const char* choice = std::getenv("KBRL_SAMPLING");
    return choice == nullptr || std::string(choice) != "composition";
  }();
  return enabled;
}

/// Whether race_sample_on_device() takes `logits` at all: CUDA, a kernel dtype, unit stride
/// along the vocabulary, fewer than 2^24 entries (tokens travel as float32).
bool race_kernels_take(const at::Tensor& logits) {
  const auto type = logits.scalar_type();
  return race_kernels_enabled() && logits.is_cuda() && logits.size(1) < (int64_t{1} << 24)
         && logits.stride(1) == 1
         && (type == at::kFloat || type == at::kHalf || type == at::kBFloat16);
}

/// Whether row `r` of logits the kernels take is theirs: greedy, or sampled without top-k / top-p
/// with a generator on the logits' device. The choice depends on the row alone, so a request
/// takes the same path (and draws the same tokens) however it is batched.
bool race_kernels_take_row(const sampling_row& r, const at::Tensor& logits) {
  return r.temperature <= 0
         || (!truncates(r, logits.size(1)) && r.generator->device() == logits.device());
}

/// sample_tokens() in two kernels (cuda/sample_kernel.cuh) for rows the kernels take (above).
/// Each sampled row's generator gives the call its Philox stream (and advances, as exponential_
/// would advance it).
at::Tensor race_sample_on_device(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  const int64_t n = logits.size(0), vocab = logits.size(1);
  std::vector<cuda::sample_row> settings(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    auto& s = settings[i];
    if (r.temperature <= 0) {
      s.greedy = 1;
      continue;
    }
    s.temperature = static_cast<float>(r.temperature);
    auto* impl = at::check_generator<at::CUDAGeneratorImpl>(*r.generator);
    std::lock_guard<std::mutex> lock(r.generator->mutex());
    // 4: the increment philox offsets take; the kernel's counters use the offset as it is
    std::tie(s.seed, s.offset) = impl->philox_engine_inputs(4);
  }
  c10::cuda::CUDAGuard guard(logits.device());
  const auto bytes = static_cast<int64_t>(settings.size() * sizeof(cuda::sample_row));
  const auto on_device =
    upload(at::from_blob(settings.data(), {bytes}, at::kByte), logits.device());
  const auto partials = at::empty({n * cuda::sample_slices(vocab) * 4},
                                  logits.options().dtype(at::kFloat));
  const auto result = at::empty({2, n}, logits.options().dtype(at::kFloat));
  check_launch(cuda::race_sample(element_type_of(logits.scalar_type()), logits.data_ptr(),
                                 logits.stride(0), n, vocab,
                                 reinterpret_cast<const cuda::sample_row*>(on_device.data_ptr()),
                                 partials.data_ptr<float>(), result.data_ptr<float>(),
                                 stream_of(logits)),
               "race_sample");
  return result; // ids as float32 (exact: the vocabulary is below 2^24), log-probabilities
}
#endif

/// sample_tokens() by libtorch operations (the CPU's path, and CUDA's for rows with top-k / top-p).
at::Tensor sample_by_composition(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  const int64_t n = logits.size(0), vocab = logits.size(1);
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
      any_sampled = true;
      any_truncated = any_truncated || truncates(r, vocab);
    }
  }
  const auto on_device = upload(at::from_blob(settings.data(), {4, n}, at::kFloat), device);
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

  // One tensor for one copy back: ids as float32 are exact below 2^24, as float64 beyond.
  const auto wide_enough = vocab <= (int64_t{1} << 24) ? at::kFloat : at::kDouble;
  return at::stack({choice.to(wide_enough), chosen_logp.to(wide_enough)});
}

#if KBRL_WITH_FUSED_KERNELS
/// The rows `kernel_rows` by the race kernels and `other_rows` by the composition, each part on
/// its own copy of its logits rows, put back in the batch's order.
at::Tensor sample_in_two_parts(const at::Tensor& logits, const std::vector<sampling_row>& rows,
                               const std::vector<int64_t>& kernel_rows,
                               const std::vector<int64_t>& other_rows) {
  // Both parts are float32 [2, part's rows]: the kernels take vocabularies below 2^24 only.
  auto out = at::empty({2, static_cast<int64_t>(rows.size())},
                       logits.options().dtype(at::kFloat));
  for (const bool kernels : {true, false}) {
    const auto& which = kernels ? kernel_rows : other_rows;
    std::vector<sampling_row> settings;
    for (auto i : which)
      settings.push_back(rows[i]);
    const auto where = upload_indices(which, logits.device());
    const auto sub = logits.index_select(0, where);
    const auto part = kernels ? race_sample_on_device(sub, settings)
                              : sample_by_composition(sub, settings);
    out.index_copy_(1, where, part);
  }
  return out;
}
#endif

/// sample_tokens() on the device: [2, rows] of ids (exact integers) and log-probabilities.
at::Tensor draw_on_device(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens: logits must be [rows, vocab], got ",
              logits.sizes());
  const int64_t n = logits.size(0);
  TORCH_CHECK(static_cast<int64_t>(rows.size()) == n, "sample_tokens: ", rows.size(),
              " settings for ", n, " rows");
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(rows[i].temperature <= 0 || rows[i].generator != nullptr, "sample_tokens: row ",
                i, " samples without a generator");
#if KBRL_WITH_FUSED_KERNELS
  if (n > 0 && race_kernels_take(logits)) {
    // Each row goes the way it would go alone: the kernels' rows and the others' separately.
    std::vector<int64_t> kernel_rows, other_rows;
    for (int64_t i = 0; i < n; ++i)
      (race_kernels_take_row(rows[i], logits) ? kernel_rows : other_rows).push_back(i);
    if (other_rows.empty())
      return race_sample_on_device(logits, rows);
    if (!kernel_rows.empty())
      return sample_in_two_parts(logits, rows, kernel_rows, other_rows);
  }
#endif
  return sample_by_composition(logits, rows);
}

} // namespace

drawn_tokens draw_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  drawn_tokens out;
  out.packed_ = draw_on_device(logits, rows);
#if KBRL_WITH_FUSED_KERNELS
  if (out.packed_.is_cuda()) {
    c10::cuda::CUDAGuard guard(out.packed_.device());
    out.host_ = at::empty(out.packed_.sizes(),
                          out.packed_.options().device(at::kCPU).pinned_memory(true));
    out.host_.copy_(out.packed_, /*non_blocking=*/true);
    auto copied = std::make_shared<at::cuda::CUDAEvent>();
    copied->record(at::cuda::getCurrentCUDAStream(out.packed_.device().index()));
    out.copied_ = std::move(copied);
    return out;
  }
#endif
  out.host_ = out.packed_.to(at::kCPU); // waits for the device (no pinned memory here)
  return out;
}

sampled_tokens drawn_tokens::wait() {
#if KBRL_WITH_FUSED_KERNELS
  if (copied_)
    static_cast<at::cuda::CUDAEvent*>(copied_.get())->synchronize();
#endif
  const auto both = host_.to(at::kDouble).contiguous();
  const int64_t n = both.size(1);
  const double* p = both.data_ptr<double>();
  sampled_tokens out;
  out.ids.resize(n);
  out.logprobs.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    out.ids[i] = static_cast<int32_t>(p[i]);
    out.logprobs[i] = static_cast<float>(p[n + i]);
  }
  return out;
}

sampled_tokens sample_tokens(const at::Tensor& logits, const std::vector<sampling_row>& rows) {
  return draw_tokens(logits, rows).wait();
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
