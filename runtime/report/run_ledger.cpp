#include "runtime/report/run_ledger.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <filesystem>
#include <tuple>

namespace kbrl::report {

namespace {

bool rerun_worthy(const sample_record& r) {
  return r.error == generation_error || r.error == to_string(eval_error::infrastructure);
}

} // namespace

run_ledger::run_ledger(std::string output_dir, run_signature signature)
  : output_dir_(std::move(output_dir)), signature_(std::move(signature)) {}

std::string run_ledger::problem_path(const std::string& problem_id) const {
  return (std::filesystem::path(output_dir_) / "problems" / (problem_id + ".json")).string();
}

caf::expected<std::vector<std::string>> run_ledger::restore(const std::vector<problem>& problems) {
  std::vector<std::string> restored;
  for (auto& p : problems) {
    auto path = problem_path(p.id);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      continue;
    auto file = read_problem_json(path);
    if (!file)
      return make_error(errc::invalid_argument,
                        describe(file.error())
                          + " (delete the file to evaluate the problem again)");
    if (auto diff = signature_difference(signature_, file->signature); !diff.empty())
      return make_error(errc::invalid_argument,
                        path + " was written by a run with other settings:\n" + diff
                          + "\n(use another --output folder, or delete it)");
    if (file->problem != p.id)
      return make_error(errc::invalid_argument, path + " holds problem \"" + file->problem
                                                  + "\", expected \"" + p.id + "\"");
    if (std::any_of(file->records.begin(), file->records.end(), rerun_worthy))
      continue;
    auto& st = problems_[p.id];
    st.records = std::move(file->records);
    st.expected = st.records.size();
    st.done = true;
    restored.push_back(p.id);
  }
  return restored;
}

void run_ledger::expect(const std::string& id, size_t records) {
  auto& st = problems_[id];
  st.expected = records;
  st.done = false;
  st.records.clear();
}

caf::expected<bool> run_ledger::add(sample_record record) {
  auto it = problems_.find(record.problem);
  if (it == problems_.end())
    return make_error(errc::internal, "run_ledger: a record of " + record.problem
                                        + ", which was not expected");
  auto& st = it->second;
  if (st.done)
    return make_error(errc::internal,
                      "run_ledger: one record too many for " + record.problem);
  st.records.push_back(std::move(record));
  if (st.records.size() < st.expected)
    return false;
  std::sort(st.records.begin(), st.records.end(), [](const auto& a, const auto& b) {
    return std::tie(a.sample, a.turn) < std::tie(b.sample, b.turn);
  });
  st.done = true;
  if (auto ok = write_file_atomically(problem_path(it->first),
                                      problem_json(it->first, signature_, st.records));
      !ok)
    return ok.error();
  return true;
}

bool run_ledger::finished(const std::string& id) const {
  auto it = problems_.find(id);
  return it != problems_.end() && it->second.done;
}

std::vector<sample_record> run_ledger::records() const {
  std::vector<sample_record> out;
  for (auto& [id, st] : problems_)
    out.insert(out.end(), st.records.begin(), st.records.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.level, a.problem_number, a.problem, a.sample, a.turn)
           < std::tie(b.level, b.problem_number, b.problem, b.sample, b.turn);
  });
  return out;
}

size_t run_ledger::problems_finished() const {
  return static_cast<size_t>(std::count_if(problems_.begin(), problems_.end(),
                                           [](auto& kv) { return kv.second.done; }));
}

size_t run_ledger::problems_open() const { return problems_.size() - problems_finished(); }

} // namespace kbrl::report
