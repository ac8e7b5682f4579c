#include "runtime/sampler/remote_backend.hpp"

#include "messages/errors.hpp"
#include "runtime/remote/remote_sampler.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

namespace kbrl::sampling {

namespace {

class remote_backend final : public generation_backend {
public:
  remote_backend(std::unique_ptr<remote::remote_sampler> client, uint64_t slots)
    : client_(std::move(client)), slots_(slots) {}

  std::string kind() const override { return "remote"; }
  std::string model() const override { return client_->current_model(); }

  void submit(generation_request request, done_fn done) override {
    auto id = request.id;
    client_->submit(std::move(request), [this, id, done = std::move(done)](
                                          remote::remote_sampler::results res) {
      if (!res || res->empty()) {
        generation_result failed;
        failed.id = id;
        failed.finish = finish_reason::error;
        failed.error = res ? "the server returned no completion" : describe(res.error());
        ++failures_;
        done(std::move(failed));
        return;
      }
      auto out = std::move(res->front());
      completion_tokens_ += out.completion_tokens.size();
      ++completions_;
      done(std::move(out));
    });
  }

  caf::expected<void> apply_policy(const policy_update& update) override {
    if (update.adapter_dir.empty())
      return make_error(errc::invalid_argument,
                        "policy version " + std::to_string(update.version)
                          + ": a remote server loads adapters from a path on its own disk, and "
                            "this update carries none (put the learner's adapter directory on "
                            "storage the server can read)");
    auto name = "kbrl-policy-v" + std::to_string(update.version);
    if (auto ok = client_->load_lora_adapter(name, update.adapter_dir); !ok)
      return ok.error();
    std::string previous;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      previous = loaded_;
      loaded_ = name;
    }
    client_->use_model(name, update.version);
    version_ = update.version;
    if (!previous.empty())
      if (auto gone = client_->unload_lora_adapter(previous); !gone)
        spdlog::warn("could not unload the previous adapter {} from the server: {}", previous,
                     describe(gone.error()));
    return {};
  }

  backend_stats stats() const override {
    backend_stats s;
    auto cs = client_->stats();
    s.active = cs.http.in_flight;
    s.waiting = cs.http.waiting;
    s.slots = slots_;
    s.completion_tokens = completion_tokens_;
    s.completions = completions_;
    s.failures = failures_;
    s.policy_version = version_;
    s.detail = "retries " + std::to_string(cs.http.retries) + ", connections "
               + std::to_string(cs.http.connections_opened);
    return s;
  }

private:
  std::unique_ptr<remote::remote_sampler> client_;
  uint64_t slots_; ///< requests on the wire at once (max_in_flight)
  mutable std::mutex mutex_;
  std::string loaded_; ///< the adapter requests use now ("" = base model)
  std::atomic<uint64_t> completion_tokens_{0}, completions_{0}, failures_{0},
    version_{0};
};

} // namespace

caf::expected<std::unique_ptr<generation_backend>>
make_remote_backend(remote::remote_sampler_options opts) {
  auto slots = static_cast<uint64_t>(opts.max_in_flight);
  auto client = remote::remote_sampler::create(std::move(opts));
  if (!client)
    return client.error();
  if (auto ok = (*client)->check_model(); !ok)
    return ok.error();
  return std::unique_ptr<generation_backend>(
    new remote_backend(std::move(*client), slots));
}

} // namespace kbrl::sampling
