#include "runtime/evalcli/output_folder.hpp"

#include "messages/errors.hpp"

#include <filesystem>
#include <map>
#include <set>

namespace kbrl::evalcli {

namespace fs = std::filesystem;

caf::expected<resumed> open_output_folder(const std::string& output_dir,
                                          const report::run_info& info, run_context& ctx) {
  const fs::path out(output_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec)
    return make_error(errc::io_failure,
                      output_dir + ": cannot create the output folder: " + ec.message());
  // A continued run must have been started with the same settings.
  auto signature = report::signature_of(info);
  auto run_file = (out / "run.json").string();
  if (fs::exists(run_file, ec)) {
    auto stored = report::read_run_signature(run_file);
    if (!stored)
      return stored.error();
    if (auto diff = report::signature_difference(signature, *stored); !diff.empty())
      return make_error(errc::invalid_argument,
                        output_dir + " holds a run with other settings:\n" + diff
                          + "\nuse another --output folder (or delete this one)");
  }
  if (auto ok = report::write_file_atomically(run_file, report::run_json(info)); !ok)
    return ok.error();
  ctx.output_dir = output_dir;
  ctx.ledger = std::make_unique<report::run_ledger>(output_dir, signature);
  auto restored = ctx.ledger->restore(ctx.problems);
  if (!restored)
    return restored.error();
  resumed found;
  found.problems_finished = restored->size();
  std::set<std::string> done(restored->begin(), restored->end());
  std::vector<work_item> open;
  std::map<std::string, size_t> per_problem;
  ctx.logged.clear();
  ctx.expected = 0;
  for (auto& w : ctx.items) {
    auto& id = ctx.problems[w.problem].id;
    if (done.count(id))
      continue;
    std::vector<logged_turn> logged;
    if (w.turns > 1) {
      auto read = read_turn_log(turn_log_path(output_dir, id, w.sample));
      if (!read)
        return read.error();
      logged = std::move(*read);
      if (logged.size() > static_cast<size_t>(w.turns))
        logged.resize(static_cast<size_t>(w.turns));
      found.turns_logged += logged.size();
    }
    per_problem[id] += w.records();
    ctx.expected += w.records();
    ctx.logged.push_back(std::move(logged));
    open.push_back(std::move(w));
  }
  ctx.items = std::move(open);
  for (auto& [id, n] : per_problem)
    ctx.ledger->expect(id, n);
  return found;
}

} // namespace kbrl::evalcli
