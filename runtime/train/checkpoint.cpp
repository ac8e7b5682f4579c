#include "runtime/train/checkpoint.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/train/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <simdjson.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace kbrl::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* state_name = trainer_state_file;
constexpr const char* optimizer_name = "optimizer.safetensors";
constexpr const char* adapter_dir = "adapter";
constexpr const char* tmp_prefix = ".tmp-";
constexpr int64_t format_version = 1;

caf::error io_error(const fs::path& path, const std::string& what) {
  return make_error(errc::io_failure, path.string() + ": " + what);
}

void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::string state_json(const lora_trainer& t, const data_cursor& cursor) {
  const auto& o = t.options();
  json_writer w;
  w.begin_object();
  w.field("format", format_version);
  w.field("step", t.steps_done());
  write_data_cursor(w, cursor);
  w.field("param_dtype", std::string(c10::toString(to_scalar_type(o.param_dtype))));
  w.field("rank", t.lora().config().r);
  w.key("layout").begin_array();
  for (const auto& s : t.lora().slots()) {
    w.begin_object();
    w.field("module", s.module);
    w.field("in_features", s.in_features);
    w.field("out_features", s.out_features);
    w.end_object();
  }
  w.end_array();
  // For people reading the checkpoint: how the run was set up.
  w.key("options").begin_object();
  w.field("lr", o.adamw.lr);
  w.field("weight_decay", o.adamw.weight_decay);
  w.field("adam_beta1", o.adamw.beta1);
  w.field("adam_beta2", o.adamw.beta2);
  w.field("adam_eps", o.adamw.eps);
  w.field("schedule", std::string(to_string(o.schedule.kind)));
  w.field("warmup_steps", o.schedule.warmup_steps);
  w.field("total_steps", o.schedule.total_steps);
  w.field("clip_norm", o.clip_norm);
  w.field("lora_dropout", o.lora_dropout);
  w.field("loss", std::string(rl::to_string(o.loss.kind)));
  w.field("aggregation", std::string(rl::to_string(o.aggregation)));
  w.field("temperature", o.temperature);
  w.field("seed", static_cast<uint64_t>(o.seed));
  w.end_object();
  w.end_object();
  return w.str();
}

/// The default generator of the trainer's CUDA device, or an undefined one on the CPU.
at::Generator cuda_generator(const lora_trainer& t) {
  const auto device = t.model().options().device;
  if (!device.is_cuda())
    return {};
  return at::globalContext().defaultGenerator(device);
}

at::Tensor generator_state(at::Generator g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_generator_state(at::Generator g, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

/// Removes temporary directories that a crashed save left behind.
void remove_leftovers(const fs::path& root) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.rfind(tmp_prefix, 0) == 0) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

} // namespace

caf::expected<checkpoint_entry> save_checkpoint(const fs::path& root, const lora_trainer& trainer,
                                                const data_cursor& cursor, int64_t keep_last) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return io_error(root, "cannot create the checkpoint directory: " + ec.message());
  remove_leftovers(root);

  checkpoint_entry entry;
  entry.step = trainer.steps_done();
  entry.cursor = cursor;
  entry.unix_ms = now_unix_ms();
  entry.dir = step_dir_name(entry.step);
  for (int i = 1; fs::exists(root / entry.dir); ++i)
    entry.dir = step_dir_name(entry.step) + "." + std::to_string(i);

  const fs::path tmp = root / (tmp_prefix + entry.dir + "-" + std::to_string(::getpid()));
  fs::create_directories(tmp, ec);
  if (ec)
    return io_error(tmp, "cannot create: " + ec.message());
  auto fail = [&](caf::error err) -> caf::expected<checkpoint_entry> {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return err;
  };

  try {
    if (auto ok = model::write_lora_adapter(tmp / adapter_dir, trainer.adapter()); !ok)
      return fail(ok.error());
    const auto state = trainer.state();
    std::vector<std::pair<std::string, at::Tensor>> tensors{
      {"exp_avg", state.exp_avg},
      {"exp_avg_sq", state.exp_avg_sq},
      {"rng.dropout", state.dropout_rng},
      {"rng.cpu", generator_state(at::detail::getDefaultCPUGenerator())}};
    if (auto g = cuda_generator(trainer); g.defined())
      tensors.emplace_back("rng.cuda", generator_state(g));
    if (auto ok = model::write_safetensors(tmp / optimizer_name, tensors,
                                           {{"format", "kbrl-learner"}});
        !ok)
      return fail(ok.error());
  } catch (const std::exception& e) {
    return fail(make_error(errc::internal,
                           std::string("checkpoint: reading the trainer's state failed: ")
                             + e.what()));
  }
  // The state file last: a directory with it is complete.
  const auto text = state_json(trainer, cursor);
  if (auto ok = io::write_file_atomically(tmp / state_name, {text}); !ok)
    return fail(ok.error());
  sync_directory(tmp);
  if (::rename(tmp.c_str(), (root / entry.dir).c_str()) != 0)
    return fail(io_error(root / entry.dir, std::string("cannot rename the finished checkpoint "
                                                       "into place: ")
                                             + std::strerror(errno)));
  sync_directory(root);
  if (auto ok = append_checkpoint_entry(root, entry); !ok)
    return ok.error();

  if (keep_last > 0) {
    auto listed = list_checkpoints(root);
    if (listed) {
      std::set<std::string> keep;
      for (auto it = listed->rbegin(); it != listed->rend(); ++it)
        if (static_cast<int64_t>(keep.size()) < keep_last && fs::exists(root / it->dir))
          keep.insert(it->dir);
      keep.insert(entry.dir);
      for (const auto& e : *listed)
        if (keep.count(e.dir) == 0 && fs::exists(root / e.dir)) {
          std::error_code ignored;
          fs::remove_all(root / e.dir, ignored);
        }
    }
  }
  return entry;
}

caf::expected<data_cursor> load_checkpoint(const fs::path& dir, lora_trainer& trainer) {
  const auto state_path = dir / state_name;
  auto text = io::read_text_file(state_path);
  if (!text)
    return text.error();
  const std::string where = state_path.string();
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(*text).get(obj))
    return make_error(errc::invalid_config, where + ": not a JSON object");
  int64_t format = 0, step = 0, rank = 0;
  if (obj["format"].get(format) || format != format_version)
    return make_error(errc::invalid_config,
                      where + ": format: expected " + std::to_string(format_version));
  if (obj["step"].get(step) || step < 0)
    return make_error(errc::invalid_config, where + ": step: expected an integer >= 0");
  if (obj["rank"].get(rank))
    return make_error(errc::invalid_config, where + ": rank: expected an integer");
  auto cursor = read_data_cursor(obj, where);
  if (!cursor)
    return cursor.error();

  // The layout must be the trainer's, slot by slot.
  const auto& slots = trainer.lora().slots();
  std::vector<std::string> problems;
  if (rank != trainer.lora().config().r)
    problems.push_back("rank " + std::to_string(rank) + ", this learner trains rank "
                       + std::to_string(trainer.lora().config().r));
  simdjson::dom::array layout;
  if (obj["layout"].get(layout))
    return make_error(errc::invalid_config, where + ": layout: expected an array");
  std::size_t i = 0;
  for (auto item : layout) {
    std::string_view module;
    int64_t in = 0, out = 0;
    if (item["module"].get(module) || item["in_features"].get(in)
        || item["out_features"].get(out))
      return make_error(errc::invalid_config,
                        where + ": layout[" + std::to_string(i) + "]: expected module, "
                                "in_features and out_features");
    if (i >= slots.size())
      problems.push_back("module " + std::string(module) + " is not trained here");
    else if (slots[i].module != module || slots[i].in_features != in
             || slots[i].out_features != out)
      problems.push_back("slot " + std::to_string(i) + " is " + std::string(module) + " ["
                         + std::to_string(in) + " -> " + std::to_string(out) + "], here "
                         + slots[i].module + " [" + std::to_string(slots[i].in_features) + " -> "
                         + std::to_string(slots[i].out_features) + "]");
    ++i;
  }
  if (i < slots.size())
    problems.push_back(std::to_string(slots.size() - i) + " module(s) of this learner ("
                       + slots[i].module + ", ...) are missing");
  if (!problems.empty())
    return make_error(errc::invalid_argument,
                      where + ": the checkpoint does not fit this learner's adapter:\n"
                        + join(problems, "\n"));

  const auto dtype = to_scalar_type(trainer.options().param_dtype);
  auto adapter = model::load_lora_adapter(dir / adapter_dir, trainer.model().config(),
                                          at::TensorOptions().dtype(dtype));
  if (!adapter)
    return adapter.error();
  auto file = model::safetensors_file::open(dir / optimizer_name);
  if (!file)
    return file.error();
  trainer_state state;
  state.step = step;
  std::vector<at::Tensor> flat;
  for (const auto& s : slots) {
    auto it = adapter->modules.find(s.module);
    if (it == adapter->modules.end())
      return make_error(errc::invalid_argument,
                        (dir / adapter_dir).string() + ": no factors for " + s.module);
    flat.push_back(it->second.a.reshape({-1}));
    flat.push_back(it->second.b.reshape({-1}));
  }
  state.values = at::cat(flat);
  auto tensor = [&](const char* name) -> caf::expected<at::Tensor> {
    return file->tensor(name, model::tensor_access::copy);
  };
  auto exp_avg = tensor("exp_avg");
  auto exp_avg_sq = tensor("exp_avg_sq");
  auto dropout_rng = tensor("rng.dropout");
  auto cpu_rng = tensor("rng.cpu");
  for (auto* t : {&exp_avg, &exp_avg_sq, &dropout_rng, &cpu_rng})
    if (!*t)
      return t->error();
  if (exp_avg->scalar_type() != dtype || exp_avg_sq->scalar_type() != dtype)
    return make_error(errc::invalid_argument,
                      (dir / optimizer_name).string() + ": moments stored as "
                        + c10::toString(exp_avg->scalar_type()) + ", this learner trains in "
                        + c10::toString(dtype));
  state.exp_avg = *exp_avg;
  state.exp_avg_sq = *exp_avg_sq;
  state.dropout_rng = *dropout_rng;
  if (auto ok = trainer.restore(state); !ok)
    return make_error(errc::invalid_argument, where + ": " + describe(ok.error()));
  try {
    set_generator_state(at::detail::getDefaultCPUGenerator(), *cpu_rng);
    if (auto g = cuda_generator(trainer); g.defined() && file->find("rng.cuda") != nullptr) {
      auto cuda_rng = tensor("rng.cuda");
      if (!cuda_rng)
        return cuda_rng.error();
      set_generator_state(g, *cuda_rng);
    }
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument,
                      (dir / optimizer_name).string() + ": a generator state does not fit: "
                        + e.what());
  }
  return *cursor;
}

} // namespace kbrl::train
