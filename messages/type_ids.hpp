#pragma once
// The one CAF type-ID block: every type that crosses actors or nodes is listed here, and
// registered once through kbrl::register_message_types (messages/type_ids.cpp).
// Adding a message type? Add it here AND to test/test_messages.cpp's round-trip list.

#include "messages/data.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"

#include <caf/type_id.hpp>

CAF_BEGIN_TYPE_ID_BLOCK(kbrl, caf::first_custom_type_id)

  // -- data
  CAF_ADD_TYPE_ID(kbrl, (kbrl::problem))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::sampling_params))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::generation_request))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::generation_result))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::timing_options))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::eval_request))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::runtime_stats))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::trial_result))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::kernel_time))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::phase_time))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::eval_result))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::build_file))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::build_output))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::turn))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::trajectory))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::trajectory_batch))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::policy_update))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::metric_record))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::retrieved_example))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::status_detail))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::actor_status))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::actor_entry))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::node_info))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::node_record))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::membership_view))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::node_status))

  // -- containers and plain types that appear alone in messages
  // (CAF's vector<T> registration does not happen through the ID block: list them here.)
  CAF_ADD_TYPE_ID(kbrl, (std::vector<std::string>))
  CAF_ADD_TYPE_ID(kbrl, (std::vector<uint8_t>))
  CAF_ADD_TYPE_ID(kbrl, (std::vector<kbrl::metric_record>))
  CAF_ADD_TYPE_ID(kbrl, (std::vector<kbrl::trajectory>))
  CAF_ADD_TYPE_ID(kbrl, (std::vector<kbrl::retrieved_example>))
  CAF_ADD_TYPE_ID(kbrl, (std::vector<kbrl::actor_status>))

  // -- typed actor handles that travel inside messages
  CAF_ADD_TYPE_ID(kbrl, (kbrl::status_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::actor_host_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::membership_listener_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::policy_listener_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::membership_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::node_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::sampler_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::evaluator_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::evaluator_supervisor_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::builder_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::build_service_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::learner_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::coordinator_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::episode_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::retriever_actor))
  CAF_ADD_TYPE_ID(kbrl, (kbrl::metrics_actor))

CAF_END_TYPE_ID_BLOCK(kbrl)

namespace caf {
class actor_system_config;
}

namespace kbrl {

/// Registers every type of the block and kbrl's error category with a system config. Call once,
/// before the actor system is created; every kbrl process and test system does.
void register_message_types(caf::actor_system_config& cfg);

} // namespace kbrl
