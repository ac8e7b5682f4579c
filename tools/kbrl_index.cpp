// kbrl-index: build and query retrieval indexes of example kernels (RA-ICL).
//
//   kbrl-index build --corpus F.jsonl [--mapping kernelbook|sakana|FILE.toml]
//                    [--embedder builtin|http:URL|model:PATH] --output DIR
//   kbrl-index query DIR --problem PATH|LEVEL/ID [-k 3] [--backend cuda|any]
//   kbrl-index info DIR
//
// build shows a progress bar on a terminal (log lines otherwise) and ends with a summary:
// entries, skipped lines and why, dimension, build time, sizes on disk.

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/model_embedder.hpp"
#include "runtime/retrieval/retriever.hpp"
#include "runtime/retrieval/source_keys.hpp"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace kbrl;
using namespace kbrl::retrieval;

namespace {

int fail(const std::string& what, const caf::error& err) {
  std::fprintf(stderr, "kbrl-index: %s: %s\n", what.c_str(), describe(err).c_str());
  return 1;
}

std::string megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

/// Progress on stderr: a bar redrawn at most ten times a second on a terminal, else a line per
/// phase and per tenth of it.
class progress_display {
public:
  explicit progress_display(bool quiet) : quiet_(quiet), bar_(::isatty(STDERR_FILENO) == 1) {}
  ~progress_display() { finish(); }

  void operator()(const build_progress& p) {
    if (quiet_)
      return;
    const auto now = clock::now();
    if (p.phase != phase_) {
      finish();
      phase_ = p.phase;
      phase_start_ = now;
      last_tenth_ = -1;
      last_draw_ = {};
      if (!bar_)
        std::fprintf(stderr, "kbrl-index: %s%s\n", p.phase.c_str(),
                     p.total ? (" " + std::to_string(p.total) + " items").c_str() : "");
    }
    if (p.total == 0)
      return;
    const double share = static_cast<double>(p.done) / static_cast<double>(p.total);
    const double seconds = std::chrono::duration<double>(now - phase_start_).count();
    const double rate = seconds > 0 ? static_cast<double>(p.done) / seconds : 0;
    if (bar_) {
      if (now - last_draw_ < std::chrono::milliseconds(100) && p.done < p.total)
        return;
      last_draw_ = now;
      const int width = 30;
      const int filled = static_cast<int>(share * width);
      std::string bar(static_cast<size_t>(filled), '=');
      bar.resize(width, ' ');
      std::fprintf(stderr, "\r%-10s [%s] %3d%%  %zu/%zu  %.0f/s   ", p.phase.c_str(), bar.c_str(),
                   static_cast<int>(share * 100), p.done, p.total, rate);
      drawn_ = true;
    } else {
      const int tenth = static_cast<int>(share * 10);
      if (tenth > last_tenth_ && tenth > 0) {
        last_tenth_ = tenth;
        std::fprintf(stderr, "kbrl-index: %s %zu/%zu (%d%%, %.0f/s)\n", p.phase.c_str(), p.done,
                     p.total, static_cast<int>(share * 100), rate);
      }
    }
  }

  void finish() {
    if (drawn_)
      std::fprintf(stderr, "\n");
    drawn_ = false;
  }

private:
  using clock = std::chrono::steady_clock;
  bool quiet_;
  bool bar_;
  bool drawn_ = false;
  std::string phase_;
  clock::time_point phase_start_{};
  clock::time_point last_draw_{};
  int last_tenth_ = -1;
};

struct build_args {
  std::string corpus, mapping = "kernelbook", embedder = "builtin", output;
  std::vector<std::string> backends;
  std::vector<int> levels;
  bool include_incorrect = false, force = false, quiet = false;
  double min_speedup = 0;
  int dimension = lexical_embedder::default_dimension;
  std::string embed_model, device = "cpu", dtype = "fp32", pooling = "last";
  int batch_size = 0, max_tokens = 1024, threads = 0, m = 16, ef_construction = 200,
      ef_search = 64;
};

int build(const build_args& a) {
  build_options o;
  auto mapping = resolve_field_mapping(a.mapping);
  if (!mapping)
    return fail("--mapping", mapping.error());
  o.mapping = *mapping;
  o.corpus_path = a.corpus;
  o.output_dir = a.output;
  o.overwrite = a.force;
  o.embedder_spec = a.embedder;
  for (auto& b : a.backends) {
    auto parsed = parse_backend(b);
    if (!parsed)
      return fail("--backend", make_error(errc::invalid_argument,
                                          "expected one of " + join(backend_names()) + ", got "
                                            + b));
    o.filters.backends.push_back(*parsed);
  }
  o.filters.require_correct = !a.include_incorrect;
  o.filters.min_speedup = a.min_speedup;
  o.filters.levels.assign(a.levels.begin(), a.levels.end());
  o.embedding.builtin_dimension = a.dimension;
  o.embedding.http.model = a.embed_model;
  o.embedding.model.device = a.device;
  o.embedding.model.dtype = a.dtype;
  o.embedding.model.pooling = a.pooling;
  o.embedding.model.max_tokens = a.max_tokens;
  if (a.batch_size > 0) {
    o.embedding.http.batch_size = a.batch_size;
    o.embedding.model.batch_size = a.batch_size;
  }
  o.threads = a.threads;
  o.hnsw.m = a.m;
  o.hnsw.ef_construction = a.ef_construction;
  o.hnsw.ef_search = a.ef_search;
  progress_display display(a.quiet);
  o.progress = [&](const build_progress& p) { display(p); };
  auto s = build_index(o);
  display.finish();
  if (!s)
    return fail("build", s.error());
  const auto& r = s->report;
  for (size_t i = 0; i < r.malformed.size() && i < 10; ++i)
    std::fprintf(stderr, "kbrl-index: %s:%lld: skipped: %s\n", a.corpus.c_str(),
                 static_cast<long long>(r.malformed[i].line), r.malformed[i].reason.c_str());
  if (r.malformed.size() > 10)
    std::fprintf(stderr, "kbrl-index: ... and %zu more malformed lines\n",
                 r.malformed.size() - 10);
  std::printf("index       %s\n", s->output_dir.c_str());
  std::printf("corpus      %s (mapping %s)\n", a.corpus.c_str(), o.mapping.name.c_str());
  std::printf("entries     %lld (%s)\n", static_cast<long long>(s->entries), r.summary().c_str());
  std::printf("skipped     %lld\n", static_cast<long long>(r.skipped()));
  std::printf("programs    %lld distinct reference programs (one vector each)\n",
              static_cast<long long>(s->references));
  std::printf("embedder    %s\n", s->embedder.describe().c_str());
  std::printf("dimension   %d\n", s->embedder.dimension);
  std::printf("build time  %s s (read %s, embed %s, graph %s, write %s)\n",
              fixed(s->total_seconds, 2).c_str(), fixed(s->read_seconds, 2).c_str(),
              fixed(s->embed_seconds, 2).c_str(), fixed(s->graph_seconds, 2).c_str(),
              fixed(s->write_seconds, 2).c_str());
  std::printf("size        graph %s, entries and sources %s\n", megabytes(s->graph_bytes).c_str(),
              megabytes(s->data_bytes).c_str());
  return 0;
}

struct query_args {
  std::string dir, problem, backend = "any", embedder;
  int k = 3;
  bool json = false, show_source = false, no_guard = false;
};

int query(const query_args& a) {
  std::string reference;
  std::string hash;
  auto p = eval::find_problem(a.problem);
  if (p) {
    reference = p->reference_source;
    hash = p->source_hash;
  } else {
    std::ifstream in(a.problem, std::ios::binary);
    if (!in)
      return fail("--problem", p.error());
    std::stringstream ss;
    ss << in.rdbuf();
    reference = ss.str(); // any Python file will do as a query
  }
  retriever_options o;
  o.index_dir = a.dir;
  o.embedder_spec = a.embedder;
  auto r = retriever::open(o);
  if (!r)
    return fail(a.dir, r.error());
  retrieval_query q;
  q.reference_source = reference;
  q.source_hash = hash;
  q.k = a.k;
  q.leakage_guard = !a.no_guard;
  if (a.backend != "any") {
    q.backend = parse_backend(a.backend);
    if (!q.backend)
      return fail("--backend", make_error(errc::invalid_argument,
                                          "expected any or one of " + join(backend_names())));
  }
  const auto start = std::chrono::steady_clock::now();
  auto hits = (*r)->search(q);
  const double ms =
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!hits)
    return fail("query", hits.error());
  const auto& entries = (*r)->index().entries();
  if (a.json) {
    json_writer w;
    w.begin_array();
    for (const auto& h : *hits) {
      const auto& e = entries[h.entry];
      w.begin_object();
      w.field("rank", static_cast<int64_t>(&h - hits->data()) + 1);
      w.field("score", static_cast<double>(h.score));
      w.field("id", e.id);
      w.field("name", e.name);
      w.field("backend", to_string(e.backend));
      w.field("level", e.level);
      w.field("speedup", e.speedup);
      if (a.show_source) {
        auto x = (*r)->example(h);
        if (!x)
          return fail("query", x.error());
        w.field("reference_source", x->reference_source);
        w.field("kernel_source", x->kernel_source);
      }
      w.end_object();
    }
    w.end_array();
    std::printf("%s\n", w.str().c_str());
    return 0;
  }
  std::printf("query: %s (%s), %zu of %d neighbours in %.2f ms\n", a.problem.c_str(),
              a.backend == "any" ? "any backend" : a.backend.c_str(), hits->size(), a.k, ms);
  for (size_t i = 0; i < hits->size(); ++i) {
    const auto& h = (*hits)[i];
    const auto& e = entries[h.entry];
    std::printf("%2zu  %.4f  %-40s %-8s level %d  %s\n", i + 1, h.score, e.id.c_str(),
                to_string(e.backend), e.level,
                e.speedup > 0 ? ("speedup " + fixed(e.speedup, 2) + "x").c_str() : "");
    if (!e.name.empty())
      std::printf("    %s\n", e.name.c_str());
    if (a.show_source) {
      auto x = (*r)->example(h);
      if (!x)
        return fail("query", x.error());
      std::printf("---- reference\n%s\n---- kernel\n%s\n----\n", x->reference_source.c_str(),
                  x->kernel_source.c_str());
    }
  }
  if (hits->empty())
    std::printf("no example found (backend filter, or only the problem itself is indexed)\n");
  return 0;
}

int info(const std::string& dir) {
  auto m = read_index_manifest(dir);
  if (!m)
    return fail(dir, m.error());
  std::printf("index       %s (format version %d)\n", dir.c_str(), m->version);
  std::printf("corpus      %s\n            sha256 %s, mapping %s\n", m->corpus_path.c_str(),
              m->corpus_sha256.c_str(), m->mapping.c_str());
  std::printf("entries     %lld (%s)\n", static_cast<long long>(m->entries),
              m->report.summary().c_str());
  std::printf("programs    %lld\n", static_cast<long long>(m->references));
  std::printf("embedder    %s (spec %s)\n", m->embedder.describe().c_str(),
              m->embedder_spec.c_str());
  std::printf("hnsw        M %d, ef_construction %d, ef_search %d\n", m->hnsw.m,
              m->hnsw.ef_construction, m->hnsw.ef_search);
  std::printf("build time  %s s\n", fixed(m->build_seconds, 2).c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  kbrl::retrieval::install_model_embedder(); // --embedder model:PATH
  CLI::App app{"kbrl-index: build and query retrieval indexes of example kernels"};
  app.require_subcommand(1);

  build_args b;
  auto* bc = app.add_subcommand("build", "Build an index from a JSONL corpus");
  bc->add_option("--corpus", b.corpus, "JSONL file, one example per line")->required();
  bc->add_option("--mapping", b.mapping, "kernelbook, sakana, or a TOML mapping file")
    ->capture_default_str();
  bc->add_option("--embedder", b.embedder, "builtin, http:URL or model:PATH")
    ->capture_default_str();
  bc->add_option("--output", b.output, "Index directory to create")->required();
  bc->add_flag("--force", b.force, "Replace a non-empty output directory");
  bc->add_option("--backend", b.backends, "Keep only these backends (repeatable)");
  bc->add_flag("--include-incorrect", b.include_incorrect, "Keep rows labelled incorrect");
  bc->add_option("--min-speedup", b.min_speedup, "Keep rows with at least this speedup")
    ->capture_default_str();
  bc->add_option("--level", b.levels, "Keep only these KernelBench levels (repeatable)");
  bc->add_option("--dimension", b.dimension, "builtin: buckets of the embedding")
    ->capture_default_str();
  bc->add_option("--embed-model", b.embed_model, "http: the model field of requests");
  bc->add_option("--batch-size", b.batch_size, "http/model: texts per request or pass");
  bc->add_option("--device", b.device, "model: cpu, cuda, cuda:N")->capture_default_str();
  bc->add_option("--dtype", b.dtype, "model: fp32 or bf16")->capture_default_str();
  bc->add_option("--pooling", b.pooling, "model: last or mean")->capture_default_str();
  bc->add_option("--max-tokens", b.max_tokens, "model: tokens kept per text")
    ->capture_default_str();
  bc->add_option("--threads", b.threads, "builtin embedding and graph threads; 0: all cores")
    ->capture_default_str();
  bc->add_option("--m", b.m, "HNSW links per node")->capture_default_str();
  bc->add_option("--ef-construction", b.ef_construction, "HNSW build candidates")
    ->capture_default_str();
  bc->add_option("--ef-search", b.ef_search, "HNSW search candidates (stored)")
    ->capture_default_str();
  bc->add_flag("--quiet", b.quiet, "No progress output");

  query_args q;
  auto* qc = app.add_subcommand("query", "Nearest examples of a problem");
  qc->add_option("dir", q.dir, "Index directory")->required();
  qc->add_option("--problem", q.problem, "Problem file or LEVEL/ID ($KERNELBENCH_ROOT)")
    ->required();
  qc->add_option("-k", q.k, "Neighbours to show")->capture_default_str();
  qc->add_option("--backend", q.backend, "Only kernels of this backend, or any")
    ->capture_default_str();
  qc->add_option("--embedder", q.embedder, "Reach the index's embedder elsewhere");
  qc->add_flag("--json", q.json, "One JSON array");
  qc->add_flag("--show-source", q.show_source, "Print the reference and kernel sources");
  qc->add_flag("--no-leakage-guard", q.no_guard, "Also return the problem itself");

  std::string info_dir;
  auto* ic = app.add_subcommand("info", "What an index holds and how it was built");
  ic->add_option("dir", info_dir, "Index directory")->required();

  kbrl::config::add_version_flag(app, "kbrl-index");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;
  try {
    if (*bc)
      return build(b);
    if (*qc)
      return query(q);
    return info(info_dir);
  } catch (const std::exception& e) { // libtorch (model embedder) and friends
    std::fprintf(stderr, "kbrl-index: %s\n", e.what());
    return 1;
  }
}
