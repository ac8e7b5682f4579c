#pragma once
// The bookkeeping of one kbrl-eval output folder: which problems are finished (read back from
// OUT/problems/ when a run continues), which records each open problem still waits for, and the
// per-problem file written the moment its last record arrives.
//
//   expect(p, n)    problem p will have n records in this run
//   restore(ps)     read OUT/problems/<id>.json of each p that has one: its records count as
//                   done (the file must carry this run's signature); a file holding a
//                   `generation` or `infrastructure` record (a failure that was not the
//                   candidate's) is not restored, so the problem runs again
//   add(r)          one record in; the problem's file is written when it has all n
//   records()       everything so far, finished problems first-to-last by level and number
//
// Not thread-safe: one owner (kbrl-eval's collector actor) calls it.

#include "messages/data.hpp"
#include "runtime/report/results_json.hpp"
#include "runtime/report/sample_record.hpp"

#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace kbrl::report {

class run_ledger {
public:
  run_ledger(std::string output_dir, run_signature signature);

  /// OUT/problems/<problem id>.json, e.g. OUT/problems/level1/19_ReLU.json.
  std::string problem_path(const std::string& problem_id) const;

  /// Reads back the finished problems among `problems`; returns the ids restored. Fails with
  /// errc::invalid_argument when a file cannot be read or was written by a run with another
  /// signature (the text names the file and each difference).
  caf::expected<std::vector<std::string>> restore(const std::vector<problem>& problems);

  /// Problem `id` will get `records` records in this run.
  void expect(const std::string& id, size_t records);

  /// Adds a record of an expected problem. Returns true when that completed the problem (its
  /// file is written then). Fails with errc::io_failure when the file cannot be written, and
  /// with errc::internal for a problem that was not expected or already complete.
  caf::expected<bool> add(sample_record record);

  /// True when `id` was restored or has all its records.
  bool finished(const std::string& id) const;

  /// Every record (restored and new), ordered by level, problem, sample, turn.
  std::vector<sample_record> records() const;

  size_t problems_finished() const;
  size_t problems_open() const;

private:
  struct problem_state {
    size_t expected = 0;
    bool done = false;
    std::vector<sample_record> records;
  };
  std::string output_dir_;
  run_signature signature_;
  std::map<std::string, problem_state> problems_;
};

} // namespace kbrl::report
