#include "runtime/model/model_files.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/text.hpp"

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
  auto text = io::read_text_file(index);
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

} // namespace kbrl::model
