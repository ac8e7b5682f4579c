#include "runtime/model/model_files.hpp"

#include "messages/errors.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/file_io.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"

#include <simdjson.h>

#include <set>

namespace kbrl::model {

namespace fs = std::filesystem;

namespace {

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec); // follows symlinks: hub snapshots link into blobs/
}

/// The shard file names an index lists, sorted and distinct; nullopt if it cannot be read.
std::optional<std::set<std::string>> shards_of_index(const fs::path& index) {
  auto text = read_text_file(index);
  if (!text)
    return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::dom::object weight_map;
  if (parser.parse(*text)["weight_map"].get(weight_map))
    return std::nullopt;
  std::set<std::string> out;
  for (auto field : weight_map) {
    std::string_view shard;
    // A shard outside the directory makes the index unreadable (open_index says why).
    if (field.value.get(shard) || shard.empty() || shard.find('/') != std::string_view::npos
        || shard == "." || shard == "..")
      return std::nullopt;
    out.emplace(shard);
  }
  return out;
}

} // namespace

std::vector<std::string> missing_model_files(const fs::path& dir) {
  std::vector<std::string> missing;
  if (!is_file(dir / "config.json"))
    missing.push_back("config.json");
  if (is_file(dir / safetensors_index_name)) {
    auto shards = shards_of_index(dir / safetensors_index_name);
    if (!shards)
      missing.push_back(std::string(safetensors_index_name) + " (unreadable)");
    else
      for (const auto& shard : *shards)
        if (!is_file(dir / shard))
          missing.push_back(shard);
  } else if (!is_file(dir / safetensors_single_name)) {
    missing.push_back(safetensors_single_name);
  }
  return missing;
}

caf::expected<model_files> find_model_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(errc::io_failure, "model directory " + dir.string() + " does not exist");
  auto missing = missing_model_files(dir);
  if (!missing.empty())
    return make_error(errc::io_failure, "model directory " + dir.string() + " lacks "
                                          + join(missing));
  model_files out;
  out.dir = dir;
  out.config = dir / "config.json";
  auto optional_file = [&](const char* name) -> std::optional<fs::path> {
    if (is_file(dir / name))
      return dir / name;
    return std::nullopt;
  };
  out.generation_config = optional_file("generation_config.json");
  out.tokenizer = optional_file("tokenizer.json");
  out.tokenizer_config = optional_file("tokenizer_config.json");
  out.weights_index = optional_file(safetensors_index_name);
  if (out.weights_index) {
    const auto shards = shards_of_index(*out.weights_index); // readable: checked above
    for (const auto& shard : shards.value_or(std::set<std::string>{}))
      out.weight_files.push_back(dir / shard);
  } else {
    out.weight_files.push_back(dir / safetensors_single_name);
  }
  return out;
}

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
