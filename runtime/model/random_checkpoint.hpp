#pragma once
// Tiny random-initialised checkpoints in the exact layout of a published model directory, so
// that tests of the model, the sampler and the learner run on the CPU without downloading
// anything or calling Python. The same (config, seed, dtype) always gives the same bytes.

#include "runtime/model/model_config.hpp"
#include "runtime/model/st_dtype.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>

namespace kbrl::model {

/// Writes a model directory for `config` into `dir` (created if missing): config.json
/// (render_model_config), generation_config.json (the config's bos/eos ids) and the weights of
/// expected_weights(config) in `dtype`. Matrices and biases are drawn from N(0, 0.02^2), norm
/// weights from 1 + N(0, 0.1^2), all from one generator seeded with `seed`, in the order
/// expected_weights() lists them. With `max_shard_bytes` > 0 the weights are split, in that
/// order, over model-0000i-of-0000n.safetensors files of at most that many bytes each (a larger
/// tensor gets a shard to itself) plus model.safetensors.index.json; else one
/// model.safetensors. Fails with errc::invalid_argument for a non-floating `dtype` and with
/// errc::io_failure if a file cannot be written.
caf::expected<void> write_random_checkpoint(const std::filesystem::path& dir,
                                            const model_config& config, uint64_t seed,
                                            st_dtype dtype = st_dtype::f32,
                                            uint64_t max_shard_bytes = 0);

/// A config of the given architecture small enough for unit tests: vocabulary 256, hidden 64,
/// 2 layers, 4 query heads and 2 key/value heads of width 16, MLP 128; Qwen models tie their
/// embeddings, the llama one has llama3 RoPE scaling.
model_config tiny_model_config(const std::string& model_type);

} // namespace kbrl::model
