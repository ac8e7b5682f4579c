#pragma once
// The built-in generation backend: the policy model in libtorch on this node's GPU (or CPU),
// driven by a continuous-batching generation_engine on a thread of its own. Requests from the
// sampler actor join the running batch at the next step; policy updates (PEFT adapters) are
// swapped in between steps without reloading the base weights.

#include "runtime/sampler/generation_backend.hpp"
#include "runtime/sampler/sampler_settings.hpp"

namespace kbrl::sampling {

/// Resolves settings.model (directory or hub id), loads model and tokenizer onto settings.gpu
/// in settings.dtype and starts the engine thread. Errors name the sampler.* key or the file.
caf::expected<std::unique_ptr<generation_backend>>
make_builtin_backend(const sampler_settings& settings);

} // namespace kbrl::sampling
