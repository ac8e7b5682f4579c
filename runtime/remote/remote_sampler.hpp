#pragma once
// A client of one OpenAI-compatible inference server (vLLM, SGLang, llama.cpp server) that draws
// completions for kbrl's generation_requests: prompt as token ids or text, sampled token ids and
// their log-probabilities back, stop strings and stop token ids, n completions per prompt.
// Runs the server's LoRA adapters too (vLLM's runtime adapter loading), so the learner's new
// weights reach the server as a directory path and a name.
//
// Use:
//   auto sampler = remote_sampler::create(opts);          // checks the options, no network yet
//   (*sampler)->check_model();                            // GET /v1/models: server up, model there
//   (*sampler)->submit(request, [](auto results) {...});  // from any thread, returns at once
//   auto results = (*sampler)->generate(request);          // blocking convenience
//   (*sampler)->load_lora_adapter("policy-v3", "/runs/r1/adapters/v3");
//   (*sampler)->use_model("policy-v3", 3);                 // later requests sample from it
//
// Concurrency: every member function may be called from many threads at once. At most
// opts.max_in_flight requests are on the wire (the rest wait in order), over kept-alive
// connections; failures are retried as retry_policy.hpp says (see http_client.hpp for the life
// of a request). submit() callbacks run one at a time on the sampler's own completion thread
// (which also parses the replies): they should hand work off (send an actor message, fulfil a
// promise) rather than block, since a blocked callback holds up every later one. The blocking
// calls (generate(), list_models(), ...) wait on the HTTP thread, not the completion thread, so a
// callback may make them. The destructor fails every unfinished request with io_failure ("shut
// down before the request finished"; each callback still runs exactly once, the last ones on the
// destroying thread), then joins its threads; it must not run inside a callback.

#include "messages/data.hpp"
#include "runtime/remote/http_client.hpp"
#include "runtime/remote/remote_options.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kbrl::remote {

/// Counters of a remote sampler (the HTTP layer's, plus its own).
struct remote_sampler_stats {
  http_client_stats http;            ///< requests, attempts, retries, connections, in flight
  uint64_t completions = 0;          ///< generation_results returned
  uint64_t failures = 0;             ///< generation requests that ended in an error
  uint64_t text_fallbacks = 0;       ///< token prompts re-sent as text after the server refused
  bool token_prompts_refused = false;///< the server refused a token prompt; text is sent now
};

/// See the file comment.
class remote_sampler {
public:
  /// The answer to one request: its n completions, ordered by choice index, or why it failed.
  using results = caf::expected<std::vector<generation_result>>;
  using callback = std::function<void(results)>;

  /// Validates `opts` (errc::invalid_config naming each wrong field) and starts the HTTP and
  /// completion threads. Does not contact the server: call check_model() for that.
  static caf::expected<std::unique_ptr<remote_sampler>> create(remote_sampler_options opts);

  ~remote_sampler();
  remote_sampler(const remote_sampler&) = delete;
  remote_sampler& operator=(const remote_sampler&) = delete;

  /// Draws `n` completions of `request` (n > 1: one prompt, n samples; the group of GRPO) and
  /// calls `done` on the completion thread. Errors, each naming the URL:
  ///   invalid_argument  the request cannot be sent (no prompt, parameter out of range) or the
  ///                     server refused it (HTTP 4xx other than 401/403/429; its message quoted)
  ///   invalid_config    HTTP 401/403: the API key is missing or wrong
  ///   busy              HTTP 429 after every retry
  ///   io_failure        HTTP 5xx after every retry, a malformed reply (what was wrong and a body
  ///                     excerpt), a broken connection, or the sampler shutting down
  ///   node_unreachable  could not connect, after every retry
  ///   timeout           no complete reply within request_timeout_s
  void submit(generation_request request, callback done, int32_t n = 1);

  /// submit() and wait; the same errors. May be called from a submit() callback.
  results generate(const generation_request& request, int32_t n = 1);

  /// The model ids the server lists (GET /v1/models): base models and loaded adapters.
  /// This and the other control calls below skip the queue of generations and the max_in_flight
  /// limit, so a weight update never waits behind long samples; each attempt has
  /// control_timeout_s.
  caf::expected<std::vector<std::string>> list_models();

  /// Checks that the server answers and lists the model requests use now (opts.model, or the
  /// name given to use_model()). Fails with node_unreachable / timeout when it cannot be
  /// reached, and with invalid_config naming the models the server does have when it is absent.
  caf::expected<void> check_model();

  /// Loads a LoRA adapter into a vLLM server: POST /v1/load_lora_adapter {lora_name, lora_path}.
  /// `path` is read by the server, so it must be a path on the server's machine (a shared disk).
  /// Errors: not_supported when the server has no such endpoint (it must run with --enable-lora
  /// and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True); invalid_argument with the server's message when
  /// it refuses (name already loaded, no adapter at the path, bad adapter).
  caf::expected<void> load_lora_adapter(const std::string& name, const std::string& path);

  /// Unloads a LoRA adapter: POST /v1/unload_lora_adapter {lora_name}. Errors as for load;
  /// invalid_argument when the server has no adapter of that name.
  caf::expected<void> unload_lora_adapter(const std::string& name);

  /// Requests submitted from now on name `model` (a base model or a loaded adapter) and stamp
  /// `policy_version` on their results. Requests already submitted are not affected.
  void use_model(std::string model, uint64_t policy_version);

  /// The model name requests use now.
  std::string current_model() const;

  /// A snapshot of the counters.
  remote_sampler_stats stats() const;

  const remote_sampler_options& options() const { return opts_; }

private:
  struct attempt;
  explicit remote_sampler(remote_sampler_options opts);
  /// A request with the model and version of the moment.
  std::shared_ptr<attempt> make_attempt(generation_request request, int32_t n,
                                        callback done) const;
  /// The HTTP request for an attempt, or why it cannot be sent.
  caf::expected<http_request> request_of(const attempt& a) const;
  /// The results (or error) of a reply, counted in the stats; nullopt when the server refused
  /// the token prompt and the attempt was switched to text, to be sent again.
  std::optional<results> read_reply(attempt& a, const http_reply& reply);
  /// submit()'s path: sends `a`; its reply comes back through complete().
  void send(std::shared_ptr<attempt> a);
  /// On the completion thread: reads the reply, re-sends as text or calls back.
  void complete(const std::shared_ptr<attempt>& a, const http_reply& reply);
  /// Sends one request and waits for its reply (transport errors inside it).
  http_reply call(http_request request);
  /// Queues a task for the completion thread.
  void post(std::function<void()> task);
  /// Runs a completion task, logging what it throws.
  void run_task(const std::function<void()>& task);
  /// The HTTP client, or nullptr once the destructor has taken it.
  http_client* http() const;
  caf::error adapter_error(const http_reply& reply, const std::string& action,
                           const std::string& name) const;
  caf::error status_error(const http_reply& reply) const;
  std::string url(const char* path) const;
  void run_completions();

  remote_sampler_options opts_;
  std::string base_url_;

  mutable std::mutex model_mutex_;
  std::string model_;
  uint64_t policy_version_ = 0;

  std::atomic<bool> token_prompts_refused_{false};
  std::atomic<uint64_t> completions_{0}, failures_{0}, text_fallbacks_{0};

  // Replies handed from the HTTP event thread to the completion thread, which parses them and
  // runs the callbacks.
  mutable std::mutex done_mutex_;
  std::condition_variable done_ready_;
  std::deque<std::function<void()>> done_queue_;
  bool stopping_ = false;
  std::thread completion_thread_;

  // Declared last: destroyed first, so its shutdown callbacks still find the queue above.
  std::unique_ptr<http_client> http_;
};

} // namespace kbrl::remote
