#include "runtime/evalcli/tensorboard_target.hpp"

#include "messages/errors.hpp"
#include "runtime/train/checkpoint_list.hpp"

#include <filesystem>

namespace kbrl::evalcli {

namespace fs = std::filesystem;

caf::expected<int64_t> checkpoint_step(const std::string& adapter_dir, std::string* source) {
  auto dir = fs::absolute(adapter_dir).lexically_normal();
  if (!dir.has_filename())
    dir = dir.parent_path(); // a trailing slash
  std::string looked;
  // The adapter folder inside a step folder, or the step folder itself.
  for (auto step_dir : {dir.parent_path(), dir}) {
    auto root = step_dir.parent_path();
    auto list = root / "checkpoints.jsonl";
    std::error_code ec;
    looked += (looked.empty() ? "" : ", ") + list.string();
    if (!fs::exists(list, ec))
      continue;
    auto entries = train::list_checkpoints(root);
    if (!entries)
      return entries.error();
    for (auto& e : *entries)
      if (e.dir == step_dir.filename().string()) {
        if (source)
          *source = list.string();
        return e.step;
      }
  }
  return make_error(errc::invalid_argument,
                    "cannot tell the training step of " + adapter_dir
                      + ": no checkpoints.jsonl lists its checkpoint folder (looked in " + looked
                      + "); give --step N");
}

caf::expected<tensorboard_target> resolve_tensorboard(const std::string& dir, int64_t step,
                                                      const std::string& adapter) {
  tensorboard_target t;
  std::error_code ec;
  const fs::path d(dir);
  bool run_dir = fs::is_directory(d / "tensorboard", ec) || fs::exists(d / "config.toml", ec)
                 || fs::exists(d / "metrics.jsonl", ec);
  t.log_dir = run_dir ? (d / "tensorboard").string() : dir;
  if (step >= 0) {
    t.step = step;
    t.step_source = "--step";
    return t;
  }
  if (adapter.empty())
    return make_error(errc::invalid_argument,
                      "--tensorboard needs --step N (the training step the metrics belong to), "
                      "or an --adapter from a learner checkpoint to read it from");
  auto from_checkpoint = checkpoint_step(adapter, &t.step_source);
  if (!from_checkpoint)
    return from_checkpoint.error();
  t.step = *from_checkpoint;
  return t;
}

} // namespace kbrl::evalcli
