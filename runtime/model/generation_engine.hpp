#pragma once
// Continuous-batching generation: a fixed number of slots, each holding one sequence in a
// preallocated kv_cache; requests wait in a queue until a slot is free.
//
// One step():
//   1. admit   while a slot is free and a request waits: check the request, prefill its prompt
//              into the slot (one forward over the prompt) and sample its first token from the
//              prompt's last logits. A request that ends right there frees the slot again for
//              the next one.
//   2. decode  one forward over all slots at once ([slots, 1] tokens: the decode step always has
//              the same shapes), feeding each active slot the token it sampled last; then one
//              token is sampled for every active slot. Free slots ride along on a dummy token
//              at position 0, whose result is ignored. On a CUDA device the forward is replayed
//              from a CUDA graph per key-length bucket (decode_graph.hpp; options.cuda_graphs),
//              sampling stays outside it. With step overlap (on a CUDA device by default) the
//              step is launched before the host takes the previous step's tokens: its inputs
//              come from the previous step's draw on the device, so the host's work (stop
//              checks, detokenising, the next inputs) runs while the device computes, and each
//              step() delivers the tokens of the step launched before it. A sequence that ends
//              in that step has also been decoded once more, speculatively; that row is dropped.
//   3. finish  a sequence ends on a stop token (its sampling_params.stop_token_ids plus the
//              model's end-of-sequence ids), a stop string in its decoded text, max_new_tokens,
//              or a full cache slot; its generation_result goes to the callback (on_result) or
//              to the queue that take_results() empties, and its slot is refilled at the next
//              step's admission rather than when the whole batch is done.
//
// A request's life:   submitted -> waiting -> (admitted: prefill) -> decoding -> finished
//                          \-----------\---------- cancel() ---------------------/
// Invalid requests (no prompt or both kinds, token ids outside the vocabulary, parameters out of
// range, stop strings without a tokenizer, a prompt that does not fit the cache) finish at
// admission with finish_reason::error and the reason in generation_result::error. A failure of
// the computation itself (a c10::Error, e.g. out of memory) ends every sequence it touched with
// finish_reason::error; the engine stays usable.
//
// What a result holds:
//   completion_tokens  every sampled token, including a final stop token and the tokens that
//                      completed a stop string (the learner trains on what was sampled)
//   logprobs           per completion token, as sampling.hpp states: log-softmax of
//                      logits / temperature before top-k/top-p (temperature 1 when greedy)
//   completion_text    the tokens decoded with special tokens left out (stream_decoder with
//                      skip_special), without a final stop token's text and cut just before the
//                      first occurrence of a stop string; empty without a tokenizer
//   policy_version     the version (set_adapter) in force when the request was admitted
//
// Reproducibility: each request samples with its own generator seeded with params.seed, so its
// tokens do not depend on which requests share the batch (up to the float rounding of batched
// matrix products, which can only matter where two tokens are within rounding of each other).
//
// The engine is not thread-safe: one owner (the sampler actor) drives it. It changes the
// model's LoRA factors through set_adapter(); the model must outlive the engine.

#include "messages/data.hpp"
#include "runtime/model/kv_cache.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::model {

struct lora_adapter;
class decode_graph;

/// How an engine is sized.
struct generation_engine_options {
  /// Sequences decoded together (the batch of the decode step); > 0. Default 8.
  int64_t slots = 8;
  /// Positions per slot in the kv cache: prompt plus completion tokens of one sequence; > 1.
  /// Default 2048. Cache memory is slots * max_sequence_length * layers * 2 * kv_heads *
  /// head_dim * bytes of the run dtype.
  int64_t max_sequence_length = 2048;
  /// The decode step attends to cached positions [0, n) with n the smallest key-length bucket
  /// >= the longest active sequence (its new token included): key_block x 1, 2, 3, 4, 6, 8,
  /// 12, ... capped at max_sequence_length (decode_graph.hpp's decode_key_lengths), in eager
  /// and graph mode alike, so both compute the same shapes. Few buckets keep the number of CUDA
  /// graphs small; a small value wastes less work on short sequences. > 0. Default 64.
  int64_t key_block = 64;
  /// The name written into generation_result::sampler. Default "engine".
  std::string name = "engine";
  /// Replay the decode step as CUDA graphs (decode_graph.hpp) when the model is on a CUDA
  /// device and this build has CUDA; a capture that fails is logged and the engine decodes
  /// eagerly from then on. False: always eager. Default true.
  bool cuda_graphs = true;
  /// Whether step() launches its decode step before taking the previous one's tokens (see
  /// above). automatic: on a CUDA device (the host's work then overlaps the device's), off on
  /// the CPU (where nothing runs asynchronously). The tokens are the same either way.
  enum class overlap_mode { automatic, on, off };
  overlap_mode step_overlap = overlap_mode::automatic;
};

/// Counters since the engine was created.
struct generation_stats {
  uint64_t requests_finished = 0;
  uint64_t prompt_tokens = 0;     ///< tokens prefilled
  uint64_t generated_tokens = 0;  ///< tokens sampled (prefill's first tokens included)
  uint64_t decode_steps = 0;      ///< batched decode forwards
  double prefill_seconds = 0;     ///< in prefill forwards and their sampling
  double decode_seconds = 0;      ///< in decode forwards and their sampling
  uint64_t graph_steps = 0;       ///< decode steps replayed from a CUDA graph
  uint64_t graph_captures = 0;    ///< CUDA graphs captured (re-captures included)
  uint64_t adapter_copies = 0;    ///< set_adapter calls that copied factors in place
};

/// A continuous-batching generator over one model (see above).
class generation_engine {
public:
  /// An engine for `model` with a kv cache of `options.slots` x `options.max_sequence_length`
  /// on the model's device. The tokenizer is needed for prompt_text, stop strings and
  /// completion_text. Fails with errc::invalid_argument for options out of range and with
  /// errc::internal if the cache cannot be allocated (the text says why).
  static caf::expected<generation_engine> create(transformer& model,
                                                 std::optional<tok::tokenizer> tokenizer,
                                                 generation_engine_options options = {});

  generation_engine(generation_engine&&) noexcept;
  generation_engine& operator=(generation_engine&&) noexcept;
  ~generation_engine();

  /// Queues `request`; returns the ticket that cancel() takes (results carry request.id).
  uint64_t submit(generation_request request);

  /// Ends a waiting or running request with finish_reason::cancelled (what it generated so far
  /// is kept). False if no such ticket is waiting or running.
  bool cancel(uint64_t ticket);

  /// Admits waiting requests into free slots and decodes one token for every active slot.
  /// Returns the number of tokens sampled (0 when idle; with step overlap, those of the step
  /// launched by the call before, so the first decoding call returns the prefills' only).
  std::size_t step();

  /// Steps until no request waits or runs.
  void run_until_idle();

  /// True when no request waits or runs.
  bool idle() const;
  std::size_t waiting() const { return queue_.size(); }
  std::size_t running() const;

  /// Delivers each finished result to `callback` from now on, instead of the result queue.
  void on_result(std::function<void(generation_result)> callback);

  /// The finished results not yet taken (only those finished while no callback was set).
  std::vector<generation_result> take_results();

  /// Runs `requests` to completion (with whatever else is queued) and returns their results in
  /// the order of `requests`; they bypass the callback and the result queue.
  std::vector<generation_result> generate(std::vector<generation_request> requests);

  /// Uses `adapter` (nullptr: the base model) for every forward from now on, and reports
  /// `policy_version` in the results of requests admitted from now on. Sequences already
  /// running continue with the new weights. Fails, leaving the model as it was, if the adapter
  /// does not fit the model (attach_lora_adapter).
  ///
  /// With CUDA graphs on, the model gets the engine's own copy of the factors (the graphs read
  /// them at fixed addresses, whatever becomes of `adapter`): an adapter whose modules, shapes,
  /// dtypes and scaling match the attached one is copied into those tensors in place (the
  /// graphs stay valid: swapping versions of one adapter costs a copy); any other change (the
  /// first adapter, another rank or target set, nullptr) makes the graphs re-capture lazily on
  /// the next decode step. Without graphs the model shares the adapter's tensors, as
  /// attach_lora_adapter does.
  caf::expected<void> set_adapter(const lora_adapter* adapter, uint64_t policy_version);

  /// Why the decode step runs eagerly on a CUDA device although graphs were asked for (not
  /// compiled in, a capture failed), or empty.
  std::string cuda_graphs_off_reason() const;

  uint64_t policy_version() const { return policy_version_; }
  const generation_stats& stats() const { return stats_; }
  const generation_engine_options& options() const { return options_; }
  const kv_cache& cache() const { return *cache_; }

private:
  struct sequence;
  struct launched_step;
  struct waiting_request {
    uint64_t ticket;
    generation_request request;
    double submitted; ///< seconds on the engine's clock
  };

  generation_engine() = default;
  void admit();
  bool start(waiting_request&& w, int64_t slot);
  void decode();
  /// Launches one decode step over the active slots; with `previous` (a step whose tokens the
  /// host has not taken) its sequences are fed their tokens from the device. Null: no slot to
  /// decode.
  std::unique_ptr<launched_step> launch_decode(const launched_step* previous);
  /// Takes a launched step's tokens (waits for them) into the sequences still in its slots.
  void take(launched_step& step);
  /// Takes the step in flight, if any (before the weights change).
  void settle();
  bool overlaps_steps() const;
  /// Adds a sampled token; true if the sequence ended with it.
  bool append(sequence& s, int32_t token, float logprob);
  void finish(sequence& s, finish_reason why, std::string error = {});
  void deliver(uint64_t ticket, generation_result result);
  void fail_running(const std::string& why);
  bool copy_adapter_in_place(const lora_adapter& adapter);
  /// The logits [slots, vocab] of one decode step over all slots, by graph or eagerly, from
  /// `inputs` (int64 [2, slots] on the model's device: token ids, positions).
  at::Tensor decode_logits(const at::Tensor& inputs, int64_t needed);
  double now() const;

  transformer* model_ = nullptr;
  std::optional<tok::tokenizer> tokenizer_;
  generation_engine_options options_;
  std::unique_ptr<kv_cache> cache_;
  std::vector<int64_t> key_lengths_;     ///< decode_key_lengths(key_block, max_sequence_length)
  std::unique_ptr<decode_graph> graph_;  ///< null: eager decoding (not asked for, or not CUDA)
  bool graph_warned_ = false;
  /// The adapter copy the model's LoRA factors are, with CUDA graphs (see set_adapter).
  std::map<std::string, lora_factors> owned_adapter_;
  std::deque<waiting_request> queue_;
  std::vector<std::unique_ptr<sequence>> slots_; ///< nullptr: free
  std::unique_ptr<launched_step> in_flight_;     ///< with step overlap: launched, not taken
  std::function<void(generation_result)> callback_;
  std::vector<generation_result> results_;
  /// Tickets whose results generate() collects, with where they go.
  std::vector<std::pair<uint64_t, generation_result*>> collect_;
  uint64_t next_ticket_ = 1;
  uint64_t policy_version_ = 0;
  generation_stats stats_;
};

} // namespace kbrl::model
