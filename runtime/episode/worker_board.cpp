#include "runtime/episode/worker_board.hpp"

namespace kbrl {

void worker_board::set(std::vector<sampler_actor> samplers,
                       std::vector<evaluator_supervisor_actor> evaluators) {
  std::lock_guard<std::mutex> lock(mutex_);
  samplers_ = std::move(samplers);
  evaluators_ = std::move(evaluators);
  ++revision_;
}

uint64_t worker_board::copy_if_newer(uint64_t seen, std::vector<sampler_actor>& samplers,
                                     std::vector<evaluator_supervisor_actor>& evaluators) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (revision_ > seen) {
    samplers = samplers_;
    evaluators = evaluators_;
  }
  return revision_;
}

uint64_t worker_board::revision() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return revision_;
}

std::string worker_board::missing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (revision_ == 0)
    return {};
  if (samplers_.empty() && evaluators_.empty())
    return "a sampler and an evaluator";
  if (samplers_.empty())
    return "a sampler";
  if (evaluators_.empty())
    return "an evaluator";
  return {};
}

} // namespace kbrl
