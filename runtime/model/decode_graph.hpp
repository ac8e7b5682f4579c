#pragma once
// The decode step of a generation engine, captured in CUDA graphs and replayed: one launch per
// step instead of the ~40 libtorch ops per layer that bind an eager decode to the host.
//
// What a graph holds: for every slot of the kv cache at once ([slots, 1] tokens; free slots
// compute harmless garbage at position 0 of their own slot), embedding -> layers (each writing
// the new token's keys and values into the cache) -> final norm -> float32 logits. It reads its
// inputs from static device buffers (token ids and positions, int64 [2, slots]) and writes the
// logits into a static buffer [slots, vocab]; the attention mask is computed inside the graph
// from the positions. Sampling stays outside (each request's own generator).
//
// Key-length buckets: a step attends to cached positions [0, key_len), and a graph has fixed
// shapes, so there is one graph per key length used, from decode_key_lengths(): key_block times
// 1, 2, 3, 4, 6, 8, 12, 16, ... (powers of two and three times powers of two: from 2 key_block
// on a bucket is at most 1.5x the one below it, and short sequences do not read the whole
// cache), capped at the cache's max_len. A step uses the smallest bucket >= the longest live sequence including its
// new token. Graphs are captured lazily, on the first step that needs their bucket, and share
// one memory pool (only one runs at a time, on one stream; their outputs are copied into the
// static logits buffer, which lies outside the pool).
//
// Capture: the step runs once eagerly on a side stream (warm-up: cuBLAS workspaces, lazy
// initialisation; this is the step's own work, so the cache writes are the ones the replay
// makes again), then is captured on that stream (thread-local capture mode, so other threads'
// CUDA calls are not affected) and replayed on the current stream.
//
// What the graph reads at capture-time addresses: weights, the kv cache, the static buffers, the
// RoPE frequencies and the LoRA factors. Before every replay the LoRA factors of every linear
// layer (address, dtype, shape, strides, scaling) and the RoPE frequencies are compared with
// those at capture: on any difference every graph is dropped and re-captured lazily, on the
// step that needs it. Values changed in place at the same addresses are simply read by the
// next replay (the engine's set_adapter copies a matching adapter into the factors in place, so
// swapping versions of one adapter re-captures nothing; see generation_engine.hpp).
// LoRA dropout (training only) cannot be frozen into a graph: run() answers "eager" for it.
//
// Failures are loud and never fatal: a capture or replay that throws ends the capture cleanly,
// disables graphs for good (available() false, the reason in unavailable_reason()) and run()
// returns the error; the caller decodes eagerly from then on.
//
// Built without CUDA (KBRL_WITH_CUDA undefined: a CPU-only libtorch, as Debian's 1.13) the class
// exists with the same API; available() is false with the reason "CUDA graphs are not compiled
// in", so callers fall back to eager decoding.
//
// Not thread-safe; one owner (the generation engine) drives it, inside c10::InferenceMode.

#include "runtime/model/kv_cache.hpp"

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kbrl::model {

class transformer;

/// True where this build can capture CUDA graphs (libtorch with CUDA).
bool cuda_graphs_compiled_in();

/// The key lengths a decode step may attend to: key_block x {1, 2, 3, 4, 6, 8, 12, ...} below
/// max_len, then max_len itself; ascending, each a multiple of key_block but the last.
/// Preconditions (TORCH_CHECK): key_block > 0, max_len > 0.
std::vector<int64_t> decode_key_lengths(int64_t key_block, int64_t max_len);

/// The smallest of `lengths` (ascending) >= `needed`, or the largest if none is.
int64_t pick_key_length(const std::vector<int64_t>& lengths, int64_t needed);

/// The decode step of `model` over every slot of `cache`, replayed as CUDA graphs (see above).
class decode_graph {
public:
  /// Graphs for `model` decoding into `cache` with key lengths decode_key_lengths(key_block,
  /// cache.max_len()). Never throws: where graphs cannot run (not compiled in, model not on a
  /// CUDA device, static buffers not allocatable) available() is false and says why. Both
  /// objects must outlive this one; the static buffers are allocated here.
  decode_graph(const transformer& model, kv_cache& cache, int64_t key_block);
  decode_graph(decode_graph&&) noexcept;
  decode_graph& operator=(decode_graph&&) noexcept;
  ~decode_graph();

  /// False when graphs cannot be used (from the start, or after a failure).
  bool available() const;
  /// Why available() is false; empty while it is true.
  const std::string& unavailable_reason() const;

  /// One decode step: `inputs` int64 [2, slots] (row 0 the token ids, row 1 their positions),
  /// best on the model's device (copied into the graph's buffer in stream order), `needed` the key length the step needs (the longest live sequence including
  /// its new token). Returns the float32 logits [slots, vocab] on the model's device (float64
  /// for a float64 model): a static buffer that the next run() overwrites. Returns an undefined
  /// tensor when this step must run eagerly (LoRA dropout on) without disabling graphs. Fails
  /// with errc::internal, naming what failed, when a capture or replay throws; graphs are then
  /// disabled for good.
  caf::expected<at::Tensor> run(const at::Tensor& inputs, int64_t needed);

  /// Drops every captured graph; they are re-captured as steps need them.
  void invalidate();

  /// The key lengths in use (decode_key_lengths of the constructor's arguments).
  const std::vector<int64_t>& key_lengths() const;
  /// Graphs captured since construction (re-captures included).
  uint64_t captures() const;
  /// Graphs held now.
  std::size_t graphs() const;

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace kbrl::model
