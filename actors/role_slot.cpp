#include "actors/role_slot.hpp"

#include <caf/all.hpp>

namespace kbrl {

status_actor::behavior_type role_slot(role_slot_pointer self, actor_stats stats,
                                      std::vector<status_detail> details) {
  self->state.stats = std::move(stats);
  self->state.details = std::move(details);
  return {
    [self](status_atom) -> actor_status {
      auto& st = self->state;
      st.stats.count();
      return st.stats.snapshot("idle (no work for this role in this build)",
                               self->mailbox().size(), st.details);
    },
    [self](control_atom, const std::string& verb,
           const std::vector<std::string>&) -> caf::result<std::string> {
      self->state.stats.count();
      return no_control_verbs(self->state.stats.name, verb);
    },
  };
}

} // namespace kbrl
