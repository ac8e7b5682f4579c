#include "runtime/sampler/sampler_settings.hpp"

#include "runtime/config/settings.hpp"

namespace kbrl::sampling {

sampler_settings sampler_settings_from(const config::run_config& run, int gpu,
                                       const std::string& name) {
  sampler_settings s;
  s.backend = run.get_string("sampler.backend");
  s.queue_capacity = static_cast<size_t>(run.get_int("sampler.queue_capacity"));
  s.model = run.get_string("sampler.model");
  s.dtype = run.get_string("sampler.dtype");
  s.gpu = gpu;
  s.slots = static_cast<int32_t>(run.get_int("sampler.slots"));
  s.max_seq_len = static_cast<int32_t>(run.get_int("sampler.max_seq_len"));
  s.cuda_graphs = run.get_bool("sampler.cuda_graphs");
  auto& r = s.remote;
  r.name = name;
  r.base_url = run.get_string("sampler.remote_url");
  r.model = run.get_string("sampler.remote_model");
  r.api = *remote::parse_remote_api(run.get_string("sampler.remote_api"));
  r.max_in_flight = static_cast<int32_t>(run.get_int("sampler.remote_max_in_flight"));
  r.request_timeout_s = run.get_real("sampler.remote_timeout_s");
  r.use_token_prompts = run.get_bool("sampler.remote_token_prompts");
  s.replay_completions = run.get_string("sampler.replay_completions");
  return s;
}

} // namespace kbrl::sampling
