#pragma once
// A retrieval index on disk: a directory built once from a corpus (kbrl-index build) and opened
// read-only by retrievers.
//
//   manifest.json   format and version, the embedder's identity and spec, the corpus (path,
//                   SHA-256, mapping, filters, what loading kept and skipped), counts, the HNSW
//                   settings and the graph file's SHA-256, build times
//   graph.hnsw      the hnswlib graph over one vector per distinct reference program
//   entries.jsonl   one line per example in label order: id, name, backend, level, correct,
//                   speedup, reference hash and key, corpus line, its reference's label
//                   ("group") and where its sources are in sources.bin
//   sources.bin     the reference programs (each once) and kernels, concatenated
//   idf.bin         the built-in embedder's IDF table (builtin only; lexical_embedder.hpp)
//
// Examples that share a reference program (a corpus often holds several kernels for one
// problem) share one vector: each program is embedded once, and a search finds programs, then
// picks among their kernels.
//
// Building writes into "<output>.partial-<pid>" and renames it at the end: a failed or
// interrupted build never leaves a half-written index behind.

#include "runtime/retrieval/corpus.hpp"
#include "runtime/retrieval/embedder.hpp"
#include "runtime/retrieval/embedder_spec.hpp"
#include "runtime/retrieval/vector_index.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::retrieval {

/// The version of the directory layout this build writes and reads.
constexpr int32_t index_format_version = 1;

/// What manifest.json says.
struct index_manifest {
  int32_t version = index_format_version;
  embedder_identity embedder;
  std::string embedder_spec;      ///< as given to the build: "builtin", "http:URL", "model:PATH"
  /// model: tokens kept per text and whether the end token was appended when building; queries
  /// are cut and ended the same way. 0 / true for other kinds.
  int32_t model_max_tokens = 0;
  bool model_append_eos = true;
  std::string corpus_path;
  std::string corpus_sha256;
  std::string mapping;            ///< field_mapping::name
  corpus_filters filters;
  corpus_report report;           ///< malformed lines are kept as a count only (first 100)
  int64_t entries = 0;
  int64_t references = 0;         ///< distinct reference programs = vectors in the graph
  hnsw_options hnsw;
  std::string graph_sha256;
  double build_seconds = 0;
  int64_t created_unix_ms = 0;
};

/// One example as the index keeps it in memory; its sources stay on disk.
struct index_entry {
  std::string id;
  std::string name;
  kernel_backend backend = kernel_backend::cuda;
  int32_t level = 0;
  std::optional<bool> correct;
  double speedup = 0;
  std::string reference_hash;
  std::string reference_key;
  int64_t line = 0;
  uint32_t group = 0;             ///< label of its reference program's vector
  uint64_t reference_offset = 0;  ///< in sources.bin
  uint64_t reference_length = 0;
  uint64_t kernel_offset = 0;
  uint64_t kernel_length = 0;
};

/// Progress of a build, for bars and log lines.
struct build_progress {
  std::string phase;   ///< "reading", "weighing" (IDF), "embedding", "linking" (graph), "writing"
  size_t done = 0;
  size_t total = 0;    ///< 0 when unknown
};

/// What to build and how.
struct build_options {
  std::string corpus_path;
  field_mapping mapping = kernelbook_mapping();
  corpus_filters filters;
  std::string embedder_spec = "builtin";
  embedder_settings embedding;
  hnsw_options hnsw;
  std::string output_dir;
  bool overwrite = false;         ///< replace an existing, non-empty output directory
  int32_t embed_chunk = 256;      ///< texts per embedder call (progress granularity)
  int32_t threads = 0;            ///< built-in embedding and graph threads; 0: every core
  std::function<void(const build_progress&)> progress;
};

/// What a build did.
struct build_summary {
  std::string output_dir;
  corpus_report report;
  int64_t entries = 0;
  int64_t references = 0;
  embedder_identity embedder;
  double read_seconds = 0;
  double embed_seconds = 0;       ///< the IDF count included
  double graph_seconds = 0;
  double write_seconds = 0;
  double total_seconds = 0;
  uint64_t graph_bytes = 0;       ///< graph.hnsw
  uint64_t data_bytes = 0;        ///< everything else: entries, sources, IDF, manifest
};

/// Builds an index as `options` say. Fails with the corpus loader's and embedder's errors, and
/// with errc::invalid_argument when the output directory exists and is not empty (without
/// `overwrite`), errc::io_failure when a file cannot be written.
caf::expected<build_summary> build_index(const build_options& options);

/// An opened index. Movable; the methods are const and may be called from several threads.
class kernel_index {
public:
  /// Opens the directory `dir`: reads and checks the manifest (format, version, fields), the
  /// entries (count, offsets within sources.bin, labels within the graph) and the graph (its
  /// SHA-256 against the manifest, then its layout). `ef_search` > 0 overrides the manifest's.
  /// Fails with errc::invalid_argument naming the file and what is wrong, errc::io_failure
  /// when a file cannot be read.
  static caf::expected<kernel_index> open(const std::string& dir, int32_t ef_search = 0);

  kernel_index(kernel_index&&) noexcept;
  kernel_index& operator=(kernel_index&&) noexcept;
  ~kernel_index();

  const std::string& dir() const;
  const index_manifest& manifest() const;
  const std::vector<index_entry>& entries() const;
  /// Entries per label: groups()[label] lists the entries sharing that reference program.
  const std::vector<std::vector<uint32_t>>& groups() const;
  const vector_index& vectors() const;

  /// The reference program / kernel of an entry, read from sources.bin.
  caf::expected<std::string> reference_source(const index_entry& e) const;
  caf::expected<std::string> kernel_source(const index_entry& e) const;

  /// The embedder for queries against this index: `spec_override` ("" keeps the manifest's
  /// spec: the built-in one is rebuilt from idf.bin, an http or model embedder is reached where
  /// the build reached it) with `settings`. The identity must match the manifest's
  /// (check_compatible): a different embedder is refused with an error naming both.
  caf::expected<std::unique_ptr<embedder>>
  query_embedder(const std::string& spec_override = "", embedder_settings settings = {}) const;

  /// Bytes on disk: the graph, and everything else.
  uint64_t graph_bytes() const;
  uint64_t data_bytes() const;

private:
  struct impl;
  explicit kernel_index(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// Reads manifest.json of `dir` alone (for tools that only describe an index).
caf::expected<index_manifest> read_index_manifest(const std::string& dir);

} // namespace kbrl::retrieval
