#include "runtime/sampler/builtin_backend.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/model/generation_engine.hpp"
#include "runtime/model/load_policy.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/transformer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace kbrl::sampling {

namespace {

/// Writes an adapter that came as bytes (adapter_model.safetensors plus its adapter_config.json
/// text) into a directory of this process's own, and returns it.
caf::expected<std::string> adapter_from_bytes(const policy_update& update) {
  if (update.adapter_bytes.empty() || update.adapter_config.empty())
    return make_error(errc::invalid_argument,
                      "policy version " + std::to_string(update.version) + ": the adapter "
                        "directory \"" + update.adapter_dir + "\" is not readable here and the "
                        "update carries no adapter bytes and config to rebuild it from");
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("kbrl-policies-" + std::to_string(::getpid()))
             / ("v" + std::to_string(update.version));
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string_view weights(reinterpret_cast<const char*>(update.adapter_bytes.data()),
                           update.adapter_bytes.size());
  if (auto ok = io::write_file_atomically(dir / "adapter_model.safetensors", {weights}); !ok)
    return ok.error();
  if (auto ok = io::write_file_atomically(dir / "adapter_config.json", {update.adapter_config});
      !ok)
    return ok.error();
  return dir.string();
}

/// An adapter swap asked for by the actor, done by the engine thread between steps.
struct pending_policy {
  policy_update update;
  std::promise<caf::expected<void>> done;
};

class builtin_backend final : public generation_backend {
public:
  builtin_backend(std::string model_name, std::unique_ptr<model::transformer> model,
                  model::generation_engine engine, uint64_t slots)
    : model_name_(std::move(model_name)), model_(std::move(model)), engine_(std::move(engine)),
      slots_(slots) {
    engine_.on_result([this](generation_result res) { deliver(std::move(res)); });
    thread_ = std::thread([this] { run(); });
  }

  ~builtin_backend() override {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    // Whatever never finished is answered, once.
    for (auto& [id, done] : callbacks_) {
      generation_result res;
      res.id = id;
      res.finish = finish_reason::cancelled;
      res.error = "the sampler stopped";
      done(std::move(res));
    }
  }

  std::string kind() const override { return "builtin"; }
  std::string model() const override { return model_name_; }

  void submit(generation_request request, done_fn done) override {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      incoming_.emplace_back(std::move(request), std::move(done));
    }
    wake_.notify_all();
  }

  caf::expected<void> apply_policy(const policy_update& update) override {
    auto job = std::make_shared<pending_policy>();
    job->update = update;
    // A learner on another node sends the adapter itself: it gets a local directory.
    std::error_code ec;
    bool readable = !update.adapter_dir.empty() && std::filesystem::exists(update.adapter_dir, ec);
    if (!readable) {
      auto dir = adapter_from_bytes(update);
      if (!dir)
        return dir.error();
      job->update.adapter_dir = *dir;
    }
    auto result = job->done.get_future();
    {
      std::lock_guard<std::mutex> guard{mutex_};
      policies_.push_back(job);
    }
    wake_.notify_all();
    return result.get();
  }

  backend_stats stats() const override {
    std::lock_guard<std::mutex> guard{mutex_};
    backend_stats s = stats_;
    s.slots = slots_;
    return s;
  }

private:
  /// The engine thread: takes new requests and adapter swaps, steps while there is work.
  void run() {
    for (;;) {
      std::vector<std::pair<generation_request, done_fn>> fresh;
      std::vector<std::shared_ptr<pending_policy>> swaps;
      {
        std::unique_lock<std::mutex> lock{mutex_};
        wake_.wait(lock, [this] {
          return stopping_ || !incoming_.empty() || !policies_.empty() || !engine_.idle();
        });
        if (stopping_)
          return;
        fresh.swap(incoming_);
        swaps.swap(policies_);
      }
      for (auto& job : swaps)
        job->done.set_value(swap_adapter(job->update));
      for (auto& [req, done] : fresh) {
        callbacks_[req.id] = std::move(done);
        engine_.submit(std::move(req));
      }
      try {
        engine_.step();
      } catch (const std::exception& e) { // the engine ends sequences itself; this is a backstop
        spdlog::error("{}: generation step failed: {}", model_name_, e.what());
      }
      std::lock_guard<std::mutex> guard{mutex_};
      stats_.waiting = engine_.waiting();
      stats_.active = engine_.running();
    }
  }

  caf::expected<void> swap_adapter(const policy_update& update) {
    auto opts = at::TensorOptions().device(model_->options().device).dtype(model_->options().dtype);
    auto adapter = model::load_lora_adapter(update.adapter_dir, model_->config(), opts);
    if (!adapter)
      return adapter.error();
    auto next = std::make_unique<model::lora_adapter>(std::move(*adapter));
    if (auto ok = engine_.set_adapter(next.get(), update.version); !ok)
      return ok.error();
    adapter_ = std::move(next); // the previous adapter's tensors are released here
    std::lock_guard<std::mutex> guard{mutex_};
    stats_.policy_version = update.version;
    return {};
  }

  void deliver(generation_result res) {
    auto it = callbacks_.find(res.id);
    if (it == callbacks_.end())
      return;
    auto done = std::move(it->second);
    callbacks_.erase(it);
    {
      std::lock_guard<std::mutex> guard{mutex_};
      ++stats_.completions;
      stats_.completion_tokens += res.completion_tokens.size();
      if (res.finish == finish_reason::error)
        ++stats_.failures;
    }
    done(std::move(res));
  }

  std::string model_name_;
  std::unique_ptr<model::transformer> model_; ///< the engine points into it: keep it first
  model::generation_engine engine_;
  std::unique_ptr<model::lora_adapter> adapter_;
  uint64_t slots_;
  std::map<uint64_t, done_fn> callbacks_; ///< engine thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::pair<generation_request, done_fn>> incoming_;
  std::vector<std::shared_ptr<pending_policy>> policies_;
  backend_stats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace

caf::expected<std::unique_ptr<generation_backend>>
make_builtin_backend(const sampler_settings& s) {
  if (s.model.empty())
    return make_error(errc::invalid_config,
                      "sampler.model is empty: the built-in sampler needs a model directory or a "
                      "Hugging Face id (or set sampler.backend = \"remote\")");
  auto dir = model::resolve_policy_dir(s.model);
  if (!dir)
    return dir.error();
  auto opts = model::placement_options({s.dtype, s.gpu});
  spdlog::info("loading {} ({}) onto {}", s.model, s.dtype, opts.device.str());
  auto loaded = model::transformer::load(*dir, opts);
  if (!loaded)
    return loaded.error();
  auto model = std::make_unique<model::transformer>(std::move(*loaded));
  auto tokenizer = tok::tokenizer::load(*dir);
  if (!tokenizer)
    return tokenizer.error();
  model::generation_engine_options eo;
  eo.slots = s.slots;
  eo.max_sequence_length = s.max_seq_len;
  eo.cuda_graphs = s.cuda_graphs;
  eo.name = s.model;
  auto engine = model::generation_engine::create(*model, std::move(*tokenizer), eo);
  if (!engine)
    return engine.error();
  return std::unique_ptr<generation_backend>(
    new builtin_backend(s.model, std::move(model), std::move(*engine),
                        static_cast<uint64_t>(s.slots)));
}

} // namespace kbrl::sampling
