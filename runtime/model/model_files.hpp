#pragma once
// A model directory in the Hugging Face layout, as `save_pretrained` writes it and the hub
// serves it:
//   config.json                     the architecture (model_config.hpp)         required
//   generation_config.json          sampling defaults, stop tokens              optional
//   tokenizer.json                  the tokenizer                               optional here
//   tokenizer_config.json           chat template, special tokens               optional here
//   model.safetensors               the weights, or else
//   model.safetensors.index.json    + the shards it names                       one is required
// The tokenizer files are optional here because test checkpoints have none; the tokenizer's
// loader requires them. check_weights() compares a checkpoint with what its config needs.
// This header stays free of torch headers, so the hub code can use it.

#include "runtime/model/model_config.hpp"

#include <caf/expected.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::model {

/// The file name of the index of a sharded checkpoint.
inline constexpr const char* safetensors_index_name = "model.safetensors.index.json";
/// The file name of an unsharded checkpoint.
inline constexpr const char* safetensors_single_name = "model.safetensors";

class safetensors_checkpoint; // safetensors_checkpoint.hpp (kept out: it brings in ATen)

/// The files of one model directory, each an existing path inside `dir`.
struct model_files {
  std::filesystem::path dir;
  std::filesystem::path config;                            ///< config.json
  std::optional<std::filesystem::path> generation_config;  ///< generation_config.json
  std::optional<std::filesystem::path> tokenizer;          ///< tokenizer.json
  std::optional<std::filesystem::path> tokenizer_config;   ///< tokenizer_config.json
  std::optional<std::filesystem::path> weights_index;      ///< model.safetensors.index.json
  /// model.safetensors, or every shard the index names (sorted, each once).
  std::vector<std::filesystem::path> weight_files;
};

/// The required files missing from model directory `dir`, as file names relative to it:
/// config.json, the weights (model.safetensors if there is no index), and each shard the index
/// names. An unreadable index counts as missing. Empty when the directory is complete.
std::vector<std::string> missing_model_files(const std::filesystem::path& dir);

/// The files of model directory `dir`. Fails with errc::io_failure if `dir` is not a directory
/// or a required file is missing (naming each), and with errc::invalid_argument if the index
/// is malformed.
caf::expected<model_files> find_model_files(const std::filesystem::path& dir);

/// Checks that `checkpoint` holds every tensor expected_weights(config) lists, with that shape
/// and a floating-point dtype. Tensors beyond those are allowed (a tied lm_head.weight, for
/// one). Fails with errc::invalid_argument listing each problem on its own line: a missing
/// tensor with the shape it should have, a wrong shape with both shapes, a non-float dtype.
caf::expected<void> check_weights(const model_config& config,
                                  const safetensors_checkpoint& checkpoint);

} // namespace kbrl::model
