#include "runtime/model/safetensors_checkpoint.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_files.hpp"

#include <simdjson.h>

namespace kbrl::model {

namespace fs = std::filesystem;

namespace {

caf::error bad_index(const fs::path& index, const std::string& what) {
  return make_error(errc::invalid_argument, index.string() + ": " + what);
}

/// A shard name must be a plain file name: an index must not reach outside its directory.
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos
         && name.find('\\') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

} // namespace

caf::expected<safetensors_checkpoint> safetensors_checkpoint::open_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / safetensors_index_name, ec))
    return open_index(dir / safetensors_index_name);
  if (fs::exists(dir / safetensors_single_name, ec))
    return open_file(dir / safetensors_single_name);
  return make_error(errc::io_failure, "no weights in " + dir.string() + ": neither "
                                        + safetensors_single_name + " nor "
                                        + safetensors_index_name + " exists");
}

caf::expected<safetensors_checkpoint> safetensors_checkpoint::open_file(const fs::path& path) {
  auto file = safetensors_file::open(path);
  if (!file)
    return file.error();
  safetensors_checkpoint out;
  for (const auto& e : file->entries())
    out.where_.emplace(e.name, 0);
  out.files_.push_back(std::move(*file));
  return out;
}

caf::expected<safetensors_checkpoint>
safetensors_checkpoint::open_index(const fs::path& index_path) {
  auto text = io::read_text_file(index_path);
  if (!text)
    return text.error();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(*text).get(doc))
    return bad_index(index_path, std::string("not valid JSON: ") + simdjson::error_message(err));
  simdjson::dom::object weight_map;
  if (doc["weight_map"].get(weight_map))
    return bad_index(index_path, "expected an object \"weight_map\" of tensor name -> shard file");

  // Shard file name -> the tensors the index puts there, so each shard is opened once.
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto field : weight_map) {
    std::string_view shard;
    if (field.value.get(shard))
      return bad_index(index_path, "weight_map['" + std::string(field.key)
                                     + "']: expected a shard file name (a string)");
    if (!is_plain_file_name(shard))
      return bad_index(index_path, "weight_map['" + std::string(field.key) + "']: shard '"
                                     + std::string(shard)
                                     + "' is not a file name in the index's directory");
    by_shard[std::string(shard)].emplace_back(field.key);
  }
  if (by_shard.empty())
    return bad_index(index_path, "weight_map is empty");

  safetensors_checkpoint out;
  out.index_path_ = index_path;
  const auto dir = index_path.parent_path();
  for (const auto& [shard, tensors] : by_shard) {
    std::error_code ec;
    if (!fs::exists(dir / shard, ec))
      return make_error(errc::io_failure, index_path.string() + ": shard " + shard
                                            + " (holding '" + tensors.front()
                                            + "') does not exist in " + dir.string());
    auto file = safetensors_file::open(dir / shard);
    if (!file)
      return file.error();
    for (const auto& name : tensors) {
      if (file->find(name) == nullptr)
        return bad_index(index_path, "tensor '" + name + "' is listed in shard " + shard
                                       + ", but " + (dir / shard).string() + " does not hold it");
      if (!out.where_.emplace(name, out.files_.size()).second)
        return bad_index(index_path, "tensor '" + name + "' is listed twice");
    }
    out.files_.push_back(std::move(*file));
  }
  return out;
}

std::vector<std::string> safetensors_checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, i] : where_)
    out.push_back(name);
  return out;
}

const safetensors_file* safetensors_checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : &files_[it->second];
}

const tensor_entry* safetensors_checkpoint::find(const std::string& name) const {
  const auto* file = file_of(name);
  return file == nullptr ? nullptr : file->find(name);
}

caf::expected<at::Tensor> safetensors_checkpoint::tensor(const std::string& name,
                                                         tensor_access access) const {
  const auto* file = file_of(name);
  if (file == nullptr) {
    auto where = index_path_.empty()
                   ? (files_.empty() ? std::string("the checkpoint") : files_.front().path().string())
                   : index_path_.string();
    return make_error(errc::invalid_argument, where + ": no tensor '" + name + "'");
  }
  return file->tensor(name, access);
}

// Declared in model_files.hpp (the files of a model directory), defined here with the
// checkpoint it reads.
caf::expected<void> check_weights(const model_config& config,
                                  const safetensors_checkpoint& checkpoint) {
  // Enough lines to see a pattern (a whole layer missing) without flooding a log.
  constexpr std::size_t max_listed = 20;
  std::vector<std::string> problems;
  std::size_t count = 0;
  auto add = [&](std::string line) {
    if (++count <= max_listed)
      problems.push_back(std::move(line));
  };
  for (const auto& want : expected_weights(config)) {
    const auto* have = checkpoint.find(want.name);
    if (have == nullptr) {
      add("missing tensor '" + want.name + "' (expected shape " + shape_string(want.shape) + ")");
      continue;
    }
    const std::string where = checkpoint.file_of(want.name)->path().filename().string();
    if (have->shape != want.shape)
      add("tensor '" + want.name + "' in " + where + " has shape " + shape_string(have->shape)
          + ", expected " + shape_string(want.shape));
    else if (!is_floating(have->dtype))
      add("tensor '" + want.name + "' in " + where + " has dtype " + to_string(have->dtype)
          + ", expected a floating-point dtype (F32, F16, BF16 or F64)");
  }
  if (problems.empty())
    return caf::unit;
  if (count > max_listed)
    problems.push_back("... and " + std::to_string(count - max_listed) + " more problems");
  const auto& files = checkpoint.files();
  const std::string source = !checkpoint.index_path().empty() ? checkpoint.index_path().string()
                             : files.empty()                  ? std::string("the checkpoint")
                                                              : files.front().path().string();
  return make_error(errc::invalid_argument,
                    source + " does not match its config (" + config.model_type + ", "
                      + std::to_string(config.num_hidden_layers) + " layers, hidden size "
                      + std::to_string(config.hidden_size) + "):\n" + join(problems, "\n"));
}

} // namespace kbrl::model
