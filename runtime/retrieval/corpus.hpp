#pragma once
// Kernel corpora for retrieval-augmented prompts: JSONL files, one example per line, each a
// PyTorch reference program and a kernel that implements it. Users export the public datasets
// to JSONL (`datasets.load_dataset(...).to_json("f.jsonl")`); a field mapping says which JSON
// field holds what. Built in:
//
//   kernelbook  GPUMODE/KernelBook: python_code (PyTorch module), triton_code (Triton kernel,
//               KernelBench-style), entry_point, uuid; every row is Triton and was checked
//               correct by the dataset's pipeline, no speedups or levels.
//   sakana      SakanaAI/AI-CUDA-Engineer-Archive: PyTorch_Code_Module, CUDA_Code, Op_Name,
//               Level_ID, Task_ID, Kernel_Name, Correct, CUDA_Speedup_Native (speedup over
//               PyTorch eager); every row is CUDA.
//
// Any other layout is described in a small TOML file (load_field_mapping()).
//
// Loading is forgiving: a line that is not a JSON object, lacks the reference or kernel field,
// or has a field of the wrong type is counted as malformed (with its line number and reason) and
// skipped; only a file whose every line is malformed, or that is empty, fails. Rows are then
// filtered (backend, correctness, minimum speedup, levels), and duplicates (the same reference
// and kernel up to whitespace, source_keys.hpp) collapse to the one with the best speedup.

#include "messages/data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// One example of a corpus.
struct corpus_entry {
  std::string id;               ///< from the mapping's id fields, else "<file name>:<line>"
  std::string name;             ///< operator or module name, "" if the corpus has none
  std::string reference_source; ///< the PyTorch program
  std::string kernel_source;    ///< the kernel implementing it
  kernel_backend backend = kernel_backend::cuda;
  int32_t level = 0;            ///< KernelBench level, 0 if unknown
  std::optional<bool> correct;  ///< as labelled; nullopt when the corpus does not say
  double speedup = 0;           ///< as labelled (over PyTorch eager), 0 if unknown
  std::string reference_hash;   ///< source_keys.hpp
  std::string reference_key;    ///< source_keys.hpp
  int64_t line = 0;             ///< line number in the corpus file (1-based)
};

/// Which JSON field of a row holds what. Field names are matched exactly.
struct field_mapping {
  /// Name shown in summaries and stored in the index manifest: "kernelbook", "sakana", or the
  /// mapping file's path.
  std::string name;
  /// Fields whose values, joined with "/", form the entry id; fields a row lacks are left out,
  /// and a row with none of them gets "<file name>:<line>". Default: none.
  std::vector<std::string> id;
  /// Field of the operator or module name (a string). Default: none.
  std::string name_field;
  /// Field of the PyTorch reference program (a non-empty string). Required.
  std::string reference;
  /// Field of the kernel source (a non-empty string). Required.
  std::string kernel;
  /// Field naming each row's backend ("cuda", "triton", ...). Default: none, every row has
  /// `backend`. A row whose field is missing or null also gets `backend`.
  std::string backend_field;
  /// The backend of rows without a backend field. Default cuda.
  kernel_backend backend = kernel_backend::cuda;
  /// Field of the KernelBench level (an integer, or a string holding one). Default: none.
  std::string level;
  /// Field of the correctness label (a boolean, 0/1, or "true"/"false"). Default: none.
  std::string correct;
  /// Field of the speedup over PyTorch eager (a number, or a string holding one; null means
  /// unknown). Default: none.
  std::string speedup;
};

/// The mapping of GPUMODE/KernelBook.
field_mapping kernelbook_mapping();

/// The mapping of SakanaAI/AI-CUDA-Engineer-Archive.
field_mapping sakana_mapping();

/// Reads a mapping from a TOML file of top-level keys, the field_mapping members by name:
///   reference = "src"  kernel = "kernel"  backend = "triton"  backend_field = "lang"
///   id = ["task", "name"]  name = "op"  level = "level"  correct = "ok"  speedup = "speedup"
/// `reference` and `kernel` are required. Fails with errc::invalid_config naming the file, line
/// and key for a missing or mistyped key, an unknown key or an unknown backend.
caf::expected<field_mapping> load_field_mapping(const std::string& path);

/// "kernelbook", "sakana", or a path to a mapping file.
caf::expected<field_mapping> resolve_field_mapping(const std::string& name_or_path);

/// Which rows are kept.
struct corpus_filters {
  /// Backends kept; empty keeps all. Default: all.
  std::vector<kernel_backend> backends;
  /// Drop rows labelled incorrect (rows without a label are kept). Default true.
  bool require_correct = true;
  /// Keep only rows whose labelled speedup is at least this; when > 0, rows without a speedup
  /// label are dropped too. Default 0 (no speedup filter).
  double min_speedup = 0;
  /// KernelBench levels kept; empty keeps all, else rows of unknown level are dropped. Default:
  /// all.
  std::vector<int32_t> levels;
};

/// A line that could not be read as an example.
struct malformed_line {
  int64_t line = 0;
  std::string reason;   ///< e.g. "field 'CUDA_Code' is missing"
};

/// What loading did with every line.
struct corpus_report {
  int64_t lines = 0;                     ///< non-blank lines read
  std::vector<malformed_line> malformed; ///< in file order
  int64_t dropped_backend = 0;
  int64_t dropped_incorrect = 0;
  int64_t dropped_speedup = 0;           ///< below min_speedup, or unlabelled while it is set
  int64_t dropped_level = 0;
  int64_t duplicates = 0;                ///< rows folded into an equal earlier row
  int64_t kept = 0;

  /// Lines that are not in the corpus: malformed, dropped by a filter or duplicates.
  int64_t skipped() const;

  /// One line for a person: "1200 lines: 1150 kept, 3 malformed (lines 7, 19, 44), 40 dropped
  /// as incorrect, 7 duplicates".
  std::string summary() const;
};

/// A loaded corpus.
struct corpus {
  std::vector<corpus_entry> entries;   ///< kept rows in file order (a duplicate keeps the
                                       ///< position of its first row)
  corpus_report report;
  std::string sha256;                  ///< of the file's bytes, lower-case hex
};

/// Reads the JSONL file at `path` as the mapping says and filters it. Fails with
/// errc::io_failure when the file cannot be read, and with errc::invalid_argument when it has no
/// non-blank line, when every line is malformed (the text names the first few and why) or when
/// the filters leave nothing (the text says how many each filter dropped).
caf::expected<corpus> load_corpus(const std::string& path, const field_mapping& mapping,
                                  const corpus_filters& filters = {});

} // namespace kbrl::retrieval
