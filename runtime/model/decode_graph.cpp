#include "runtime/model/decode_graph.hpp"

#include "messages/errors.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/transformer.hpp"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cstring>
#include <map>

// CMakeLists.txt defines KBRL_WITH_CUDA=1 for a libtorch with CUDA.
#ifndef KBRL_WITH_CUDA
#define KBRL_WITH_CUDA 0
#endif

#if KBRL_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace kbrl::model {

bool cuda_graphs_compiled_in() { return KBRL_WITH_CUDA != 0; }

std::vector<int64_t> decode_key_lengths(int64_t key_block, int64_t max_len) {
  TORCH_CHECK(key_block > 0 && max_len > 0, "decode_key_lengths: key_block ", key_block,
              " and max_len ", max_len, " must be > 0");
  std::vector<int64_t> out;
  // key_block x 1, 2, 3, 4, 6, 8, 12, ...: a power of two p, then 1.5 p (from p = 2 on).
  for (int64_t p = 1; key_block * p < max_len; p *= 2) {
    out.push_back(key_block * p);
    if (p >= 2 && key_block * (p + p / 2) < max_len)
      out.push_back(key_block * (p + p / 2));
    if (p > max_len) // no overflow however large max_len is
      break;
  }
  out.push_back(max_len);
  return out;
}

int64_t pick_key_length(const std::vector<int64_t>& lengths, int64_t needed) {
  for (auto n : lengths)
    if (n >= needed)
      return n;
  return lengths.back();
}


// ---- without CUDA --------------------------------------------------------------------------------

#if !KBRL_WITH_CUDA

struct decode_graph::state {
  std::vector<int64_t> key_lengths;
  std::string reason = "CUDA graphs are not compiled in (this libtorch has no CUDA)";
};

decode_graph::decode_graph(const transformer&, kv_cache& cache, int64_t key_block)
  : state_(std::make_unique<state>()) {
  state_->key_lengths = decode_key_lengths(key_block, cache.max_len());
}

bool decode_graph::available() const { return false; }

caf::expected<at::Tensor> decode_graph::run(const at::Tensor&, int64_t) {
  return make_error(errc::not_supported, state_->reason);
}

void decode_graph::invalidate() {}
uint64_t decode_graph::captures() const { return 0; }
std::size_t decode_graph::graphs() const { return 0; }

// ---- with CUDA -----------------------------------------------------------------------------------

#else

namespace {

/// Visits every LoRA-capable linear layer of `m` in network order.
template <class F>
void each_linear(const transformer& m, F&& f) {
  for (const auto& l : m.layers()) {
    f(l.self_attn.q_proj);
    f(l.self_attn.k_proj);
    f(l.self_attn.v_proj);
    f(l.self_attn.o_proj);
    f(l.mlp.gate_proj);
    f(l.mlp.up_proj);
    f(l.mlp.down_proj);
  }
}

/// What a captured graph depends on besides the weights, the cache and the static buffers: the
/// address, dtype, shape and strides of each LoRA factor and of the RoPE frequencies, and each
/// LoRA scaling. Equal signatures: the graph computes what an eager step would.
std::vector<int64_t> capture_signature(const transformer& m) {
  std::vector<int64_t> sig;
  const auto add = [&sig](const at::Tensor& t) {
    if (!t.defined()) {
      sig.push_back(0);
      return;
    }
    sig.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(t.data_ptr())));
    sig.push_back(static_cast<int64_t>(t.scalar_type()));
    sig.push_back(t.dim());
    sig.insert(sig.end(), t.sizes().begin(), t.sizes().end());
    sig.insert(sig.end(), t.strides().begin(), t.strides().end());
  };
  each_linear(m, [&](const linear_layer& l) {
    add(l.lora.a);
    add(l.lora.b);
    int64_t scaling = 0;
    std::memcpy(&scaling, &l.lora.scaling, sizeof scaling);
    sig.push_back(scaling);
  });
  add(m.rope_inverse_frequencies());
  return sig;
}

} // namespace

struct decode_graph::state {
  const transformer* model = nullptr;
  kv_cache* cache = nullptr;
  std::vector<int64_t> key_lengths;
  std::string reason; ///< non-empty: graphs off
  at::Device device = at::kCPU;
  at::Tensor inputs;  ///< int64 [2, slots]: token ids, positions
  at::Tensor logits;  ///< [slots, vocab], the model's logits dtype
  /// By key length. unique_ptr: CUDAGraph can be neither copied nor moved (libtorch 2.x).
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  bool have_pool = false;
  decltype(at::cuda::graph_pool_handle()) pool{0, 0}; ///< shared by all graphs
  std::vector<int64_t> signature; ///< capture_signature() when the graphs were captured
  uint64_t captures = 0;

  /// The decode step itself, on the current stream: what is warmed up, captured and replayed.
  void step(int64_t key_len) {
    const int64_t slots = cache->slots();
    const auto ids = inputs.select(0, 0).view({slots, 1});
    const auto positions = inputs.select(0, 1).view({slots, 1});
    const auto hidden = model->forward(ids, positions, cache_mask(positions, key_len),
                                       {cache, 0, key_len});
    logits.copy_(model->logits(hidden.squeeze(1)));
  }

  /// Warms up and captures the graph of `key_len` on a side stream; the current stream waits
  /// for it. Throws c10::Error if the capture fails (the capture ended, nothing half-done left).
  void capture(int64_t key_len) {
    const auto current = c10::cuda::getCurrentCUDAStream(device.index());
    auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    at::cuda::CUDAEvent ready, done;
    ready.record(current); // the inputs copied, the prefills' cache writes
    ready.block(side);
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      c10::cuda::CUDAStreamGuard guard(side);
      step(key_len); // warm-up: this step's own work, done eagerly once
      if (!have_pool) {
        pool = at::cuda::graph_pool_handle();
        have_pool = true;
      }
      try {
#if TORCH_VERSION_MAJOR >= 2
        // Thread-local: CUDA calls of other threads (another engine, a learner) stay legal.
        graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
#else
        graph->capture_begin(pool);
#endif
        step(key_len);
        graph->capture_end();
      } catch (...) {
        // End the capture so that the stream and the allocator leave capture mode; its own
        // error (the capture was invalidated) says nothing new.
        try {
          graph->capture_end();
        } catch (...) {
        }
        (void)cudaGetLastError();
        throw;
      }
    }
    done.record(side);
    done.block(current);
    graphs[key_len] = std::move(graph);
    ++captures;
  }

  /// Destroys every graph; the next captures start a fresh memory pool (the old one is freed
  /// with its last graph).
  void drop_graphs() {
    graphs.clear();
    have_pool = false;
  }

  caf::error disable(const std::string& what, const std::string& why) {
    reason = what + ": " + why;
    drop_graphs();
    return make_error(errc::internal, "CUDA graph " + reason);
  }
};

decode_graph::decode_graph(const transformer& model, kv_cache& cache, int64_t key_block)
  : state_(std::make_unique<state>()) {
  auto& s = *state_;
  s.model = &model;
  s.cache = &cache;
  s.key_lengths = decode_key_lengths(key_block, cache.max_len());
  s.device = model.options().device;
  if (!s.device.is_cuda()) {
    s.reason = "the model is on " + s.device.str() + ", CUDA graphs need a CUDA device";
    return;
  }
  if (!s.device.has_index())
    s.device = at::Device(at::kCUDA, c10::cuda::current_device());
  try {
    const auto on_device = at::TensorOptions().device(s.device);
    s.inputs = at::zeros({2, cache.slots()}, on_device.dtype(at::kLong));
    s.logits = at::zeros({cache.slots(), model.config().vocab_size},
                         on_device.dtype(at::promote_types(model.options().dtype, at::kFloat)));
  } catch (const c10::Error& e) {
    s.reason = std::string("cannot allocate the static buffers: ") + e.what_without_backtrace();
  }
}

bool decode_graph::available() const { return state_->reason.empty(); }

caf::expected<at::Tensor> decode_graph::run(const at::Tensor& inputs, int64_t needed) {
  auto& s = *state_;
  if (!s.reason.empty())
    return make_error(errc::not_supported, s.reason);
  if (inputs.dim() != 2 || inputs.size(0) != 2 || inputs.size(1) != s.cache->slots())
    return make_error(errc::invalid_argument,
                      "decode_graph::run: expected inputs [2, " + std::to_string(s.cache->slots())
                        + "], got " + c10::str(inputs.sizes()));
  if (s.model->draws_lora_dropout()) // a graph would freeze the masks
    return at::Tensor{};
  auto signature = capture_signature(*s.model);
  if (signature != s.signature) {
    s.drop_graphs(); // the LoRA factors or RoPE frequencies moved: re-capture as needed
    s.signature = std::move(signature);
  }
  const int64_t key_len = pick_key_length(s.key_lengths, needed);
  try {
    c10::cuda::CUDAGuard device_guard(s.device);
    s.inputs.copy_(inputs, /*non_blocking=*/true); // from the device: in stream order anyway
    auto it = s.graphs.find(key_len);
    if (it == s.graphs.end()) {
      try {
        s.capture(key_len);
      } catch (const c10::Error& e) {
        return s.disable("capture for key length " + std::to_string(key_len) + " failed",
                         e.what_without_backtrace());
      }
      it = s.graphs.find(key_len);
    }
    it->second->replay();
  } catch (const c10::Error& e) {
    return s.disable("replay for key length " + std::to_string(key_len) + " failed",
                     e.what_without_backtrace());
  }
  return s.logits;
}

void decode_graph::invalidate() { state_->drop_graphs(); }
uint64_t decode_graph::captures() const { return state_->captures; }
std::size_t decode_graph::graphs() const { return state_->graphs.size(); }

#endif

decode_graph::decode_graph(decode_graph&&) noexcept = default;
decode_graph& decode_graph::operator=(decode_graph&&) noexcept = default;
decode_graph::~decode_graph() = default;

const std::string& decode_graph::unavailable_reason() const { return state_->reason; }
const std::vector<int64_t>& decode_graph::key_lengths() const { return state_->key_lengths; }

} // namespace kbrl::model
