#include "runtime/remote/remote_sampler.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "runtime/remote/openai_protocol.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>

namespace kbrl::remote {

namespace {

using steady = std::chrono::steady_clock;

std::string attempts_text(int n) {
  return std::to_string(n) + (n == 1 ? " attempt" : " attempts");
}

bool success_status(long status) {
  return status >= 200 && status <= 299;
}

} // namespace

/// One generation request on its way: what to send and whom to tell.
struct remote_sampler::attempt {
  generation_request request;
  int32_t n = 1;
  std::string model;               ///< snapshot of the model at submission
  uint64_t policy_version = 0;     ///< snapshot of the version at submission
  bool token_prompt = true;        ///< this attempt sends prompt_tokens
  bool fell_back = false;          ///< re-sent as text after the server refused the token prompt
  steady::time_point submitted;
  callback done;                   ///< empty for generate()
};

caf::expected<std::unique_ptr<remote_sampler>> remote_sampler::create(remote_sampler_options opts) {
  if (auto ok = validate(opts); !ok)
    return ok.error();
  return std::unique_ptr<remote_sampler>(new remote_sampler(std::move(opts)));
}

remote_sampler::remote_sampler(remote_sampler_options opts)
  : opts_(std::move(opts)), base_url_(normalized_base_url(opts_.base_url)), model_(opts_.model) {
  http_client_options h;
  h.max_in_flight = opts_.max_in_flight;
  h.connect_timeout_s = opts_.connect_timeout_s;
  h.request_timeout_s = opts_.request_timeout_s;
  h.retry = opts_.retry;
  h.bearer_token = resolved_api_key(opts_);
  h.max_reply_bytes = opts_.max_reply_bytes;
  completion_thread_ = std::thread([this] { run_completions(); });
  http_ = std::make_unique<http_client>(std::move(h));
}

remote_sampler::~remote_sampler() {
  // 1. Let the completion thread finish what is queued; text re-sends still reach the server.
  {
    std::lock_guard<std::mutex> guard{done_mutex_};
    stopping_ = true;
  }
  done_ready_.notify_all();
  completion_thread_.join();
  // 2. Fail what is still on the wire or waiting: the HTTP client queues one reply each.
  std::unique_ptr<http_client> http;
  {
    std::lock_guard<std::mutex> guard{done_mutex_};
    http = std::move(http_);
  }
  http.reset();
  // 3. Run those last callbacks here.
  std::deque<std::function<void()>> rest;
  {
    std::lock_guard<std::mutex> guard{done_mutex_};
    rest.swap(done_queue_);
  }
  for (auto& task : rest)
    run_task(task);
}

std::string remote_sampler::url(const char* path) const {
  return base_url_ + path;
}

void remote_sampler::use_model(std::string model, uint64_t policy_version) {
  std::lock_guard<std::mutex> guard{model_mutex_};
  model_ = std::move(model);
  policy_version_ = policy_version;
}

std::string remote_sampler::current_model() const {
  std::lock_guard<std::mutex> guard{model_mutex_};
  return model_;
}

remote_sampler_stats remote_sampler::stats() const {
  remote_sampler_stats s;
  {
    std::lock_guard<std::mutex> guard{done_mutex_};
    if (http_)
      s.http = http_->stats();
  }
  s.completions = completions_;
  s.failures = failures_;
  s.text_fallbacks = text_fallbacks_;
  s.token_prompts_refused = token_prompts_refused_;
  return s;
}

caf::error remote_sampler::status_error(const http_reply& reply) const {
  errc code = errc::io_failure;
  std::string hint;
  if (reply.status == 401 || reply.status == 403) {
    code = errc::invalid_config;
    hint = " (check remote_sampler_options.api_key or OPENAI_API_KEY)";
  } else if (reply.status == 429) {
    code = errc::busy;
  } else if (reply.status >= 400 && reply.status <= 499) {
    code = errc::invalid_argument;
  }
  const auto message = server_error_message(reply.body);
  return make_error(code, reply.method + " " + reply.url + ": HTTP " + std::to_string(reply.status)
                            + " after " + attempts_text(reply.attempts) + hint + ": "
                            + message.value_or("the reply carries no error message")
                            + "; body: " + body_excerpt(reply.body, opts_.error_excerpt_bytes));
}

namespace {

const char* endpoint(remote_api api) {
  return api == remote_api::chat ? "/v1/chat/completions" : "/v1/completions";
}

} // namespace

std::shared_ptr<remote_sampler::attempt>
remote_sampler::make_attempt(generation_request request, int32_t n, callback done) const {
  auto a = std::make_shared<attempt>();
  a->request = std::move(request);
  a->n = n;
  {
    std::lock_guard<std::mutex> guard{model_mutex_};
    a->model = model_;
    a->policy_version = policy_version_;
  }
  a->token_prompt = opts_.use_token_prompts && !token_prompts_refused_;
  a->submitted = steady::now();
  a->done = std::move(done);
  return a;
}

caf::expected<http_request> remote_sampler::request_of(const attempt& a) const {
  request_shape shape;
  shape.api = opts_.api;
  shape.model = a.model;
  shape.token_prompt = a.token_prompt;
  shape.request_token_ids = opts_.request_token_ids;
  shape.top_logprobs = opts_.top_logprobs;
  shape.n = a.n;
  auto body = build_request_body(a.request, shape);
  if (!body)
    return body.error();
  http_request req;
  req.method = "POST";
  req.url = url(endpoint(opts_.api));
  req.body = std::move(*body);
  return req;
}

std::optional<remote_sampler::results> remote_sampler::read_reply(attempt& a,
                                                                  const http_reply& reply) {
  auto fail = [this](caf::error err) -> std::optional<results> {
    ++failures_;
    return results{std::move(err)};
  };
  if (reply.error)
    return fail(reply.error);
  if (!success_status(reply.status)) {
    if (reply.status == 400 && a.token_prompt && !a.request.prompt_text.empty()) {
      spdlog::warn("remote sampler {}: {} refused a token prompt (HTTP 400: {}); sending the "
                   "prompt as text",
                   opts_.name, reply.url, server_error_message(reply.body).value_or("no message"));
      ++text_fallbacks_;
      a.token_prompt = false;
      a.fell_back = true;
      return std::nullopt;
    }
    return fail(status_error(reply));
  }
  reply_context ctx;
  ctx.url = reply.url;
  ctx.status = reply.status;
  ctx.api = opts_.api;
  ctx.request_id = a.request.id;
  ctx.prompt_token_count =
    a.token_prompt ? static_cast<int32_t>(a.request.prompt_tokens.size()) : 0;
  ctx.policy_version = a.policy_version;
  ctx.sampler = opts_.name;
  ctx.require_token_ids = opts_.require_token_ids;
  ctx.excerpt_bytes = opts_.error_excerpt_bytes;
  auto parsed = parse_generation_reply(reply.body, ctx);
  if (!parsed)
    return fail(parsed.error());
  const double seconds = std::chrono::duration<double>(steady::now() - a.submitted).count();
  for (auto& r : *parsed)
    r.seconds = seconds;
  completions_ += parsed->size();
  // Only a text re-send that worked shows the server takes no token prompts (a 400 can have
  // other causes, which the text prompt then meets too).
  if (a.fell_back && !token_prompts_refused_.exchange(true))
    spdlog::warn("remote sampler {}: the server takes text prompts only; prompts are sent as text "
                 "from now on",
                 opts_.name);
  return results{std::move(*parsed)};
}

void remote_sampler::post(std::function<void()> task) {
  std::lock_guard<std::mutex> guard{done_mutex_};
  done_queue_.push_back(std::move(task));
  done_ready_.notify_one();
}

http_client* remote_sampler::http() const {
  std::lock_guard<std::mutex> guard{done_mutex_};
  return http_.get();
}

void remote_sampler::submit(generation_request request, callback done, int32_t n) {
  send(make_attempt(std::move(request), n, std::move(done)));
}

void remote_sampler::send(std::shared_ptr<attempt> a) {
  auto req = request_of(*a);
  if (!req) {
    ++failures_;
    post([a, err = req.error()] { a->done(err); });
    return;
  }
  http_client* client = http();
  if (client == nullptr) {
    // Only during destruction: a text re-send after the HTTP client is gone.
    ++failures_;
    a->done(make_error(errc::io_failure, req->method + " " + req->url
                                           + ": the sampler shut down before the request "
                                             "finished"));
    return;
  }
  // The event thread only queues the reply; parsing and the callback run on the completion
  // thread, so a slow callback never holds up the wire.
  client->submit(std::move(*req), [this, a](http_reply reply) {
    post([this, a, reply = std::move(reply)] { complete(a, reply); });
  });
}

void remote_sampler::complete(const std::shared_ptr<attempt>& a, const http_reply& reply) {
  auto out = read_reply(*a, reply);
  if (!out) {
    send(a);
    return;
  }
  a->done(std::move(*out));
}

remote_sampler::results remote_sampler::generate(const generation_request& request, int32_t n) {
  auto a = make_attempt(request, n, nullptr);
  for (;;) {
    auto req = request_of(*a);
    if (!req) {
      ++failures_;
      return req.error();
    }
    auto out = read_reply(*a, call(std::move(*req)));
    if (out)
      return std::move(*out);
    // else: the server refused the token prompt; go again with text
  }
}

http_reply remote_sampler::call(http_request request) {
  // The promise is fulfilled on the HTTP event thread, so a blocking call works from any thread,
  // the completion thread included.
  http_client* client = http();
  if (client == nullptr) {
    http_reply reply;
    reply.method = request.method;
    reply.url = request.url;
    reply.error = make_error(errc::io_failure, request.method + " " + request.url
                                                 + ": the sampler is shutting down");
    return reply;
  }
  auto promise = std::make_shared<std::promise<http_reply>>();
  auto future = promise->get_future();
  client->submit(std::move(request),
                 [promise](http_reply reply) { promise->set_value(std::move(reply)); });
  return future.get();
}

caf::expected<std::vector<std::string>> remote_sampler::list_models() {
  http_request req;
  req.method = "GET";
  req.url = url("/v1/models");
  req.timeout_s = opts_.control_timeout_s;
  req.control = true;
  const auto reply = call(std::move(req));
  if (reply.error)
    return reply.error;
  if (!success_status(reply.status))
    return status_error(reply);
  return parse_model_list(reply.body, reply.url, reply.status, opts_.error_excerpt_bytes);
}

caf::expected<void> remote_sampler::check_model() {
  auto models = list_models();
  if (!models)
    return models.error();
  const std::string model = current_model();
  if (std::find(models->begin(), models->end(), model) != models->end())
    return {};
  return make_error(errc::invalid_config,
                    "the server at " + base_url_ + " does not serve model \"" + model
                      + "\"; it lists: "
                      + (models->empty() ? std::string{"no models"} : join(*models, ", "))
                      + " (set remote_sampler_options.model to one of these; vLLM names a model "
                        "after --served-model-name, else its path)");
}

caf::error remote_sampler::adapter_error(const http_reply& reply, const std::string& action,
                                         const std::string& name) const {
  const auto message = server_error_message(reply.body);
  // A server without the endpoint answers like any web framework does for an unknown route
  // (FastAPI: 404 {"detail": "Not Found"}); a vLLM that has it answers 404 only with its own
  // error object ("The lora adapter 'x' cannot be found.").
  const bool no_route = (reply.status == 404 && (!message || *message == "Not Found"))
                        || reply.status == 405;
  if (no_route)
    return make_error(errc::not_supported,
                      reply.method + " " + reply.url + ": the server has no " + action
                        + " endpoint (HTTP " + std::to_string(reply.status)
                        + "); a vLLM server loads LoRA adapters at runtime only when started "
                          "with --enable-lora and the environment variable "
                          "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; body: "
                        + body_excerpt(reply.body, opts_.error_excerpt_bytes));
  if (reply.status == 400 || reply.status == 404)
    return make_error(errc::invalid_argument,
                      reply.method + " " + reply.url + ": the server refused to " + action
                        + " LoRA adapter \"" + name + "\" (HTTP " + std::to_string(reply.status)
                        + "): "
                        + message.value_or(body_excerpt(reply.body, opts_.error_excerpt_bytes)));
  return status_error(reply);
}

caf::expected<void> remote_sampler::load_lora_adapter(const std::string& name,
                                                      const std::string& path) {
  json_writer w;
  w.begin_object().field("lora_name", name).field("lora_path", path).end_object();
  http_request req;
  req.method = "POST";
  req.url = url("/v1/load_lora_adapter");
  req.body = w.str();
  req.timeout_s = opts_.control_timeout_s;
  req.control = true;
  const auto reply = call(std::move(req));
  if (reply.error)
    return reply.error;
  if (!success_status(reply.status))
    return adapter_error(reply, "load", name);
  spdlog::info("remote sampler {}: loaded LoRA adapter \"{}\" from {}", opts_.name, name, path);
  return {};
}

caf::expected<void> remote_sampler::unload_lora_adapter(const std::string& name) {
  json_writer w;
  w.begin_object().field("lora_name", name).end_object();
  http_request req;
  req.method = "POST";
  req.url = url("/v1/unload_lora_adapter");
  req.body = w.str();
  req.timeout_s = opts_.control_timeout_s;
  req.control = true;
  const auto reply = call(std::move(req));
  if (reply.error)
    return reply.error;
  if (!success_status(reply.status))
    return adapter_error(reply, "unload", name);
  return {};
}

void remote_sampler::run_completions() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock{done_mutex_};
      done_ready_.wait(lock, [this] { return stopping_ || !done_queue_.empty(); });
      if (done_queue_.empty())
        return; // stopping, and nothing left
      task = std::move(done_queue_.front());
      done_queue_.pop_front();
    }
    run_task(task);
  }
}

void remote_sampler::run_task(const std::function<void()>& task) {
  try {
    task();
  } catch (const std::exception& e) {
    spdlog::error("remote sampler {}: a completion callback threw: {}", opts_.name, e.what());
  } catch (...) {
    spdlog::error("remote sampler {}: a completion callback threw", opts_.name);
  }
}

} // namespace kbrl::remote
