#pragma once
// A generation backend that sends requests to an OpenAI-compatible server (vLLM, SGLang,
// llama.cpp server) through kbrl::remote::remote_sampler. Policy updates become vLLM LoRA
// adapters loaded by name from the directory the learner wrote.

#include "runtime/remote/remote_options.hpp"
#include "runtime/sampler/generation_backend.hpp"

namespace kbrl::sampling {

/// Connects (checks that the server lists the model) and returns the backend.
caf::expected<std::unique_ptr<generation_backend>>
make_remote_backend(remote::remote_sampler_options opts);

} // namespace kbrl::sampling
