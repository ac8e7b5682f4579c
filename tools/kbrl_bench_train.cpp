// kbrl-bench-train: the learner's training throughput, for bench/learner_throughput.
//
//   kbrl-bench-train --config CONFIG.json --dir DIR [--batch 8] [--seq 2048] [--rank 32]
//                    [--checkpointing on|off] [--warmup 2] [--steps 5] [--device cuda|cpu]
//                    [--gpus 0,1] [--cpu-ranks 1] [--dtype bf16|fp32] [--micro-batch-tokens N]
//                    [--peak-tflops 790] [--label NAME] [--out result.json]
//                    [--lora-compute base|float32] [--attention causal|mask]
//
// Writes a random-initialised checkpoint of CONFIG into DIR once (reused after), loads it once
// per device, and trains a LoRA adapter (rank --rank, alpha 2 x rank, on all linear layers,
// AdamW, clipping at 1) with the supervised loss on --batch sequences of --seq random tokens per
// replica (the first token is the prompt, the other seq - 1 are trained on: the positions a
// causal-LM loss over seq tokens covers). --gpus runs one data-parallel replica per GPU, each
// with its own --batch sequences (the step trains batch x replicas sequences). --warmup steps
// are not timed; --steps are, one by one, after a device synchronisation. --lora-compute and
// --attention choose between the trainer's faster paths (the defaults) and the older ones, to
// measure each change: LoRA terms in the base dtype or in float32 (trainer_options::
// lora_compute), causal attention without a mask tensor or through the explicit boolean mask
// (trainer_options::explicit_attention_mask). --profile TRACE.json runs one more step under
// libtorch's kernel profiler, prints its longest kernels and writes the Chrome trace.
//
// Figures: tokens per second (all tokens of the step / mean step time), model FLOPs utilisation
// and peak CUDA memory (c10's caching allocator: the peak of allocated bytes during the timed
// steps, per device; on a build without it the device-wide use after the steps).
//
// FLOPs counted per token (T = --seq, N_mm = the frozen matmul weights: every *_proj and lm_head,
// the embedding lookup excluded; N_lora = the trainable factors; attention per layer over a
// causal context of (T + 1) / 2 positions on average):
//   forward    2 N_mm + 2 N_lora + A,            A = 4 x layers x heads x head_dim x (T + 1) / 2
//   backward   2 N_mm (input gradients only: the frozen weights get none) + 4 N_lora + 2 A
//   model FLOPs  = 4 N_mm + 6 N_lora + 3 A      (the usual 6 N less the frozen weight gradients)
//   hardware FLOPs add the recomputed forward of the decoder layers under gradient
//   checkpointing: + 2 (N_mm - N_lm_head) + 2 N_lora + A
// MFU = model FLOPs x tokens / step time / (replicas x --peak-tflops); ANCHORS.md measured
// 790 TFLOP/s of bf16 dense matmul on an H200 (798 on an H100).

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/device/kernel_profile.hpp"
#include "runtime/io/elapsed.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/train/data_parallel.hpp"
#include "runtime/train/memory_usage.hpp"

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>

#if KBRL_HAVE_CUDA_ALLOCATOR
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

using namespace kbrl;
namespace fs = std::filesystem;

namespace {

void synchronize(const at::Device& d) {
  if (d.is_cuda())
    at::empty({1}, at::TensorOptions().device(d)).cpu(); // waits for the device's work
}

/// The per-token FLOPs of the header comment.
struct flop_counts {
  double model = 0, hardware = 0;
  double matmul_weights = 0, lm_head = 0, lora = 0, attention = 0;
};

flop_counts count_flops(const model::model_config& c, int64_t seq, double lora_parameters,
                        bool checkpointing) {
  flop_counts f;
  for (const auto& w : model::expected_weights(c)) {
    if (w.shape.size() != 2)
      continue;
    const double n = static_cast<double>(w.shape[0]) * static_cast<double>(w.shape[1]);
    const bool projection = w.name.size() > 12
                            && w.name.compare(w.name.size() - 12, 12, "_proj.weight") == 0;
    if (projection)
      f.matmul_weights += n;
    else if (w.name == "lm_head.weight")
      f.lm_head = n;
  }
  if (c.tie_word_embeddings) // lm_head multiplies by the embedding matrix
    f.lm_head = static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);
  f.matmul_weights += f.lm_head;
  f.lora = lora_parameters;
  const double head_dim = static_cast<double>(c.head_dim > 0 ? c.head_dim
                                                             : c.hidden_size / c.num_attention_heads);
  f.attention = 4.0 * static_cast<double>(c.num_hidden_layers)
                * static_cast<double>(c.num_attention_heads) * head_dim
                * (static_cast<double>(seq) + 1) / 2;
  f.model = 4 * f.matmul_weights + 6 * f.lora + 3 * f.attention;
  f.hardware = f.model;
  if (checkpointing)
    f.hardware += 2 * (f.matmul_weights - f.lm_head) + 2 * f.lora + f.attention;
  return f;
}

struct memory_peak {
  int64_t allocated = -1, reserved = -1, device_used = -1;
};

void reset_peak(const at::Device& d) {
#if KBRL_HAVE_CUDA_ALLOCATOR
  if (d.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(d.index());
#endif
}

memory_peak read_peak(const at::Device& d) {
  memory_peak m;
  if (!d.is_cuda())
    return m;
#if KBRL_HAVE_CUDA_ALLOCATOR
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
  m.allocated = stats.allocated_bytes[0].peak; // [0]: the aggregate over pool kinds
  m.reserved = stats.reserved_bytes[0].peak;
#endif
  if (auto used = train::cuda_memory(d.index()))
    m.device_used = used->first;
  return m;
}

int fail(const std::string& out_path, const std::string& label, const std::string& what) {
  std::fprintf(stderr, "kbrl-bench-train: %s\n", what.c_str());
  if (!out_path.empty()) {
    kbrl::json_writer w;
    w.begin_object().field("label", label).field("error", what).end_object();
    std::ofstream(out_path) << w.str() << "\n";
  }
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-bench-train: LoRA training throughput on a random-initialised model"};
  std::string config_path, dir, device = "cuda", dtype = "bf16", out_path, label = "kbrl",
                                checkpointing = "on", lora_compute = "base",
                                attention = "causal", profile_path;
  std::vector<int> gpus;
  int batch = 8, rank = 32, warmup = 2, steps = 5, cpu_ranks = 1;
  int64_t seq = 2048, micro_batch_tokens = 0;
  double peak_tflops = 790;
  app.add_option("--config", config_path, "config.json of the model shapes")->required();
  app.add_option("--dir", dir, "Where the random checkpoint is written (reused if present)")
    ->required();
  app.add_option("--batch", batch, "Sequences per replica per step")->check(CLI::PositiveNumber);
  app.add_option("--seq", seq, "Tokens per sequence")->check(CLI::Range(2, 1 << 20));
  app.add_option("--rank", rank, "LoRA rank")->check(CLI::PositiveNumber);
  app.add_option("--checkpointing", checkpointing, "Gradient checkpointing")
    ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "Timed steps")->check(CLI::PositiveNumber);
  app.add_option("--device", device, "cuda or cpu (with --gpus: ignored)");
  app.add_option("--gpus", gpus, "CUDA devices, one data-parallel replica each")->delimiter(',');
  app.add_option("--cpu-ranks", cpu_ranks, "Data-parallel replicas on the CPU (Gloo)")
    ->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype, "Base weights")->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_option("--micro-batch-tokens", micro_batch_tokens,
                 "Padded tokens per micro-batch (default: the replica's whole batch at once)");
  app.add_option("--lora-compute", lora_compute, "LoRA terms in the base dtype or in float32")
    ->check(CLI::IsMember({"base", "float32"}));
  app.add_option("--attention", attention,
                 "Causal attention without a mask tensor, or through the explicit mask")
    ->check(CLI::IsMember({"causal", "mask"}));
  app.add_option("--peak-tflops", peak_tflops, "The device's dense bf16 peak, for MFU");
  app.add_option("--label", label, "Name of this row in the results");
  app.add_option("--out", out_path, "Write the figures as JSON here");
  app.add_option("--profile", profile_path,
                 "After the timed steps, profile one more step's kernels; the Chrome trace goes "
                 "here");
  kbrl::config::add_version_flag(app, "kbrl-bench-train");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  auto config = model::load_model_config(config_path);
  if (!config)
    return fail(out_path, label, config_path + ": " + describe(config.error()));
  if (seq > config->max_position_embeddings)
    config->max_position_embeddings = seq;
  if (!fs::exists(fs::path(dir) / "config.json")) {
    std::printf("writing a random %s checkpoint into %s\n", config->model_type.c_str(),
                dir.c_str());
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    const auto st = dtype == "bf16" ? model::st_dtype::bf16 : model::st_dtype::f32;
    if (auto ok = model::write_random_checkpoint(dir, *config, 1, st); !ok)
      return fail(out_path, label, dir + ": " + describe(ok.error()));
    std::printf("  written in %.1f s\n", seconds_since(t0));
  }

  std::vector<at::Device> devices;
  for (int g : gpus)
    devices.emplace_back(at::kCUDA, static_cast<c10::DeviceIndex>(g));
  if (devices.empty())
    for (int i = 0; i < (device == "cpu" ? cpu_ranks : 1); ++i)
      devices.emplace_back(device);
  const int replicas = static_cast<int>(devices.size());

  train::trainer_options o;
  o.lora_r = rank;
  o.lora_alpha = 2.0 * rank;
  o.adamw.lr = 1e-4;
  o.clip_norm = 1.0;
  o.loss.kind = rl::policy_loss_kind::supervised;
  o.aggregation = rl::loss_aggregation::token;
  o.gradient_checkpointing = checkpointing == "on";
  o.micro_batch_tokens = micro_batch_tokens > 0 ? micro_batch_tokens : batch * seq;
  o.lora_compute = *train::parse_lora_compute_dtype(lora_compute); // checked by CLI11 above
  o.explicit_attention_mask = attention == "mask";

  std::vector<std::unique_ptr<model::transformer>> models;
  auto t0 = std::chrono::steady_clock::now();
  try {
    for (const auto& d : devices) {
      model::transformer_options mo;
      mo.device = d;
      mo.dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
      auto m = model::transformer::load(dir, mo);
      if (!m)
        return fail(out_path, label, dir + ": " + describe(m.error()));
      models.push_back(std::make_unique<model::transformer>(std::move(*m)));
      synchronize(d);
    }
  } catch (const std::exception& e) {
    return fail(out_path, label, std::string("loading the model: ") + e.what());
  }
  std::printf("%d replica(s) loaded in %.1f s\n", replicas, seconds_since(t0));
  auto dp = train::data_parallel_trainer::create(std::move(models), o);
  if (!dp)
    return fail(out_path, label, describe(dp.error()));
  const double lora_parameters = static_cast<double>((*dp)->primary().lora().size());

  // batch x replicas sequences of seq random tokens: 1 prompt token, seq - 1 trained on.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config->vocab_size) - 1);
  std::vector<train::training_sample> samples(static_cast<std::size_t>(batch) * replicas);
  for (auto& s : samples) {
    s.prompt_tokens = {token(rng)};
    for (int64_t t = 1; t < seq; ++t)
      s.completion_tokens.push_back(token(rng));
  }
  const double step_tokens = static_cast<double>(samples.size()) * static_cast<double>(seq);

  std::vector<double> times;
  double first_loss = 0, last_loss = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup)
      for (const auto& d : devices)
        reset_peak(d);
    for (const auto& d : devices)
      synchronize(d);
    const auto start = std::chrono::steady_clock::now();
    auto stats = (*dp)->step(samples);
    for (const auto& d : devices)
      synchronize(d);
    const double s = seconds_since(start);
    if (!stats)
      return fail(out_path, label, "step " + std::to_string(i) + ": " + describe(stats.error()));
    if (i == 0)
      first_loss = stats->loss;
    last_loss = stats->loss;
    std::printf("%s step %d: %.3f s, %.0f tokens/s, loss %.4f%s\n", label.c_str(), i, s,
                step_tokens / s, stats->loss, i < warmup ? " (warm-up)" : "");
    std::fflush(stdout);
    if (i >= warmup)
      times.push_back(s);
  }
  if (!profile_path.empty()) {
    // An extra step under the profiler, after the timed ones: a profile slows what it records.
    std::optional<caf::expected<train::step_stats>> stats; // set when the step ran
    const auto start = std::chrono::steady_clock::now();
    auto summary = profile_kernels(
      [&] {
        stats = (*dp)->step(samples);
        for (const auto& d : devices)
          synchronize(d);
      },
      profile_path);
    const double s = seconds_since(start);
    if (stats && !*stats)
      return fail(out_path, label, "profiled step: " + describe(stats->error()));
    if (!summary)
      std::printf("--profile: %s; no profiled step\n", describe(summary.error()).c_str());
    else
      std::printf("kernels of one step (%.3f s under the profiler; trace in %s):\n%s", s,
                  profile_path.c_str(), describe(*summary, 40, 1.0, "step").c_str());
    std::fflush(stdout);
  }
  double mean = 0;
  for (double t : times)
    mean += t / static_cast<double>(times.size());
  const auto flops = count_flops(*config, seq, lora_parameters, o.gradient_checkpointing);
  const double tokens_per_s = step_tokens / mean;
  const double peak = peak_tflops * 1e12 * replicas;
  const double mfu = flops.model * tokens_per_s / peak;
  const double hfu = flops.hardware * tokens_per_s / peak;
  std::printf("%s: %.0f tokens/s (%.3f s/step, %d x %d x %lld tokens), MFU %.1f%% (HFU %.1f%%) "
              "of %d x %.0f TFLOP/s\n",
              label.c_str(), tokens_per_s, mean, replicas, batch, static_cast<long long>(seq),
              100 * mfu, 100 * hfu, replicas, peak_tflops);

  kbrl::json_writer w;
  w.begin_object()
    .field("label", label)
    .field("config", config_path)
    .field("replicas", static_cast<int64_t>(replicas))
    .field("backend", (*dp)->backend())
    .field("batch_per_replica", static_cast<int64_t>(batch))
    .field("seq", seq)
    .field("lora_rank", static_cast<int64_t>(rank))
    .field("gradient_checkpointing", o.gradient_checkpointing)
    .field("dtype", dtype)
    .field("lora_compute", lora_compute)
    .field("attention", attention)
    .field("trainable_parameters", lora_parameters)
    .field("step_tokens", step_tokens)
    .field("mean_step_s", mean)
    .field("tokens_per_s", tokens_per_s)
    .field("model_flops_per_token", flops.model)
    .field("hardware_flops_per_token", flops.hardware)
    .field("peak_tflops_per_device", peak_tflops)
    .field("mfu", mfu)
    .field("hfu", hfu)
    .field("first_loss", first_loss)
    .field("last_loss", last_loss);
  w.key("step_seconds").begin_array();
  for (double t : times)
    w.value(t);
  w.end_array();
  w.key("memory").begin_array();
  for (const auto& d : devices) {
    const auto m = read_peak(d);
    w.begin_object()
      .field("device", d.str())
      .field("peak_allocated_bytes", m.allocated)
      .field("peak_reserved_bytes", m.reserved)
      .field("device_used_bytes", m.device_used)
      .end_object();
    if (d.is_cuda())
      std::printf("%s: peak allocated %.1f GiB, reserved %.1f GiB, device-wide %.1f GiB\n",
                  d.str().c_str(), m.allocated / 1073741824.0, m.reserved / 1073741824.0,
                  m.device_used / 1073741824.0);
  }
  w.end_array();
  w.end_object();
  if (!out_path.empty())
    std::ofstream(out_path) << w.str() << "\n";
  return 0;
}
