#include "runtime/model/generation_engine.hpp"
#include "runtime/io/elapsed.hpp"

#include "messages/errors.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/model/decode_graph.hpp"
#include "runtime/model/device_transfer.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/sampling.hpp"
#include "runtime/tokenizer/stream_decoder.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace kbrl::model {

/// A request that holds a slot.
struct generation_engine::sequence {
  uint64_t ticket = 0;
  generation_request request;
  generation_result result;
  double submitted = 0;
  std::vector<int32_t> stop_ids;               ///< sorted
  std::optional<at::Generator> generator;      ///< unset for greedy requests
  std::optional<tok::stream_decoder> decoder;  ///< with a tokenizer
  std::size_t longest_stop = 0;                ///< bytes of the longest stop string
  int64_t length = 0;       ///< positions of the slot holding this sequence's tokens
  int32_t next_token = 0;   ///< sampled last, not yet in the cache
  int64_t limit = 0;        ///< completion tokens allowed
  bool done = false;
};

/// A decode step launched on the device whose tokens the host has not taken yet.
struct generation_engine::launched_step {
  std::vector<int64_t> slots;    ///< the slots decoded, ascending: the order of the drawn rows
  std::vector<uint64_t> tickets; ///< the sequence each of them held at launch
  drawn_tokens drawn;

  /// The row of `slot` if this step decoded the sequence `ticket` there, else -1. A binary
  /// search: launch_decode asks for every slot, 256 of them a step at RL batch sizes.
  int64_t row_of(int64_t slot, uint64_t ticket) const {
    const auto at = std::lower_bound(slots.begin(), slots.end(), slot);
    if (at == slots.end() || *at != slot)
      return -1;
    const auto j = at - slots.begin();
    return tickets[static_cast<std::size_t>(j)] == ticket ? static_cast<int64_t>(j) : -1;
  }
};

namespace {

/// Whether `v` is 0, 1, ..., size - 1.
bool is_identity(const std::vector<int64_t>& v, int64_t size) {
  if (static_cast<int64_t>(v.size()) != size)
    return false;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

sampling_row row_of(const sampling_params& p, std::optional<at::Generator>& gen) {
  return {p.temperature, p.top_p, p.top_k, gen ? &*gen : nullptr};
}

} // namespace

generation_engine::generation_engine(generation_engine&&) noexcept = default;
generation_engine& generation_engine::operator=(generation_engine&&) noexcept = default;
generation_engine::~generation_engine() = default;

caf::expected<generation_engine> generation_engine::create(transformer& model,
                                                           std::optional<tok::tokenizer> tokenizer,
                                                           generation_engine_options options) {
  std::vector<std::string> problems;
  if (options.slots <= 0)
    problems.push_back("slots: expected an integer > 0, got " + std::to_string(options.slots));
  if (options.max_sequence_length <= 1)
    problems.push_back("max_sequence_length: expected an integer > 1, got "
                       + std::to_string(options.max_sequence_length));
  if (options.key_block <= 0)
    problems.push_back("key_block: expected an integer > 0, got "
                       + std::to_string(options.key_block));
  if (!problems.empty()) {
    std::string text = "generation engine options:";
    for (const auto& p : problems)
      text += " " + p + ";";
    text.pop_back();
    return make_error(errc::invalid_argument, text);
  }
  generation_engine e;
  e.model_ = &model;
  e.tokenizer_ = std::move(tokenizer);
  e.options_ = std::move(options);
  try {
    c10::InferenceMode guard;
    e.cache_ = std::make_unique<kv_cache>(
      model.config(), e.options_.slots, e.options_.max_sequence_length,
      at::TensorOptions().device(model.options().device).dtype(model.options().dtype));
  } catch (const c10::Error& err) {
    return make_error(errc::internal, "cannot allocate the kv cache of "
                                        + std::to_string(e.options_.slots) + " slots x "
                                        + std::to_string(e.options_.max_sequence_length)
                                        + " positions: " + err.what_without_backtrace());
  }
  e.slots_.resize(e.options_.slots);
  e.key_lengths_ = decode_key_lengths(e.options_.key_block, e.options_.max_sequence_length);
  if (e.options_.cuda_graphs && model.options().device.is_cuda()) {
    c10::InferenceMode guard;
    e.graph_ = std::make_unique<decode_graph>(model, *e.cache_, e.options_.key_block);
    if (!e.graph_->available())
      spdlog::warn("{}: CUDA graphs asked for but off: {}; decoding eagerly", e.options_.name,
                   e.graph_->unavailable_reason());
  }
  return e;
}

std::string generation_engine::cuda_graphs_off_reason() const {
  return graph_ ? graph_->unavailable_reason() : std::string{};
}

double generation_engine::now() const {
  static const auto epoch = std::chrono::steady_clock::now();
  return seconds_since(epoch);
}

uint64_t generation_engine::submit(generation_request request) {
  const uint64_t ticket = next_ticket_++;
  queue_.push_back({ticket, std::move(request), now()});
  return ticket;
}

bool generation_engine::cancel(uint64_t ticket) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if (it->ticket == ticket) {
      generation_result r;
      r.id = it->request.id;
      r.finish = finish_reason::cancelled;
      r.policy_version = policy_version_;
      r.sampler = options_.name;
      r.seconds = now() - it->submitted;
      queue_.erase(it);
      deliver(ticket, std::move(r));
      return true;
    }
  for (auto& s : slots_)
    if (s && s->ticket == ticket) {
      finish(*s, finish_reason::cancelled);
      s.reset();
      return true;
    }
  return false;
}

bool generation_engine::idle() const { return queue_.empty() && running() == 0; }

std::size_t generation_engine::running() const {
  return static_cast<std::size_t>(
    std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; }));
}

void generation_engine::on_result(std::function<void(generation_result)> callback) {
  callback_ = std::move(callback);
}

std::vector<generation_result> generation_engine::take_results() {
  return std::exchange(results_, {});
}

void generation_engine::deliver(uint64_t ticket, generation_result result) {
  ++stats_.requests_finished;
  for (auto& [t, target] : collect_)
    if (t == ticket) {
      *target = std::move(result);
      return;
    }
  if (callback_)
    callback_(std::move(result));
  else
    results_.push_back(std::move(result));
}

caf::expected<void> generation_engine::set_adapter(const lora_adapter* adapter,
                                                   uint64_t policy_version) {
  settle(); // the step in flight was launched with the weights before this call
  if (adapter == nullptr) {
    model_->clear_lora();
    owned_adapter_.clear();
  } else if (!graph_) {
    if (auto ok = attach_lora_adapter(*model_, *adapter); !ok)
      return ok.error();
  } else if (copy_adapter_in_place(*adapter)) {
    ++stats_.adapter_copies;
  } else {
    // The graphs read the factors at fixed addresses: attach the engine's own copy, so that
    // the next version of this adapter can be copied into it in place.
    lora_adapter copy = *adapter;
    try {
      c10::InferenceMode guard;
      for (auto& [module, f] : copy.modules) {
        f.a = f.a.clone();
        f.b = f.b.clone();
      }
    } catch (const c10::Error& err) {
      return make_error(errc::internal, std::string("cannot copy the adapter's factors: ")
                                          + err.what_without_backtrace());
    }
    if (auto ok = attach_lora_adapter(*model_, copy); !ok)
      return ok.error();
    owned_adapter_ = std::move(copy.modules);
  }
  policy_version_ = policy_version;
  return {};
}

bool generation_engine::copy_adapter_in_place(const lora_adapter& adapter) {
  if (owned_adapter_.empty() || adapter.modules.size() != owned_adapter_.size())
    return false;
  if (!check_lora_adapter(adapter, model_->config()))
    return false; // attach_lora_adapter reports why
  // The model must still hold exactly the engine's copy, and the new factors must match it one
  // for one; anything else goes through attach (and the graphs re-capture).
  std::vector<std::pair<const lora_factors*, const lora_factors*>> plan; // {owned, new}
  for (const auto& [module, f] : adapter.modules) {
    const auto owned = owned_adapter_.find(module);
    const auto* layer = model_->find_linear(module);
    if (owned == owned_adapter_.end() || layer == nullptr || !layer->lora.defined())
      return false;
    const auto& o = owned->second;
    if (!layer->lora.a.is_same(o.a) || !layer->lora.b.is_same(o.b) || o.scaling != f.scaling
        || layer->lora.scaling != f.scaling || layer->lora.dropout != f.dropout
        || f.dropout_generator.defined() || !f.defined())
      return false;
    for (const auto& [mine, theirs] : {std::pair{&o.a, &f.a}, std::pair{&o.b, &f.b}})
      if (mine->sizes() != theirs->sizes() || mine->scalar_type() != theirs->scalar_type()
          || mine->device() != theirs->device())
        return false;
    plan.emplace_back(&o, &f);
  }
  try {
    c10::InferenceMode guard;
    for (auto& [owned, f] : plan) {
      owned->a.copy_(f->a);
      owned->b.copy_(f->b);
    }
  } catch (const c10::Error& err) {
    spdlog::warn("{}: copying the adapter in place failed ({}); attaching it instead",
                 options_.name, err.what_without_backtrace());
    return false;
  }
  return true;
}

std::size_t generation_engine::step() {
  c10::InferenceMode guard;
  const auto before = stats_.generated_tokens;
  admit();
  decode();
  return static_cast<std::size_t>(stats_.generated_tokens - before);
}

void generation_engine::run_until_idle() {
  while (!idle())
    step();
}

std::vector<generation_result> generation_engine::generate(
  std::vector<generation_request> requests) {
  std::vector<generation_result> out(requests.size());
  std::vector<uint64_t> tickets;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    tickets.push_back(submit(std::move(requests[i])));
    collect_.emplace_back(tickets.back(), &out[i]);
  }
  run_until_idle();
  collect_.erase(std::remove_if(collect_.begin(), collect_.end(),
                                [&](const auto& c) {
                                  return std::find(tickets.begin(), tickets.end(), c.first)
                                         != tickets.end();
                                }),
                 collect_.end());
  return out;
}

// ---- admission -----------------------------------------------------------------------------------

void generation_engine::admit() {
  for (int64_t slot = 0; slot < options_.slots; ++slot)
    while (!slots_[slot] && !queue_.empty()) {
      auto w = std::move(queue_.front());
      queue_.pop_front();
      start(std::move(w), slot);
    }
}

bool generation_engine::start(waiting_request&& w, int64_t slot) {
  auto s = std::make_unique<sequence>();
  s->ticket = w.ticket;
  s->submitted = w.submitted;
  s->request = std::move(w.request);
  auto& req = s->request;
  auto& res = s->result;
  res.id = req.id;
  res.policy_version = policy_version_;
  res.sampler = options_.name;

  // The checks of the request: each failure ends it here.
  const auto& p = req.params;
  std::string error;
  const bool has_text = !req.prompt_text.empty(), has_tokens = !req.prompt_tokens.empty();
  if (has_text == has_tokens)
    error = has_text ? "the request has both prompt_text and prompt_tokens; expected one"
                     : "the request has no prompt (prompt_text or prompt_tokens)";
  else if (has_text && !tokenizer_)
    error = "prompt_text needs a tokenizer, and this engine has none";
  else if (!p.stop_strings.empty() && !tokenizer_)
    error = "stop strings need a tokenizer, and this engine has none";
  else if (auto ok = check_sampling_params(p); !ok)
    error = describe(ok.error());
  if (error.empty() && has_text)
    req.prompt_tokens = tokenizer_->encode(req.prompt_text, /*add_special_tokens=*/false);
  const auto& prompt = req.prompt_tokens;
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t vocab = model_->config().vocab_size;
  if (error.empty()) {
    for (std::size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || prompt[i] >= vocab) {
        error = "prompt token " + std::to_string(i) + " is " + std::to_string(prompt[i])
                + ", outside the vocabulary [0, " + std::to_string(vocab) + ")";
        break;
      }
  }
  if (error.empty() && prompt_len >= options_.max_sequence_length)
    error = "the prompt of " + std::to_string(prompt_len) + " tokens leaves no room in a cache "
            "slot of " + std::to_string(options_.max_sequence_length) + " positions";
  res.prompt_token_count = static_cast<int32_t>(prompt_len);
  if (!error.empty()) {
    finish(*s, finish_reason::error, error);
    return false;
  }

  s->stop_ids = p.stop_token_ids;
  for (auto id : model_->eos_token_ids())
    s->stop_ids.push_back(static_cast<int32_t>(id));
  std::sort(s->stop_ids.begin(), s->stop_ids.end());
  for (const auto& stop : p.stop_strings)
    s->longest_stop = std::max(s->longest_stop, stop.size());
  if (tokenizer_)
    s->decoder.emplace(*tokenizer_, /*skip_special=*/true);
  s->limit = std::min<int64_t>(p.max_new_tokens, options_.max_sequence_length - prompt_len);

  // Prefill: the prompt into the slot, then the first token from its last position.
  const auto start_time = std::chrono::steady_clock::now();
  try {
    const auto device = model_->options().device;
    if (p.temperature > 0)
      s->generator = make_generator(p.seed, device);
    const auto ids =
      at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).view({1, -1})
        .to(device);
    const auto positions = at::arange(prompt_len, at::TensorOptions(at::kLong).device(device))
                             .view({1, -1});
    const auto hidden = model_->forward(ids, positions, cache_mask(positions, prompt_len),
                                        {cache_.get(), slot, prompt_len});
    const auto logits = model_->logits(hidden.select(1, prompt_len - 1)); // [1, vocab]
    const auto drawn = sample_tokens(logits, {row_of(p, s->generator)});
    stats_.prompt_tokens += prompt_len;
    stats_.prefill_seconds += seconds_since(start_time);
    s->length = prompt_len;
    if (append(*s, drawn.ids[0], drawn.logprobs[0]))
      return false;
  } catch (const c10::Error& err) {
    finish(*s, finish_reason::error,
           std::string("prefill failed: ") + err.what_without_backtrace());
    return false;
  }
  slots_[slot] = std::move(s);
  return true;
}

// ---- decoding ------------------------------------------------------------------------------------

bool generation_engine::overlaps_steps() const {
  switch (options_.step_overlap) {
  case generation_engine_options::overlap_mode::on:
    return true;
  case generation_engine_options::overlap_mode::off:
    return false;
  case generation_engine_options::overlap_mode::automatic:
    break;
  }
  return model_->options().device.is_cuda();
}

void generation_engine::decode() {
  const auto start_time = std::chrono::steady_clock::now();
  try {
    auto launched = launch_decode(in_flight_.get());
    if (in_flight_)
      take(*std::exchange(in_flight_, nullptr));
    if (launched && overlaps_steps())
      in_flight_ = std::move(launched);
    else if (launched)
      take(*launched);
  } catch (const c10::Error& err) {
    in_flight_.reset();
    fail_running(std::string("decode step failed: ") + err.what_without_backtrace());
  }
  stats_.decode_seconds += seconds_since(start_time);
}

std::unique_ptr<generation_engine::launched_step>
generation_engine::launch_decode(const launched_step* previous) {
  const int64_t n = options_.slots;
  auto step = std::make_unique<launched_step>();
  // Row 0 the token ids, row 1 the positions, [2, slots]: one copy to the device. A sequence
  // the previous step decoded has its token on the device still (carried), and one position
  // more in the cache than the host has counted.
  std::vector<int64_t> inputs(2 * n, 0);
  std::vector<int64_t> carried_rows, carried_slots;
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = slots_[i];
    if (!s)
      continue;
    const int64_t row = previous != nullptr ? previous->row_of(i, s->ticket) : -1;
    // Sure to end with the previous step's token (its last one allowed): nothing to decode.
    if (row >= 0 && static_cast<int64_t>(s->result.completion_tokens.size()) + 1 >= s->limit)
      continue;
    const int64_t position = s->length + (row >= 0 ? 1 : 0);
    if (row >= 0) {
      carried_rows.push_back(row);
      carried_slots.push_back(i);
    } else {
      inputs[i] = s->next_token;
    }
    inputs[n + i] = position;
    longest = std::max(longest, position + 1);
    step->slots.push_back(i);
    step->tickets.push_back(s->ticket);
  }
  if (step->slots.empty())
    return nullptr;

  const auto device = model_->options().device;
  auto on_device = upload(at::from_blob(inputs.data(), {2, n}, at::kLong), device);
  if (!carried_rows.empty()) {
    auto ids = previous->drawn.ids_on_device();
    if (!is_identity(carried_rows, ids.size(0)))
      ids = ids.index_select(0, upload_indices(carried_rows, device));
    auto token_row = on_device.select(0, 0);
    if (is_identity(carried_slots, n))
      token_row.copy_(ids); // the float ids convert exactly
    else
      token_row.index_copy_(0, upload_indices(carried_slots, device), ids.to(at::kLong));
  }
  auto logits = decode_logits(on_device, longest); // [slots, vocab]
  std::vector<sampling_row> rows;
  for (auto i : step->slots)
    rows.push_back(row_of(slots_[i]->request.params, slots_[i]->generator));
  if (static_cast<int64_t>(step->slots.size()) < n)
    logits = logits.index_select(0, upload_indices(step->slots, device));
  step->drawn = draw_tokens(logits, rows);
  ++stats_.decode_steps;
  return step;
}

void generation_engine::take(launched_step& step) {
  const auto drawn = step.drawn.wait();
  for (std::size_t j = 0; j < step.slots.size(); ++j) {
    auto& s = slots_[step.slots[j]];
    if (!s || s->ticket != step.tickets[j])
      continue; // ended (or cancelled) before this step's tokens arrived
    s->length += 1; // its input token is in the cache now
    if (append(*s, drawn.ids[j], drawn.logprobs[j]))
      s.reset();
  }
}

void generation_engine::settle() {
  if (!in_flight_)
    return;
  try {
    take(*std::exchange(in_flight_, nullptr));
  } catch (const c10::Error& err) {
    fail_running(std::string("decode step failed: ") + err.what_without_backtrace());
  }
}

at::Tensor generation_engine::decode_logits(const at::Tensor& inputs, int64_t needed) {
  const int64_t n = options_.slots;
  if (graph_ && graph_->available()) {
    const auto captures_before = graph_->captures();
    auto logits = graph_->run(inputs, needed);
    stats_.graph_captures += graph_->captures() - captures_before;
    if (logits && logits->defined()) {
      ++stats_.graph_steps;
      return *logits;
    }
    if (!logits && !graph_warned_) {
      graph_warned_ = true;
      spdlog::warn("{}: CUDA graphs off from now on, decoding eagerly: {}", options_.name,
                   describe(logits.error()));
    }
  }
  const int64_t key_len = pick_key_length(key_lengths_, needed);
  const auto ids = inputs.select(0, 0).view({n, 1});
  const auto positions = inputs.select(0, 1).view({n, 1});
  const auto hidden = model_->forward(ids, positions, cache_mask(positions, key_len),
                                      {cache_.get(), 0, key_len});
  return model_->logits(hidden.squeeze(1));
}

bool generation_engine::append(sequence& s, int32_t token, float logprob) {
  ++stats_.generated_tokens;
  auto& res = s.result;
  res.completion_tokens.push_back(token);
  res.logprobs.push_back(logprob);
  s.next_token = token;
  if (std::binary_search(s.stop_ids.begin(), s.stop_ids.end(), token)) {
    finish(s, finish_reason::stop_token);
    return true;
  }
  if (s.decoder) {
    auto& text = res.completion_text;
    const std::size_t old_size = text.size();
    text += s.decoder->push(token);
    if (s.longest_stop > 0 && text.size() > old_size) {
      // Only a match that ends in the new text is new: start where such a match could begin.
      const std::size_t from = old_size >= s.longest_stop ? old_size - s.longest_stop + 1 : 0;
      std::size_t cut = std::string::npos;
      for (const auto& stop : s.request.params.stop_strings)
        cut = std::min(cut, text.find(stop, from));
      if (cut != std::string::npos) {
        text.resize(cut);
        finish(s, finish_reason::stop_string);
        return true;
      }
    }
  }
  if (static_cast<int64_t>(res.completion_tokens.size()) >= s.limit) {
    finish(s, finish_reason::length);
    return true;
  }
  return false;
}

void generation_engine::finish(sequence& s, finish_reason why, std::string error) {
  if (s.done)
    return;
  s.done = true;
  if (s.decoder && why != finish_reason::stop_string)
    s.result.completion_text += s.decoder->finish();
  s.result.finish = why;
  s.result.error = std::move(error);
  s.result.seconds = now() - s.submitted;
  deliver(s.ticket, std::move(s.result));
}

void generation_engine::fail_running(const std::string& why) {
  for (auto& s : slots_)
    if (s) {
      finish(*s, finish_reason::error, why);
      s.reset();
    }
}

} // namespace kbrl::model
