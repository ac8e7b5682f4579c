#pragma once
// The finished turns of a multi-turn sample, kept so that a continued kbrl-eval run picks the
// episode up at the turn where it stopped, with the same history the next prompt is built from.
//
//   OUT/turns/<problem id>/sample_<S>.jsonl   one line per finished turn, in turn order:
//     {"turn": 0, "completion": "...the model's whole answer...",
//      "evaluated": true, "verdict": {...eval::verdict_json()...},
//      "record": {...the sample record, as results.json writes it...}}
//
// Only turns whose outcome is the model's go in: a turn that failed through kbrl (generation
// or infrastructure errors) is not logged, so the next run draws or evaluates it again. Each
// line is one write with O_APPEND; a line cut short by a crash is ignored when read, and so is
// everything after a line whose turn is not the next one (the episode continues from there).

#include "messages/data.hpp"
#include "runtime/report/sample_record.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace kbrl::evalcli {

/// One finished turn.
struct logged_turn {
  int32_t turn = 0;
  std::string completion;     ///< the model's whole answer
  bool evaluated = false;     ///< a program was found and evaluated
  eval_result verdict;        ///< when evaluated: what the feedback of the next turn is made of
  report::sample_record record;
};

/// OUT/turns/<problem id>/sample_<S>.jsonl.
std::string turn_log_path(const std::string& output_dir, const std::string& problem_id,
                          int32_t sample);

/// The turns logged in `path`, from turn 0 on (none when there is no file). Fails with
/// errc::invalid_argument naming the file and line when a complete line is not a turn.
caf::expected<std::vector<logged_turn>> read_turn_log(const std::string& path);

/// Appends `t` to `path` (parent folders created). Fails with errc::io_failure naming the path.
caf::expected<void> append_turn(const std::string& path, const logged_turn& t);

/// A verdict read back from eval::verdict_json() text through the one verdict codec
/// (runtime/eval/verdict_codec.hpp): every field verdict_json() writes except id; text of
/// versions before issue 16 reads with kernelbench_correct = correct. Fails with
/// errc::invalid_argument naming `where` when it is not JSON or its error is no category.
caf::expected<eval_result> parse_verdict(std::string_view json, const std::string& where);

} // namespace kbrl::evalcli
