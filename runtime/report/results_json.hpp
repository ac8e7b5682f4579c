#pragma once
// The files of a kbrl-eval output folder:
//
//   OUT/run.json                       what the run is (run_info) and its signature
//   OUT/problems/level<L>/<name>.json  one per finished problem: its sample records
//   OUT/results.json                   run_info, the aggregate metrics, every sample record
//   OUT/report.html                    (html_report.hpp)
//   OUT/generations/...                --model runs: the completions (generations_dir.hpp)
//
// A re-run with the same OUT continues: problems whose file exists are read back instead of
// evaluated again, provided the signature (the settings that decide verdicts) is the same.
// Every file is written to a temporary name and renamed, so an interruption never leaves half a
// file. Strings are stored as valid UTF-8 (invalid bytes of error output become U+FFFD).

#include "messages/data.hpp"
#include "runtime/report/eval_metrics.hpp"
#include "runtime/report/sample_record.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl {
class json_writer;
}

namespace kbrl::report {

/// What an evaluation run is.
struct run_info {
  std::string mode;             ///< "model" or "generations"
  std::string model;            ///< --model (path or hub id), or the remote model's name
  std::string adapter;          ///< --adapter directory
  std::string generations_dir;  ///< --generations folder
  std::string problem_source;   ///< the KernelBench checkout or folder of problems
  std::vector<int32_t> levels;
  std::string problems = "all"; ///< the problem numbers asked for ("1-20")
  int32_t samples = 1;          ///< samples per problem
  int32_t turns = 1;            ///< turns per sample
  std::string backend = "cuda";
  std::string precision = "fp32";
  timing_options timing;
  /// What `speedup` is measured against: "eager" (the PyTorch reference as written) or
  /// "compile" (the reference compiled with torch.compile, default mode).
  std::string reference = "eager";
  /// Which verdict `correct` is (eval.correctness): "strict" or "kernelbench" (KernelBench's
  /// allclose check); the KernelBench metrics are reported beside it either way.
  std::string correctness = "strict";
  std::string sampling;         ///< e.g. "temperature 0.7, top_p 0.95, max_new_tokens 4096"
  std::string prompt;           ///< how prompts were made, e.g. "single-turn v1, chat format chatml"
  std::string evaluator;        ///< device(s) of the evaluators, e.g. "cpu" or "gpu 0,1"
  std::string machine;          ///< host name, GPUs and libtorch of the machine kbrl-eval ran on
  std::string kbrl_version = KBRL_VERSION;
  std::string started;          ///< UTC, ISO 8601
  std::string finished;
  double wall_seconds = 0;      ///< this invocation's, not counting earlier interrupted ones
  int64_t tensorboard_step = -1;///< the step metrics were logged at, -1 if not
};

/// The settings of a run that decide its verdicts, as (name, value) pairs: mode, model, adapter,
/// generations folder, samples, turns, backend, precision, timing, sampling, prompt, and the
/// reference when it is not eager and the correctness verdict when it is not strict (so
/// folders of earlier versions still match).
using run_signature = std::vector<std::pair<std::string, std::string>>;
run_signature signature_of(const run_info& info);

/// "" when equal, else one line per difference: "samples: 4 now, 2 in the output folder"; a
/// setting present on one side only is a difference too.
std::string signature_difference(const run_signature& now, const run_signature& stored);

/// Writes one record as a JSON object.
void write_record(json_writer& w, const sample_record& r);

/// One record read back from the JSON text write_record() wrote. Fails with
/// errc::invalid_argument naming `where` and the field.
caf::expected<sample_record> parse_record(std::string_view json, const std::string& where);

/// The contents of OUT/run.json.
std::string run_json(const run_info& info);

/// The signature stored in a run.json. Fails with errc::invalid_argument naming the file.
caf::expected<run_signature> read_run_signature(const std::string& path);

/// The contents of a per-problem file.
std::string problem_json(const std::string& problem, const run_signature& signature,
                         const std::vector<sample_record>& records);

/// A per-problem file read back.
struct problem_file {
  std::string problem;
  run_signature signature;
  std::vector<sample_record> records;
};

/// Reads a per-problem file. Fails with errc::invalid_argument naming the file and the field.
caf::expected<problem_file> read_problem_json(const std::string& path);

/// The contents of OUT/results.json: {"run": ..., "aggregate": ..., "samples": [...]}.
std::string results_json(const run_info& info, const eval_metrics& metrics,
                         const std::vector<sample_record>& records);

/// Reads the "samples" of a results.json (or of any file holding such an array).
caf::expected<std::vector<sample_record>> read_results_samples(const std::string& path);

/// Writes `text` to `path` through a temporary file and a rename; creates parent folders.
/// Fails with errc::io_failure naming the path.
caf::expected<void> write_file_atomically(const std::string& path, const std::string& text);

/// The current UTC time as 2025-01-31T12:00:00Z.
std::string utc_now();

} // namespace kbrl::report
