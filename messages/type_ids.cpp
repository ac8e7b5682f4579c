#include "messages/type_ids.hpp"

#include <caf/actor_system_config.hpp>

namespace kbrl {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kbrl>();
  cfg.add_error_category(caf::atom("kbrl"),
                         [](uint8_t code, caf::atom_value category, const caf::message& context) {
                           return describe(caf::error{code, category, context});
                         });
}

} // namespace kbrl
