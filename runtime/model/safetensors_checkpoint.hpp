#pragma once
// The weights of a model, in one safetensors file or sharded over several. A sharded checkpoint
// has an index, model.safetensors.index.json:
//   {"metadata": {"total_size": 123}, "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors", ...}}
// Each shard is opened (mapped and validated) once, however many tensors it holds. The index is
// the authority on which tensors exist: a tensor it lists that is absent from its shard is an
// error naming both; tensors a shard holds beyond the index are not visible.

#include "runtime/model/model_files.hpp" // the file names
#include "runtime/model/safetensors.hpp"

#include <caf/expected.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kbrl::model {

/// Every tensor of a checkpoint, whichever file holds it. Copies share the mapped files.
class safetensors_checkpoint {
public:
  /// The checkpoint in model directory `dir`: the index if there is one, else model.safetensors.
  /// Fails with errc::io_failure if neither exists, naming both.
  static caf::expected<safetensors_checkpoint> open_dir(const std::filesystem::path& dir);

  /// The sharded checkpoint described by the index file at `index_path`; shards are looked up in
  /// its directory. Fails with errc::invalid_argument if the index is malformed, names a shard
  /// outside its directory, or lists a tensor its shard does not hold, and with the errors of
  /// safetensors_file::open() for a bad shard.
  static caf::expected<safetensors_checkpoint> open_index(const std::filesystem::path& index_path);

  /// A checkpoint of one file.
  static caf::expected<safetensors_checkpoint> open_file(const std::filesystem::path& path);

  /// The index file, or empty for a checkpoint of one file.
  const std::filesystem::path& index_path() const { return index_path_; }

  /// Every file, each once (shards in the order of their names).
  const std::vector<safetensors_file>& files() const { return files_; }

  /// Every tensor name, sorted.
  std::vector<std::string> names() const;

  /// The description of tensor `name`, or nullptr.
  const tensor_entry* find(const std::string& name) const;

  /// The file that holds tensor `name`, or nullptr.
  const safetensors_file* file_of(const std::string& name) const;

  /// Tensor `name` (see safetensors_file::tensor). Fails with errc::invalid_argument naming the
  /// checkpoint if there is no such tensor.
  caf::expected<at::Tensor> tensor(const std::string& name,
                                   tensor_access access = tensor_access::view) const;

private:
  std::filesystem::path index_path_;
  std::vector<safetensors_file> files_;
  std::map<std::string, std::size_t> where_; ///< tensor name -> position in files_
};

} // namespace kbrl::model
