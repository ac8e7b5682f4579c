#include "tools/evalcli/evaluator_setup.hpp"

#include "actors/actor_stats.hpp"
#include "messages/errors.hpp"
#include "runtime/node/node_plan.hpp"

#include <cstdlib>
#include <filesystem>

namespace kbrl::evalcli {

namespace fs = std::filesystem;

caf::expected<evaluator_setup> setup_evaluators(const eval_options& o,
                                                const config::run_config& run,
                                                const std::string& output_dir,
                                                size_t queue_capacity) {
  auto engine = evaluation_engine_options(run);
  if (auto ok = eval::validate_overrides(engine.rule_overrides); !ok)
    return ok.error();
  char tmpl[] = "/tmp/kbrl-eval-XXXXXX";
  if (!::mkdtemp(tmpl))
    return make_error(errc::io_failure, "cannot create a scratch folder under /tmp");
  evaluator_setup out;
  out.scratch = tmpl;
  std::error_code ec;
  // Searchable by others: as root, workers run as nobody inside it.
  fs::permissions(out.scratch, fs::perms::others_exec, fs::perm_options::add, ec);
  auto cache_dir = run.get_string("eval.cache_dir");
  if (cache_dir.empty()) {
    engine.reference_cache_file = (fs::path(output_dir) / ".cache" / "reference_times.jsonl").string();
    engine.worker.extensions_dir = out.scratch + "/extensions";
  } else {
    engine.worker.extensions_dir = (fs::path(cache_dir) / "extensions").string();
  }
  auto add_slot = [&](int gpu, int index) {
    evaluator_slot s;
    s.name = actor_name("kbrl-eval", "evaluator", index);
    s.gpu = gpu;
    s.engine = engine;
    s.engine.worker.scratch_dir = out.scratch + "/evaluator." + std::to_string(index);
    s.engine.worker.gpu = gpu;
    out.slots.push_back(std::move(s));
  };
  if (o.gpus.empty())
    add_slot(-1, 0);
  for (size_t i = 0; i < o.gpus.size(); ++i)
    add_slot(o.gpus[i], static_cast<int>(i));
  out.builder_engine = engine;
  out.builder_engine.worker.scratch_dir = out.scratch + "/builders";
  out.builder_engine.worker.gpu = -1;
  out.supervision = evaluation_supervision(run);
  out.supervision.queue_capacity = queue_capacity;
  return out;
}

} // namespace kbrl::evalcli
