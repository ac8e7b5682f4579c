// kbrl-bench-generate: the built-in sampler's generation throughput, for bench/sampler_throughput.
//
//   kbrl-bench-generate --config CONFIG.json --dir DIR [--batch 1,32,128] [--prompt 512]
//                       [--new 256] [--device cuda] [--dtype bf16] [--cuda-graphs on,off]
//                       [--overlap auto] [--out results.json] [--profile TRACE.json]
//
// Writes a random-initialised checkpoint of CONFIG into DIR once (reused after), loads it, and
// for each batch size runs `batch` requests of `prompt` random tokens and exactly `new` sampled
// tokens each (the model's end-of-sequence ids are removed from the config so no sequence stops
// early) through a generation engine with `batch` slots. Reports new tokens per second, split
// into prefill and decode, and the memory-bandwidth bound of one decode step (weight bytes /
// measured device copy bandwidth). --cuda-graphs on,off (the default) runs every batch size with
// the decode step replayed from CUDA graphs and then eagerly, and prints both; "on" or "off"
// alone runs one mode. A run with graphs on reports how many steps came from a graph: fewer than
// all means the graphs fell back to eager (the reason is printed). --profile records the first
// measured run's device kernels (CUDA graph replays included), prints the longest per decode
// step and writes the Chrome trace to TRACE.json. --overlap on,off runs each of those with the
// engine's step overlap on and then off (default auto: on for CUDA).

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/device/kernel_profile.hpp"
#include "runtime/io/elapsed.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/model/decode_graph.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace kbrl;
namespace fs = std::filesystem;

namespace {

void synchronize(const at::Device& d) {
  if (d.is_cuda())
    at::empty({1}, at::TensorOptions().device(d)).cpu(); // waits for the device's work
}

/// Bytes per second of a device-to-device copy of `bytes` (read + write counted once each, as
/// ANCHORS.md states the copy figure).
double copy_bandwidth(const at::Device& d, int64_t bytes) {
  auto src = at::empty({bytes}, at::TensorOptions().device(d).dtype(at::kByte));
  auto dst = at::empty_like(src);
  dst.copy_(src);
  synchronize(d);
  const int reps = 10;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    dst.copy_(src);
  synchronize(d);
  return 2.0 * static_cast<double>(bytes) * reps / seconds_since(t0);
}

int fail(const std::string& what, const caf::error& e) {
  std::fprintf(stderr, "kbrl-bench-generate: %s: %s\n", what.c_str(), describe(e).c_str());
  return 1;
}

/// Every (graph mode, overlap mode) pair, graph modes outermost.
std::vector<std::pair<std::string, std::string>> mode_pairs(
  const std::vector<std::string>& graph_modes, const std::vector<std::string>& overlap_modes) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& g : graph_modes)
    for (const auto& o : overlap_modes)
      out.emplace_back(g, o);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-bench-generate: built-in sampler throughput on a random-initialised model"};
  std::string config_path, dir, device = "cuda", dtype = "bf16", out_path, profile_path;
  std::vector<int> batches{1, 32, 128};
  std::vector<std::string> graph_modes{"on", "off"};
  std::vector<std::string> overlap_modes{"auto"};
  int prompt_len = 512, new_tokens = 256;
  app.add_option("--config", config_path, "config.json of the model shapes")->required();
  app.add_option("--dir", dir, "Where the random checkpoint is written (reused if present)")
    ->required();
  app.add_option("--batch", batches, "Batch sizes")->delimiter(',');
  app.add_option("--prompt", prompt_len, "Prompt tokens per request");
  app.add_option("--new", new_tokens, "New tokens per request");
  app.add_option("--device", device);
  app.add_option("--dtype", dtype)->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_option("--cuda-graphs", graph_modes,
                 "Decode with CUDA graphs on, off, or both in turn (on,off)")
    ->delimiter(',')
    ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--overlap", overlap_modes,
                 "Step overlap (generation_engine.hpp): auto (on for CUDA), on, off, or several "
                 "in turn (on,off)")
    ->delimiter(',')
    ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--out", out_path, "Write the figures as JSON here");
  app.add_option("--profile", profile_path,
                 "Profile the first measured run's kernels; the Chrome trace goes here");
  kbrl::config::add_version_flag(app, "kbrl-bench-generate");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  auto config = model::load_model_config(config_path);
  if (!config)
    return fail(config_path, config.error());
  config->eos_token_ids.clear(); // every sequence runs to --new tokens
  config->bos_token_id.reset();
  if (!fs::exists(fs::path(dir) / "config.json")) {
    std::printf("writing a random %s checkpoint into %s\n", config->model_type.c_str(), dir.c_str());
    std::fflush(stdout);
    auto t0 = std::chrono::steady_clock::now();
    auto st = dtype == "bf16" ? model::st_dtype::bf16 : model::st_dtype::f32;
    if (auto ok = model::write_random_checkpoint(dir, *config, 1, st); !ok)
      return fail(dir, ok.error());
    std::printf("  written in %.1f s\n", seconds_since(t0));
  }
  model::transformer_options opts;
  opts.device = at::Device(device);
  opts.dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  auto t0 = std::chrono::steady_clock::now();
  auto model = model::transformer::load(dir, opts);
  if (!model)
    return fail(dir, model.error());
  synchronize(opts.device);
  std::printf("model loaded in %.1f s\n", seconds_since(t0));

  // The decode step reads every weight once: its time is bounded below by weight bytes / bandwidth.
  double weight_bytes = 0;
  for (auto& p : model::expected_weights(*config)) {
    double n = 1;
    for (auto d : p.shape)
      n *= static_cast<double>(d);
    weight_bytes += n * (dtype == "bf16" ? 2 : 4);
  }
  double bandwidth = copy_bandwidth(opts.device, int64_t{1} << 30);
  double bound_tokens_per_s = bandwidth / weight_bytes;
  std::printf("weights %.2f GB, copy bandwidth %.0f GB/s: batch-1 bound %.0f tokens/s\n",
              weight_bytes / 1e9, bandwidth / 1e9, bound_tokens_per_s);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config->vocab_size) - 1);
  kbrl::json_writer w;
  w.begin_object()
    .field("device", device)
    .field("dtype", dtype)
    .field("prompt_tokens", static_cast<int64_t>(prompt_len))
    .field("new_tokens", static_cast<int64_t>(new_tokens))
    .field("weight_bytes", weight_bytes)
    .field("copy_bandwidth_bytes_per_s", bandwidth)
    .field("batch1_bound_tokens_per_s", bound_tokens_per_s);
  w.key("runs").begin_array();
  for (int batch : batches) {
    for (const auto& [mode, overlap] : mode_pairs(graph_modes, overlap_modes)) {
      const bool graphs = mode == "on";
      model::generation_engine_options eo;
      eo.slots = batch;
      eo.max_sequence_length = prompt_len + new_tokens + 1;
      eo.cuda_graphs = graphs;
      using overlap_mode = model::generation_engine_options::overlap_mode;
      eo.step_overlap = overlap == "on"    ? overlap_mode::on
                        : overlap == "off" ? overlap_mode::off
                                           : overlap_mode::automatic;
      auto engine = model::generation_engine::create(*model, std::nullopt, eo);
      if (!engine)
        return fail("engine", engine.error());
      std::vector<generation_request> reqs(static_cast<size_t>(batch));
      for (size_t i = 0; i < reqs.size(); ++i) {
        reqs[i].id = i;
        reqs[i].params.max_new_tokens = new_tokens;
        reqs[i].params.temperature = 1.0;
        reqs[i].params.seed = i;
        for (int k = 0; k < prompt_len; ++k)
          reqs[i].prompt_tokens.push_back(token(rng));
      }
      // Warm-up (kernels, allocator, and with graphs on the captures): the measured batch's own
      // prefill (its GEMM and attention shapes are new to cuBLAS and cuDNN, whose first call
      // chooses an algorithm: 0.6 s at batch 1 on an H200), then for every key-length bucket
      // the measured decode steps use, one request whose single decode step needs it (the graph
      // covers all slots whatever the number of requests), so the measurement sees replays.
      {
        std::vector<generation_request> warm = reqs;
        for (auto& r : warm) {
          r.id += 2000000;
          r.params.max_new_tokens = 1;
        }
        engine->generate(warm);
        warm.clear();
        const int64_t first = prompt_len + 1, last = prompt_len + new_tokens;
        for (auto key_len : model::decode_key_lengths(eo.key_block, eo.max_sequence_length)) {
          const int64_t needed = std::min<int64_t>(key_len, last);
          if (needed < first)
            continue;
          auto r = reqs.front();
          r.id = 1000000 + warm.size();
          r.prompt_tokens.resize(static_cast<size_t>(needed - 1), r.prompt_tokens.front());
          r.params.max_new_tokens = 2; // the prefill's token, then one decode step
          warm.push_back(std::move(r));
          if (needed == last)
            break;
        }
        engine->generate(warm);
      }
      synchronize(opts.device);
      if (!profile_path.empty()) {
        // An extra run under the profiler, before the measured one (a profile slows what it
        // records, so its time is not a measurement).
        const auto steps_before = engine->stats().decode_steps;
        const auto profiled_start = std::chrono::steady_clock::now();
        auto summary = profile_kernels(
          [&] {
            engine->generate(reqs);
            synchronize(opts.device);
          },
          profile_path);
        const double profiled_seconds = seconds_since(profiled_start);
        const double steps =
          static_cast<double>(std::max<uint64_t>(1, engine->stats().decode_steps - steps_before));
        if (!summary)
          std::printf("--profile: %s; no profiled run\n", describe(summary.error()).c_str());
        else
          std::printf("kernels of batch %d, graphs %s (%.1f ms of wall time per decode step under "
                      "the profiler; trace in %s):\n%s",
                      batch, mode.c_str(), 1000.0 * profiled_seconds / steps, profile_path.c_str(),
                      describe(*summary, 30, steps, "decode step").c_str());
        std::fflush(stdout);
        profile_path.clear(); // the first batch and mode only
      }
      auto before = engine->stats();
      auto t1 = std::chrono::steady_clock::now();
      auto results = engine->generate(reqs);
      synchronize(opts.device);
      double secs = seconds_since(t1);
      size_t generated = 0;
      for (auto& r : results)
        generated += r.completion_tokens.size();
      auto after = engine->stats();
      double prefill = after.prefill_seconds - before.prefill_seconds;
      double decode = after.decode_seconds - before.decode_seconds;
      const auto steps = after.decode_steps - before.decode_steps;
      const auto graph_steps = after.graph_steps - before.graph_steps;
      double tps = generated / secs;
      std::printf("batch %4d, graphs %-3s, overlap %-4s: %zu new tokens in %.2f s = %.1f tokens/s (prefill %.2f "
                  "s, decode %.2f s, %.2f ms per decode step, %llu of %llu steps from graphs, %llu "
                  "captures)%s\n",
                  batch, mode.c_str(), overlap.c_str(), generated, secs, tps, prefill, decode,
                  1000.0 * decode / std::max<double>(1, steps),
                  static_cast<unsigned long long>(graph_steps),
                  static_cast<unsigned long long>(steps),
                  static_cast<unsigned long long>(after.graph_captures),
                  batch == 1 ? ("; " + std::to_string(100.0 * tps / bound_tokens_per_s).substr(0, 5)
                                + "% of the bound").c_str()
                             : "");
      if (graphs && !engine->cuda_graphs_off_reason().empty())
        std::printf("  CUDA graphs fell back to eager: %s\n", engine->cuda_graphs_off_reason().c_str());
      std::fflush(stdout);
      w.begin_object()
        .field("batch", static_cast<int64_t>(batch))
        .field("cuda_graphs", graphs)
        .field("overlap", overlap)
        .field("graph_steps", static_cast<uint64_t>(graph_steps))
        .field("decode_steps", static_cast<uint64_t>(steps))
        .field("new_tokens", static_cast<uint64_t>(generated))
        .field("seconds", secs)
        .field("tokens_per_s", tps)
        .field("prefill_seconds", prefill)
        .field("decode_seconds", decode)
        .end_object();
    }
  }
  w.end_array().end_object();
  if (!out_path.empty())
    std::ofstream(out_path) << w.str() << "\n";
  return 0;
}
