// Over 800 lines: the index directory's whole life (build, manifest, load, verify, update).
#include "runtime/retrieval/index_store.hpp"
#include "runtime/io/elapsed.hpp"

#include "messages/errors.hpp"
#include "runtime/io/hash.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "messages/error_codes.hpp"
#include "runtime/retrieval/source_keys.hpp"

#include <simdjson.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace kbrl::retrieval {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using simdjson::dom::element;

constexpr const char* manifest_file = "manifest.json";
constexpr const char* graph_file = "graph.hnsw";
constexpr const char* entries_file = "entries.jsonl";
constexpr const char* sources_file = "sources.bin";
constexpr const char* idf_file = "idf.bin";
constexpr const char* format_name = "kbrl-retrieval-index";

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

uint64_t file_bytes(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

caf::expected<void> write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    return make_error(errc::io_failure,
                      path.string() + ": cannot write: " + std::strerror(errno));
  return {};
}

// -- manifest.json --------------------------------------------------------------------------------

std::string render_manifest(const index_manifest& m) {
  json_writer w;
  w.begin_object();
  w.field("format", format_name);
  w.field("version", m.version);
  w.key("embedder").begin_object();
  w.field("kind", m.embedder.kind);
  w.field("model", m.embedder.model);
  w.field("pooling", m.embedder.pooling);
  w.field("dimension", m.embedder.dimension);
  w.field("spec", m.embedder_spec);
  w.field("max_tokens", m.model_max_tokens);
  w.field("append_eos", m.model_append_eos);
  w.end_object();
  w.key("corpus").begin_object();
  w.field("path", m.corpus_path);
  w.field("sha256", m.corpus_sha256);
  w.field("mapping", m.mapping);
  w.end_object();
  w.key("filters").begin_object();
  w.key("backends").begin_array();
  for (auto b : m.filters.backends)
    w.value(to_string(b));
  w.end_array();
  w.field("require_correct", m.filters.require_correct);
  w.field("min_speedup", m.filters.min_speedup);
  w.key("levels").begin_array();
  for (auto l : m.filters.levels)
    w.value(l);
  w.end_array();
  w.end_object();
  const auto& r = m.report;
  w.key("loading").begin_object();
  w.field("lines", r.lines);
  w.field("kept", r.kept);
  w.field("malformed_count", static_cast<int64_t>(r.malformed.size()));
  w.key("malformed").begin_array();
  for (size_t i = 0; i < r.malformed.size() && i < 100; ++i) {
    w.begin_object();
    w.field("line", r.malformed[i].line);
    w.field("reason", r.malformed[i].reason);
    w.end_object();
  }
  w.end_array();
  w.field("dropped_backend", r.dropped_backend);
  w.field("dropped_incorrect", r.dropped_incorrect);
  w.field("dropped_speedup", r.dropped_speedup);
  w.field("dropped_level", r.dropped_level);
  w.field("duplicates", r.duplicates);
  w.end_object();
  w.field("entries", m.entries);
  w.field("references", m.references);
  w.key("hnsw").begin_object();
  w.field("file", graph_file);
  w.field("sha256", m.graph_sha256);
  w.field("m", m.hnsw.m);
  w.field("ef_construction", m.hnsw.ef_construction);
  w.field("ef_search", m.hnsw.ef_search);
  w.field("seed", m.hnsw.seed);
  w.end_object();
  w.field("build_seconds", m.build_seconds);
  w.field("created_unix_ms", m.created_unix_ms);
  w.end_object();
  return w.str() + "\n";
}

/// Reads fields of manifest.json, naming the file and dotted key in every error.
class manifest_reader {
public:
  explicit manifest_reader(std::string file) : file_(std::move(file)) {}

  caf::error fail(const std::string& key, const std::string& what) const {
    return make_error(errc::invalid_argument, file_ + ": " + key + ": " + what);
  }

  caf::expected<element> object(element parent, const char* key, const std::string& path) {
    element e;
    if (parent[key].get(e) || e.type() != simdjson::dom::element_type::OBJECT)
      return fail(path, "expected an object");
    return e;
  }
  caf::expected<std::string> text(element parent, const char* key, const std::string& path) {
    std::string_view s;
    if (parent[key].get(s))
      return fail(path, "expected a string");
    return std::string{s};
  }
  caf::expected<int64_t> integer(element parent, const char* key, const std::string& path) {
    int64_t x = 0;
    if (parent[key].get(x))
      return fail(path, "expected an integer");
    return x;
  }
  caf::expected<double> real(element parent, const char* key, const std::string& path) {
    double x = 0;
    if (parent[key].get(x))
      return fail(path, "expected a number");
    return x;
  }
  caf::expected<bool> boolean(element parent, const char* key, const std::string& path) {
    bool x = false;
    if (parent[key].get(x))
      return fail(path, "expected true or false");
    return x;
  }

private:
  std::string file_;
};

#define KBRL_TRY(var, expr)                                                                       \
  auto var##_result = (expr);                                                                     \
  if (!var##_result)                                                                              \
    return std::move(var##_result.error());                                                       \
  auto var = std::move(*var##_result)

caf::expected<index_manifest> parse_manifest(const std::string& text, const std::string& file) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(text).get(doc))
    return make_error(errc::invalid_argument,
                      file + ": not JSON (" + simdjson::error_message(err) + ")");
  manifest_reader r(file);
  index_manifest m;
  KBRL_TRY(format, r.text(doc, "format", "format"));
  if (format != format_name)
    return r.fail("format", "expected \"" + std::string{format_name} + "\", got \"" + format
                              + "\": not a kbrl retrieval index");
  KBRL_TRY(version, r.integer(doc, "version", "version"));
  if (version != index_format_version)
    return r.fail("version", "this kbrl reads version " + std::to_string(index_format_version)
                               + ", the index is version " + std::to_string(version)
                               + ": rebuild it with this kbrl-index");
  m.version = static_cast<int32_t>(version);
  KBRL_TRY(emb, r.object(doc, "embedder", "embedder"));
  KBRL_TRY(kind, r.text(emb, "kind", "embedder.kind"));
  KBRL_TRY(model, r.text(emb, "model", "embedder.model"));
  KBRL_TRY(pooling, r.text(emb, "pooling", "embedder.pooling"));
  KBRL_TRY(dimension, r.integer(emb, "dimension", "embedder.dimension"));
  KBRL_TRY(spec, r.text(emb, "spec", "embedder.spec"));
  if (dimension < 1 || dimension > (1 << 20))
    return r.fail("embedder.dimension", "expected 1..1048576, got " + std::to_string(dimension));
  m.embedder = {kind, model, pooling, static_cast<int32_t>(dimension)};
  m.embedder_spec = spec;
  KBRL_TRY(max_tokens, r.integer(emb, "max_tokens", "embedder.max_tokens"));
  KBRL_TRY(append_eos, r.boolean(emb, "append_eos", "embedder.append_eos"));
  m.model_max_tokens = static_cast<int32_t>(max_tokens);
  m.model_append_eos = append_eos;
  KBRL_TRY(corpus, r.object(doc, "corpus", "corpus"));
  KBRL_TRY(corpus_path, r.text(corpus, "path", "corpus.path"));
  KBRL_TRY(corpus_sha, r.text(corpus, "sha256", "corpus.sha256"));
  KBRL_TRY(mapping, r.text(corpus, "mapping", "corpus.mapping"));
  m.corpus_path = corpus_path;
  m.corpus_sha256 = corpus_sha;
  m.mapping = mapping;
  KBRL_TRY(filters, r.object(doc, "filters", "filters"));
  simdjson::dom::array backends, levels;
  if (filters["backends"].get(backends))
    return r.fail("filters.backends", "expected an array of backend names");
  for (element b : backends) {
    std::string_view name;
    std::optional<kernel_backend> parsed;
    if (!b.get(name))
      parsed = parse_backend(name);
    if (!parsed)
      return r.fail("filters.backends", "expected backend names from " + join(backend_names()));
    m.filters.backends.push_back(*parsed);
  }
  KBRL_TRY(require_correct, r.boolean(filters, "require_correct", "filters.require_correct"));
  KBRL_TRY(min_speedup, r.real(filters, "min_speedup", "filters.min_speedup"));
  m.filters.require_correct = require_correct;
  m.filters.min_speedup = min_speedup;
  if (filters["levels"].get(levels))
    return r.fail("filters.levels", "expected an array of integers");
  for (element l : levels) {
    int64_t x = 0;
    if (l.get(x))
      return r.fail("filters.levels", "expected an array of integers");
    m.filters.levels.push_back(static_cast<int32_t>(x));
  }
  KBRL_TRY(loading, r.object(doc, "loading", "loading"));
  KBRL_TRY(lines, r.integer(loading, "lines", "loading.lines"));
  KBRL_TRY(kept, r.integer(loading, "kept", "loading.kept"));
  KBRL_TRY(malformed_count, r.integer(loading, "malformed_count", "loading.malformed_count"));
  m.report.lines = lines;
  m.report.kept = kept;
  simdjson::dom::array malformed;
  if (!loading["malformed"].get(malformed))
    for (element x : malformed) {
      int64_t line = 0;
      std::string_view reason;
      if (!x["line"].get(line) && !x["reason"].get(reason))
        m.report.malformed.push_back({line, std::string{reason}});
    }
  // Lines beyond the first 100 are known by their count only.
  while (static_cast<int64_t>(m.report.malformed.size()) < malformed_count)
    m.report.malformed.push_back({0, "(not recorded)"});
  for (auto [key, field] : {std::pair{"dropped_backend", &m.report.dropped_backend},
                            std::pair{"dropped_incorrect", &m.report.dropped_incorrect},
                            std::pair{"dropped_speedup", &m.report.dropped_speedup},
                            std::pair{"dropped_level", &m.report.dropped_level},
                            std::pair{"duplicates", &m.report.duplicates}}) {
    KBRL_TRY(n, r.integer(loading, key, std::string{"loading."} + key));
    *field = n;
  }
  KBRL_TRY(entries, r.integer(doc, "entries", "entries"));
  KBRL_TRY(references, r.integer(doc, "references", "references"));
  if (entries < 1 || references < 1 || references > entries)
    return r.fail("references", "expected 1 <= references <= entries, got "
                                  + std::to_string(references) + " references for "
                                  + std::to_string(entries) + " entries");
  m.entries = entries;
  m.references = references;
  KBRL_TRY(hnsw, r.object(doc, "hnsw", "hnsw"));
  KBRL_TRY(graph_sha, r.text(hnsw, "sha256", "hnsw.sha256"));
  KBRL_TRY(hm, r.integer(hnsw, "m", "hnsw.m"));
  KBRL_TRY(efc, r.integer(hnsw, "ef_construction", "hnsw.ef_construction"));
  KBRL_TRY(efs, r.integer(hnsw, "ef_search", "hnsw.ef_search"));
  m.graph_sha256 = graph_sha;
  m.hnsw.m = static_cast<int32_t>(hm);
  m.hnsw.ef_construction = static_cast<int32_t>(efc);
  m.hnsw.ef_search = static_cast<int32_t>(std::max<int64_t>(efs, 1));
  KBRL_TRY(build_seconds, r.real(doc, "build_seconds", "build_seconds"));
  KBRL_TRY(created, r.integer(doc, "created_unix_ms", "created_unix_ms"));
  m.build_seconds = build_seconds;
  m.created_unix_ms = created;
  return m;
}

// -- entries.jsonl --------------------------------------------------------------------------------

std::string render_entry(const index_entry& e) {
  json_writer w;
  w.begin_object();
  w.field("id", e.id);
  w.field("name", e.name);
  w.field("backend", to_string(e.backend));
  w.field("level", e.level);
  w.key("correct");
  if (e.correct)
    w.value(*e.correct);
  else
    w.null();
  w.field("speedup", e.speedup);
  w.field("reference_hash", e.reference_hash);
  w.field("reference_key", e.reference_key);
  w.field("line", e.line);
  w.field("group", static_cast<uint64_t>(e.group));
  w.key("reference").begin_array().value(e.reference_offset).value(e.reference_length).end_array();
  w.key("kernel").begin_array().value(e.kernel_offset).value(e.kernel_length).end_array();
  w.end_object();
  return w.str();
}

caf::expected<index_entry> parse_entry(element row, const std::string& where) {
  auto fail = [&](const std::string& what) {
    return make_error(errc::invalid_argument, where + ": " + what);
  };
  index_entry e;
  std::string_view s;
  if (row["id"].get(s))
    return fail("id: expected a string");
  e.id = std::string{s};
  if (row["name"].get(s))
    return fail("name: expected a string");
  e.name = std::string{s};
  if (row["backend"].get(s) || !parse_backend(s))
    return fail("backend: expected one of " + join(backend_names()));
  e.backend = *parse_backend(s);
  int64_t level = 0;
  if (row["level"].get(level))
    return fail("level: expected an integer");
  e.level = static_cast<int32_t>(level);
  element correct;
  if (row["correct"].get(correct))
    return fail("correct: missing");
  if (correct.is_bool())
    e.correct = correct.get_bool().value_unsafe();
  else if (!correct.is_null())
    return fail("correct: expected true, false or null");
  if (row["speedup"].get(e.speedup))
    return fail("speedup: expected a number");
  if (row["reference_hash"].get(s))
    return fail("reference_hash: expected a string");
  e.reference_hash = std::string{s};
  if (row["reference_key"].get(s))
    return fail("reference_key: expected a string");
  e.reference_key = std::string{s};
  if (row["line"].get(e.line))
    return fail("line: expected an integer");
  uint64_t group = 0;
  if (row["group"].get(group) || group > UINT32_MAX)
    return fail("group: expected a label");
  e.group = static_cast<uint32_t>(group);
  for (auto [key, offset, length] :
       {std::tuple{"reference", &e.reference_offset, &e.reference_length},
        std::tuple{"kernel", &e.kernel_offset, &e.kernel_length}}) {
    simdjson::dom::array span;
    if (row[key].get(span) || span.size() != 2 || span.at(0).get(*offset)
        || span.at(1).get(*length))
      return fail(std::string{key} + ": expected [offset, length]");
  }
  return e;
}

// -- building -------------------------------------------------------------------------------------

/// Embeds `texts` in chunks, reporting progress; the built-in embedder runs on several threads.
caf::expected<std::vector<float>> embed_all(embedder& emb, const std::vector<std::string>& texts,
                                            const build_options& opts) {
  const size_t total = texts.size();
  auto report = [&](size_t done) {
    if (opts.progress)
      opts.progress({"embedding", done, total});
  };
  report(0);
  if (auto* lexical = dynamic_cast<lexical_embedder*>(&emb)) {
    const size_t dim = static_cast<size_t>(lexical->dimension());
    std::vector<float> rows(total * dim);
    int threads = opts.threads > 0 ? opts.threads
                                   : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min<int>(threads, static_cast<int>(total / 64) + 1));
    std::atomic<size_t> next{0}, done{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        for (size_t i = next++; i < total; i = next++) {
          lexical->embed_one(texts[i], rows.data() + i * dim);
          ++done;
        }
      });
    while (opts.progress && done < total) {
      report(done);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& w : workers)
      w.join();
    report(total);
    return rows;
  }
  std::vector<float> rows;
  const size_t chunk = static_cast<size_t>(std::max(opts.embed_chunk, 1));
  for (size_t from = 0; from < total; from += chunk) {
    const size_t to = std::min(total, from + chunk);
    std::vector<std::string> part(texts.begin() + static_cast<std::ptrdiff_t>(from),
                                  texts.begin() + static_cast<std::ptrdiff_t>(to));
    auto got = emb.embed(part);
    if (!got)
      return reworded(got.error(), "embedding reference programs " + std::to_string(from) + ".."
                                     + std::to_string(to - 1) + ": ");
    rows.insert(rows.end(), got->begin(), got->end());
    report(to);
  }
  return rows;
}

caf::expected<void> check_output(const fs::path& out, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(out, ec))
    return {};
  if (!fs::is_directory(out, ec))
    return make_error(errc::invalid_argument,
                      "output " + out.string() + " exists and is not a directory");
  if (fs::is_empty(out, ec) || overwrite)
    return {};
  return make_error(errc::invalid_argument,
                    "output " + out.string()
                      + " exists and is not empty; pick another directory or pass --force to "
                        "replace it");
}

} // namespace

caf::expected<build_summary> build_index(const build_options& opts) {
  const auto start = clock_type::now();
  const fs::path out = opts.output_dir;
  if (opts.output_dir.empty())
    return make_error(errc::invalid_argument, "no output directory given");
  if (auto ok = check_output(out, opts.overwrite); !ok)
    return std::move(ok.error());
  auto spec = parse_embedder_spec(opts.embedder_spec);
  if (!spec)
    return std::move(spec.error());

  build_summary summary;
  summary.output_dir = out.string();
  if (opts.progress)
    opts.progress({"reading", 0, 0});
  auto loaded = load_corpus(opts.corpus_path, opts.mapping, opts.filters);
  if (!loaded)
    return std::move(loaded.error());
  auto& entries = loaded->entries;
  summary.report = loaded->report;
  summary.read_seconds = seconds_since(start);

  // One vector per distinct reference program (by reference_key).
  std::unordered_map<std::string, uint32_t> group_of;
  std::vector<std::string> references;
  std::vector<uint32_t> entry_group(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [it, fresh] = group_of.emplace(entries[i].reference_key,
                                        static_cast<uint32_t>(references.size()));
    if (fresh)
      references.push_back(entries[i].reference_source);
    entry_group[i] = it->second;
  }

  const auto embed_start = clock_type::now();
  idf_table idf;
  if (spec->kind == "builtin") {
    if (opts.progress)
      opts.progress({"weighing", 0, references.size()});
    idf = idf_table::count(references, opts.threads);
  }
  auto emb = make_embedder(*spec, opts.embedding, idf);
  if (!emb)
    return std::move(emb.error());
  auto rows = embed_all(**emb, references, opts);
  if (!rows)
    return std::move(rows.error());
  summary.embedder = (*emb)->identity();
  const int32_t dim = summary.embedder.dimension;
  if (dim <= 0 || rows->size() != references.size() * static_cast<size_t>(dim))
    return make_error(errc::internal, "the embedder returned " + std::to_string(rows->size())
                                        + " floats for " + std::to_string(references.size())
                                        + " texts of dimension " + std::to_string(dim));
  summary.embed_seconds = seconds_since(embed_start);

  const auto graph_start = clock_type::now();
  auto hnsw = opts.hnsw;
  hnsw.threads = opts.threads;
  auto graph = vector_index::build(*rows, dim, hnsw, [&](size_t done) {
    if (opts.progress)
      opts.progress({"linking", done, references.size()});
  });
  if (!graph)
    return std::move(graph.error());
  summary.graph_seconds = seconds_since(graph_start);

  const auto write_start = clock_type::now();
  if (opts.progress)
    opts.progress({"writing", 0, entries.size()});
  std::error_code ec;
  const fs::path partial = out.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && ec)
    return make_error(errc::io_failure, partial.string() + ": cannot create: " + ec.message());
  auto cleanup_on_failure = [&](caf::error err) {
    std::error_code ignored;
    fs::remove_all(partial, ignored);
    return err;
  };
  if (auto ok = graph->save((partial / graph_file).string()); !ok)
    return cleanup_on_failure(ok.error());
  if (spec->kind == "builtin")
    if (auto ok = idf.save((partial / idf_file).string(), dim); !ok)
      return cleanup_on_failure(ok.error());
  {
    std::ofstream sources(partial / sources_file, std::ios::binary | std::ios::trunc);
    std::ofstream lines(partial / entries_file, std::ios::binary | std::ios::trunc);
    uint64_t offset = 0;
    std::vector<std::pair<uint64_t, uint64_t>> reference_span(references.size(), {0, 0});
    std::vector<bool> written(references.size(), false);
    auto put = [&](const std::string& text) {
      sources.write(text.data(), static_cast<std::streamsize>(text.size()));
      std::pair<uint64_t, uint64_t> span{offset, text.size()};
      offset += text.size();
      return span;
    };
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& c = entries[i];
      const uint32_t g = entry_group[i];
      if (!written[g]) {
        reference_span[g] = put(references[g]);
        written[g] = true;
      }
      index_entry e;
      e.id = c.id;
      e.name = c.name;
      e.backend = c.backend;
      e.level = c.level;
      e.correct = c.correct;
      e.speedup = c.speedup;
      e.reference_hash = c.reference_hash;
      e.reference_key = c.reference_key;
      e.line = c.line;
      e.group = g;
      std::tie(e.reference_offset, e.reference_length) = reference_span[g];
      std::tie(e.kernel_offset, e.kernel_length) = put(c.kernel_source);
      const auto line = render_entry(e);
      lines.write(line.data(), static_cast<std::streamsize>(line.size()));
      lines.put('\n');
    }
    sources.close();
    lines.close();
    if (!sources || !lines)
      return cleanup_on_failure(make_error(errc::io_failure, partial.string()
                                                               + ": cannot write the entries: "
                                                               + std::strerror(errno)));
  }
  auto graph_sha = io::sha256_file((partial / graph_file).string());
  if (!graph_sha)
    return cleanup_on_failure(graph_sha.error());
  index_manifest m;
  m.embedder = summary.embedder;
  m.embedder_spec = to_string(*spec);
  if (spec->kind == "model") {
    m.model_max_tokens = opts.embedding.model.max_tokens;
    m.model_append_eos = opts.embedding.model.append_eos;
  }
  m.corpus_path = fs::absolute(opts.corpus_path, ec).string();
  m.corpus_sha256 = loaded->sha256;
  m.mapping = opts.mapping.name;
  m.filters = opts.filters;
  m.report = summary.report;
  m.entries = static_cast<int64_t>(entries.size());
  m.references = static_cast<int64_t>(references.size());
  m.hnsw = opts.hnsw;
  m.graph_sha256 = *graph_sha;
  m.build_seconds = seconds_since(start);
  m.created_unix_ms = now_unix_ms();
  if (auto ok = write_file(partial / manifest_file, render_manifest(m)); !ok)
    return cleanup_on_failure(ok.error());
  if (fs::exists(out, ec)) {
    fs::remove_all(out, ec);
    if (ec)
      return cleanup_on_failure(make_error(errc::io_failure, "cannot replace " + out.string()
                                                               + ": " + ec.message()));
  }
  fs::rename(partial, out, ec);
  if (ec)
    return cleanup_on_failure(make_error(errc::io_failure, "cannot move the index to "
                                                             + out.string() + ": "
                                                             + ec.message()));
  summary.write_seconds = seconds_since(write_start);
  summary.entries = m.entries;
  summary.references = m.references;
  summary.graph_bytes = file_bytes(out / graph_file);
  for (const char* f : {manifest_file, entries_file, sources_file, idf_file})
    summary.data_bytes += file_bytes(out / f);
  summary.total_seconds = seconds_since(start);
  return summary;
}

// -- opening --------------------------------------------------------------------------------------

struct kernel_index::impl {
  std::string dir;
  index_manifest manifest;
  std::vector<index_entry> entries;
  std::vector<std::vector<uint32_t>> groups;
  std::optional<vector_index> vectors;
  int sources_fd = -1;
  uint64_t sources_size = 0;

  ~impl() {
    if (sources_fd >= 0)
      ::close(sources_fd);
  }
};

caf::expected<index_manifest> read_index_manifest(const std::string& dir) {
  const auto path = (fs::path(dir) / manifest_file).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(errc::invalid_argument, "index " + dir + " is not a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::invalid_argument,
                      "index " + dir + " has no " + manifest_file
                        + " (is it a directory made by kbrl-index build?)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), path);
}

kernel_index::kernel_index(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
kernel_index::kernel_index(kernel_index&&) noexcept = default;
kernel_index& kernel_index::operator=(kernel_index&&) noexcept = default;
kernel_index::~kernel_index() = default;

caf::expected<kernel_index> kernel_index::open(const std::string& dir, int32_t ef_search) {
  auto manifest = read_index_manifest(dir);
  if (!manifest)
    return std::move(manifest.error());
  auto p = std::make_unique<impl>();
  p->dir = dir;
  p->manifest = std::move(*manifest);
  const auto& m = p->manifest;
  const fs::path root = dir;

  const auto sources_path = (root / sources_file).string();
  p->sources_fd = ::open(sources_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (p->sources_fd < 0)
    return make_error(errc::io_failure, sources_path + ": cannot open: " + std::strerror(errno));
  p->sources_size = file_bytes(sources_path);

  const auto entries_path = (root / entries_file).string();
  std::ifstream in(entries_path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, entries_path + ": cannot open: " + std::strerror(errno));
  simdjson::dom::parser parser;
  std::string line;
  int64_t line_number = 0;
  p->groups.resize(static_cast<size_t>(m.references));
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty())
      continue;
    const std::string where = entries_path + ":" + std::to_string(line_number);
    element row;
    if (auto err = parser.parse(line).get(row))
      return make_error(errc::invalid_argument,
                        where + ": not JSON (" + simdjson::error_message(err) + ")");
    auto e = parse_entry(row, where);
    if (!e)
      return std::move(e.error());
    if (e->group >= static_cast<uint64_t>(m.references))
      return make_error(errc::invalid_argument,
                        where + ": group " + std::to_string(e->group) + " is not below the "
                          + std::to_string(m.references) + " references of the manifest");
    for (auto [off, len] : {std::pair{e->reference_offset, e->reference_length},
                            std::pair{e->kernel_offset, e->kernel_length}})
      if (off > p->sources_size || len > p->sources_size - off)
        return make_error(errc::invalid_argument,
                          where + ": a source span [" + std::to_string(off) + ", +"
                            + std::to_string(len) + ") runs past the end of " + sources_file
                            + " (" + std::to_string(p->sources_size) + " bytes)");
    p->groups[e->group].push_back(static_cast<uint32_t>(p->entries.size()));
    p->entries.push_back(std::move(*e));
  }
  if (static_cast<int64_t>(p->entries.size()) != m.entries)
    return make_error(errc::invalid_argument,
                      entries_path + " holds " + std::to_string(p->entries.size())
                        + " entries, the manifest says " + std::to_string(m.entries));
  for (size_t g = 0; g < p->groups.size(); ++g)
    if (p->groups[g].empty())
      return make_error(errc::invalid_argument,
                        entries_path + ": no entry has reference label " + std::to_string(g));

  const auto graph_path = (root / graph_file).string();
  auto sha = io::sha256_file(graph_path);
  if (!sha)
    return std::move(sha.error());
  if (*sha != m.graph_sha256)
    return make_error(errc::invalid_argument,
                      graph_path + " was changed or damaged since the index was built (SHA-256 "
                        + *sha + ", the manifest says " + m.graph_sha256
                        + "); rebuild the index");
  auto vectors = vector_index::load(graph_path, m.embedder.dimension,
                                    static_cast<size_t>(m.references),
                                    ef_search > 0 ? ef_search : m.hnsw.ef_search);
  if (!vectors)
    return std::move(vectors.error());
  p->vectors.emplace(std::move(*vectors));
  return kernel_index(std::move(p));
}

const std::string& kernel_index::dir() const {
  return impl_->dir;
}
const index_manifest& kernel_index::manifest() const {
  return impl_->manifest;
}
const std::vector<index_entry>& kernel_index::entries() const {
  return impl_->entries;
}
const std::vector<std::vector<uint32_t>>& kernel_index::groups() const {
  return impl_->groups;
}
const vector_index& kernel_index::vectors() const {
  return *impl_->vectors;
}

namespace {

caf::expected<std::string> read_span(int fd, uint64_t offset, uint64_t length,
                                     const std::string& dir) {
  std::string out(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return make_error(errc::io_failure, dir + "/" + sources_file + ": cannot read "
                                            + std::to_string(length) + " bytes at "
                                            + std::to_string(offset)
                                            + (n < 0 ? std::string{": "} + std::strerror(errno)
                                                     : std::string{": the file is shorter"}));
    done += static_cast<uint64_t>(n);
  }
  return out;
}

} // namespace

caf::expected<std::string> kernel_index::reference_source(const index_entry& e) const {
  return read_span(impl_->sources_fd, e.reference_offset, e.reference_length, impl_->dir);
}

caf::expected<std::string> kernel_index::kernel_source(const index_entry& e) const {
  return read_span(impl_->sources_fd, e.kernel_offset, e.kernel_length, impl_->dir);
}

caf::expected<std::unique_ptr<embedder>>
kernel_index::query_embedder(const std::string& spec_override, embedder_settings settings) const {
  const auto& m = impl_->manifest;
  auto spec = parse_embedder_spec(spec_override.empty() ? m.embedder_spec : spec_override);
  if (!spec)
    return std::move(spec.error());
  idf_table idf;
  if (spec->kind == "builtin" && m.embedder.kind == "builtin") {
    const auto path = (fs::path(impl_->dir) / idf_file).string();
    auto loaded = idf_table::load(path);
    if (!loaded)
      return std::move(loaded.error());
    if (loaded->second != m.embedder.dimension)
      return make_error(errc::invalid_argument,
                        path + " records dimension " + std::to_string(loaded->second)
                          + ", the manifest " + std::to_string(m.embedder.dimension));
    idf = std::move(loaded->first);
    settings.builtin_dimension = loaded->second;
  } else if (spec->kind == "http" && m.embedder.kind == "http") {
    // Ask for the model the index was built with; an index built without a model name is
    // known by its URL, which then cannot move.
    if (settings.http.model.empty() && m.embedder.model.rfind("http", 0) != 0)
      settings.http.model = m.embedder.model;
    settings.http.dimension = m.embedder.dimension;
  } else if (spec->kind == "model" && m.embedder.kind == "model") {
    settings.model.pooling = m.embedder.pooling;
    if (m.model_max_tokens > 0)
      settings.model.max_tokens = m.model_max_tokens;
    settings.model.append_eos = m.model_append_eos;
  }
  auto emb = make_embedder(*spec, std::move(settings), std::move(idf));
  if (!emb)
    return std::move(emb.error());
  if (auto ok = check_compatible(m.embedder, (*emb)->identity(), impl_->dir); !ok)
    return std::move(ok.error());
  return emb;
}

uint64_t kernel_index::graph_bytes() const {
  return file_bytes(fs::path(impl_->dir) / graph_file);
}

uint64_t kernel_index::data_bytes() const {
  uint64_t n = 0;
  for (const char* f : {manifest_file, entries_file, sources_file, idf_file})
    n += file_bytes(fs::path(impl_->dir) / f);
  return n;
}

} // namespace kbrl::retrieval
