#pragma once
// Asking another actor and handing its answer back to our own requester.
//
// Relayed, not delegated: a delegated request is answered by the target itself, and when the
// target is a detached actor (learner, sampler, retriever, evaluator) and the requester is on
// another node, that answer can still sit in the middleman when this node shuts down, holding a
// reference to the target; CAF 0.17's actor system then waits forever for the detached actor's
// thread. A relayed answer names the (scheduled) relaying actor instead.

#include <caf/duration.hpp>
#include <caf/error.hpp>
#include <caf/result.hpp>

#include <utility>

namespace kbrl {

/// Asks `target` (within `timeout`; caf::infinite when the requester has a timeout of its own)
/// and delivers its answer or error to the request `self` is handling.
template <class Answer, class Self, class Handle, class... Ts>
caf::result<Answer> relay_from(Self* self, const Handle& target, caf::duration timeout,
                               Ts&&... xs) {
  auto rp = self->template make_response_promise<Answer>();
  self->request(target, timeout, std::forward<Ts>(xs)...)
    .then([rp](Answer& answer) mutable { rp.deliver(std::move(answer)); },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

} // namespace kbrl
