// The built-in embedding, the HNSW index and the index directory: code features, IDF tables on
// disk, graph search against exact search, build / open / query through the library and through
// kbrl-index run as a process, and the refusals: another embedder, a damaged graph, an existing
// output directory.

#include "cluster_fixture.hpp"
#include "runtime/eval/problems.hpp"
#include "runtime/retrieval/code_features.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/lexical_embedder.hpp"
#include "runtime/retrieval/retriever.hpp"
#include "runtime/retrieval/vector_index.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

using namespace kbrl;
using namespace kbrl::retrieval;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::read_file_bytes;
using kbrl::test::contains;
namespace fs = std::filesystem;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/retrieval";
const std::string kernelbench = "/work/shared/kernelbench";
const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-index";

bool has_feature(const std::vector<code_feature>& fs, const std::string& text) {
  for (auto& f : fs)
    if (f.text == text)
      return true;
  return false;
}

float dot(const float* a, const float* b, int32_t n) {
  float s = 0;
  for (int32_t i = 0; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

/// Random unit vectors, `n` of dimension `d`.
std::vector<float> random_unit_rows(size_t n, int32_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> rows(n * static_cast<size_t>(d));
  for (auto& x : rows)
    x = normal(rng);
  normalize_rows(rows, d);
  return rows;
}

/// An index of the Sakana sample built into `dir`/index.
build_summary build_sample(const temp_dir& dir, const std::string& name = "index") {
  build_options o;
  o.corpus_path = data_dir + "/sakana_sample.jsonl";
  o.mapping = sakana_mapping();
  o.output_dir = dir / name;
  o.embedding.builtin_dimension = 256;
  auto s = build_index(o);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  return *s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(retrieval_index)

BOOST_AUTO_TEST_CASE(code_features_see_operators_through_module_attributes) {
  const std::string src = "import torch.nn.functional as F\n"
                          "class Model(nn.Module):\n"
                          "    def __init__(self):\n"
                          "        self.up = nn.ConvTranspose3d(4, 8, 3)\n"
                          "    def forward(self, x):\n"
                          "        x = self.up(x)  # upsample\n"
                          "        x = F.gelu(x) @ x\n"
                          "        return torch.softmax(x, dim=-1)\n"
                          "def get_inputs():\n"
                          "    return [torch.randn(batch_size, 4, 8, 8, 8)]\n";
  auto f = extract_code_features(src);
  for (const char* expected : {"call:convtranspose3d", "api:torch.nn.ConvTranspose3d",
                               "call:gelu", "api:torch.nn.functional.gelu", "call:matmul",
                               "seq:convtranspose3d>gelu", "seq:gelu>matmul",
                               "seq:matmul>softmax", "kw:dim", "kwv:dim=-1", "rank:5",
                               "word:upsample", "id:up", "num:2^3"})
    BOOST_CHECK_MESSAGE(has_feature(f, expected), "missing feature " << expected);
  BOOST_CHECK(!has_feature(f, "call:up")); // the attribute resolves to its module
  BOOST_CHECK(!has_feature(f, "id:self"));
}

BOOST_AUTO_TEST_CASE(lexical_vectors_are_unit_length_and_put_conv_near_conv) {
  std::vector<std::string> docs;
  for (auto name : {"level1/54_conv_standard_3D__square_input__square_kernel.py",
                    "level1/60_conv_standard_3D__square_input__asymmetric_kernel.py",
                    "level1/1_Square_matrix_multiplication_.py", "level1/19_ReLU.py",
                    "level1/23_Softmax.py"}) {
    auto p = eval::load_problem_file(kernelbench + "/" + name);
    BOOST_REQUIRE_MESSAGE(p, why(p));
    docs.push_back(p->reference_source);
  }
  lexical_embedder e(idf_table::count(docs), 512);
  auto v = e.embed(docs);
  BOOST_REQUIRE_MESSAGE(v, why(v));
  BOOST_REQUIRE_EQUAL(v->size(), docs.size() * 512);
  for (size_t i = 0; i < docs.size(); ++i)
    BOOST_CHECK_CLOSE(dot(v->data() + i * 512, v->data() + i * 512, 512), 1.0f,
                      /*tol %=*/1e-3);
  const float* conv_a = v->data();
  const float* conv_b = v->data() + 512;
  for (size_t other = 2; other < docs.size(); ++other)
    BOOST_CHECK_MESSAGE(dot(conv_a, conv_b, 512) > dot(conv_a, v->data() + other * 512, 512) + 0.2,
                        "conv-conv " << dot(conv_a, conv_b, 512) << " vs conv-" << other << " "
                                     << dot(conv_a, v->data() + other * 512, 512));
  // Deterministic, and identity names what it is.
  auto again = e.embed({docs[0]});
  BOOST_REQUIRE(again);
  BOOST_CHECK(std::equal(again->begin(), again->end(), v->begin()));
  BOOST_CHECK_EQUAL(e.identity().describe(), "builtin lexical-v1, dimension 512");
  std::vector<float> empty(512, 1.0f);
  e.embed_one("", empty.data());
  BOOST_CHECK(std::all_of(empty.begin(), empty.end(), [](float x) { return x == 0; }));
}

BOOST_AUTO_TEST_CASE(idf_tables_round_trip_and_refuse_damage) {
  temp_dir dir;
  auto t = idf_table::count({"x = torch.relu(a)", "y = torch.relu(b)", "z = torch.sigmoid(c)"});
  BOOST_CHECK_EQUAL(t.documents(), 3u);
  const uint64_t relu = feature_hash("call:relu"), sigmoid = feature_hash("call:sigmoid");
  BOOST_CHECK_GT(t.idf(sigmoid), t.idf(relu)); // rarer weighs more
  BOOST_CHECK_CLOSE(t.idf(relu), std::log(4.0 / 3.0) + 1.0, /*tol %=*/1e-4);
  const auto path = dir / "idf.bin";
  BOOST_REQUIRE(t.save(path, 64));
  auto back = idf_table::load(path);
  BOOST_REQUIRE_MESSAGE(back, why(back));
  BOOST_CHECK_EQUAL(back->second, 64);
  BOOST_CHECK_EQUAL(back->first.size(), t.size());
  BOOST_CHECK_EQUAL(back->first.idf(relu), t.idf(relu));

  auto bytes = read_file_bytes(path);
  std::ofstream(dir / "short.bin", std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  auto cut = idf_table::load(dir / "short.bin");
  BOOST_REQUIRE(!cut);
  BOOST_CHECK_MESSAGE(contains(describe(cut.error()), "short.bin: not a kbrl IDF table: the header says"),
                      describe(cut.error()));
  std::ofstream(dir / "magic.bin", std::ios::binary) << "JUNKJUNK" << bytes.substr(8);
  auto magic = idf_table::load(dir / "magic.bin");
  BOOST_REQUIRE(!magic);
  BOOST_CHECK_MESSAGE(contains(describe(magic.error()), "wrong magic"), describe(magic.error()));
}

BOOST_AUTO_TEST_CASE(hnsw_finds_what_exact_search_finds) {
  const int32_t d = 32;
  const size_t n = 3000;
  auto rows = random_unit_rows(n, d, 7);
  hnsw_options o;
  o.threads = 2;
  auto index = vector_index::build(rows, d, o);
  BOOST_REQUIRE_MESSAGE(index, why(index));
  BOOST_CHECK_EQUAL(index->size(), n);
  auto queries = random_unit_rows(200, d, 8);
  size_t found = 0;
  for (size_t q = 0; q < 200; ++q) {
    const float* v = queries.data() + q * d;
    auto approx = index->search(v, 10);
    auto exact = exact_search(rows, d, v, 10);
    BOOST_REQUIRE_EQUAL(approx.size(), 10u);
    BOOST_CHECK_CLOSE(exact[0].score, dot(v, rows.data() + exact[0].label * d, d), 1e-3);
    for (size_t i = 1; i < approx.size(); ++i)
      BOOST_CHECK_GE(approx[i - 1].score, approx[i].score);
    std::set<uint32_t> truth;
    for (auto& e : exact)
      truth.insert(e.label);
    for (auto& a : approx)
      found += truth.count(a.label);
  }
  const double recall = static_cast<double>(found) / 2000.0;
  BOOST_TEST_MESSAGE("recall@10 of hnsw vs exact on 3000 random 32-d vectors: " << recall);
  BOOST_CHECK_GE(recall, 0.95); // measured 0.99+ with M 16, ef 64
  // A stored vector is its own nearest neighbour.
  auto self = index->search(rows.data() + 123 * d, 1);
  BOOST_REQUIRE_EQUAL(self.size(), 1u);
  BOOST_CHECK_EQUAL(self[0].label, 123u);
  BOOST_CHECK_CLOSE(self[0].score, 1.0f, /*tol %=*/1e-3);
  auto copy = index->vector(123);
  BOOST_CHECK(std::equal(copy.begin(), copy.end(), rows.begin() + 123 * d));
}

BOOST_AUTO_TEST_CASE(hnsw_files_are_checked_before_hnswlib_reads_them) {
  temp_dir dir;
  const int32_t d = 16;
  auto rows = random_unit_rows(300, d, 3);
  auto index = vector_index::build(rows, d, {});
  BOOST_REQUIRE(index);
  const auto path = dir / "g.hnsw";
  BOOST_REQUIRE(index->save(path));
  auto back = vector_index::load(path, d, 300);
  BOOST_REQUIRE_MESSAGE(back, why(back));
  auto a = index->search(rows.data(), 5), b = back->search(rows.data(), 5);
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    BOOST_CHECK_EQUAL(a[i].label, b[i].label);

  auto wrong_dim = vector_index::load(path, 32, 300);
  BOOST_REQUIRE(!wrong_dim);
  BOOST_CHECK_MESSAGE(contains(describe(wrong_dim.error()),
                               "it holds vectors of dimension 16, expected 32"),
                      describe(wrong_dim.error()));
  auto wrong_count = vector_index::load(path, d, 299);
  BOOST_REQUIRE(!wrong_count);
  BOOST_CHECK_MESSAGE(contains(describe(wrong_count.error()), "the element count is 300, expected 299"),
                      describe(wrong_count.error()));
  const auto bytes = read_file_bytes(path);
  std::ofstream(dir / "cut.hnsw", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto cut = vector_index::load(dir / "cut.hnsw", d, 300);
  BOOST_REQUIRE(!cut);
  BOOST_CHECK_MESSAGE(contains(describe(cut.error()), "cut.hnsw: not the expected HNSW graph"),
                      describe(cut.error()));
  std::ofstream(dir / "long.hnsw", std::ios::binary) << bytes << "trailing";
  auto longer = vector_index::load(dir / "long.hnsw", d, 300);
  BOOST_REQUIRE(!longer);
  BOOST_CHECK_MESSAGE(contains(describe(longer.error()), "8 bytes follow the last link list"),
                      describe(longer.error()));
  std::ofstream(dir / "tiny.hnsw", std::ios::binary) << "abc";
  auto tiny = vector_index::load(dir / "tiny.hnsw", d, 300);
  BOOST_REQUIRE(!tiny);
  BOOST_CHECK_MESSAGE(contains(describe(tiny.error()), "the header is cut short"),
                      describe(tiny.error()));
}

BOOST_AUTO_TEST_CASE(an_index_is_built_opened_and_queried) {
  temp_dir dir;
  auto s = build_sample(dir);
  BOOST_CHECK_EQUAL(s.entries, 5);     // 6 rows, one incorrect
  BOOST_CHECK_EQUAL(s.references, 2);  // ReLU and matmul programs
  BOOST_CHECK_EQUAL(s.embedder.dimension, 256);
  BOOST_CHECK_GT(s.graph_bytes, 0u);
  BOOST_CHECK_GT(s.data_bytes, 0u);
  BOOST_CHECK_EQUAL(s.report.dropped_incorrect, 1);
  for (auto f : {"manifest.json", "graph.hnsw", "entries.jsonl", "sources.bin", "idf.bin"})
    BOOST_CHECK_MESSAGE(fs::exists(fs::path(dir / "index") / f), "missing " << f);
  BOOST_CHECK(!fs::exists(dir / ("index.partial-" + std::to_string(::getpid()))));

  auto index = kernel_index::open(dir / "index");
  BOOST_REQUIRE_MESSAGE(index, why(index));
  const auto& m = index->manifest();
  BOOST_CHECK_EQUAL(m.embedder_spec, "builtin");
  BOOST_CHECK_EQUAL(m.mapping, "sakana");
  BOOST_CHECK_EQUAL(m.corpus_sha256.size(), 64u);
  BOOST_CHECK_EQUAL(m.report.lines, 6);
  BOOST_CHECK_EQUAL(index->entries().size(), 5u);
  BOOST_CHECK_EQUAL(index->groups().size(), 2u);
  auto kernel = index->kernel_source(index->entries()[0]);
  BOOST_REQUIRE(kernel);
  BOOST_CHECK(contains(*kernel, "relu_vec"));

  retriever_options o;
  o.index_dir = dir / "index";
  auto r = retriever::open(o);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  // A ReLU-like query (not the indexed program: another activation, other names).
  problem p;
  p.reference_source = "import torch\nclass Model(nn.Module):\n    def forward(self, inp):\n"
                       "        return torch.relu(inp) * 2\n"
                       "def get_inputs():\n    return [torch.randn(8, 4096)]\n";
  p.backend = kernel_backend::cuda;
  auto found = (*r)->retrieve(p, 2);
  BOOST_REQUIRE_MESSAGE(found, why(found));
  BOOST_REQUIRE_EQUAL(found->size(), 2u);
  // The ReLU program first, with its best kernel (grid-stride, 1.31x), then matmul's best.
  BOOST_CHECK_EQUAL((*found)[0].id, "1/19/relu_grid_stride");
  BOOST_CHECK_CLOSE((*found)[0].speedup, 1.31, /*tol %=*/1e-9);
  BOOST_CHECK(contains((*found)[0].reference_source, "torch.relu(x)"));
  BOOST_CHECK(contains((*found)[0].kernel_source, "relu_gs"));
  BOOST_CHECK_EQUAL((*found)[1].id, "3/1/matmul_level3");
  BOOST_CHECK_GT((*found)[0].score, (*found)[1].score);
  p.backend = kernel_backend::triton;
  auto none = (*r)->retrieve(p, 3);
  BOOST_REQUIRE(none);
  BOOST_CHECK(none->empty()); // no Triton kernel in a CUDA corpus
  BOOST_CHECK_EQUAL((*r)->stats().queries, 2u);
  auto bad_k = (*r)->retrieve(p, 0);
  BOOST_REQUIRE(!bad_k);
  BOOST_CHECK_MESSAGE(contains(describe(bad_k.error()), "k must be at least 1"),
                      describe(bad_k.error()));
}

BOOST_AUTO_TEST_CASE(another_embedder_is_refused_with_both_named) {
  temp_dir dir;
  build_sample(dir);
  auto index = kernel_index::open(dir / "index");
  BOOST_REQUIRE(index);
  auto http = index->query_embedder("http:http://127.0.0.1:9");
  BOOST_REQUIRE(!http);
  const auto text = describe(http.error());
  BOOST_CHECK_MESSAGE(contains(text, "was built with the embedder builtin lexical-v1, dimension "
                                     "256; refusing to search it with http http://127.0.0.1:9"),
                      text);
  embedder_settings wider;
  wider.builtin_dimension = 1024; // ignored: the index's idf.bin says 256
  auto same = index->query_embedder("builtin", wider);
  BOOST_REQUIRE_MESSAGE(same, why(same));
  BOOST_CHECK_EQUAL((*same)->identity().dimension, 256);
  retriever_options o;
  o.index_dir = dir / "index";
  o.embedder_spec = "model:/nonexistent/model";
  auto r = retriever::open(o);
  BOOST_REQUIRE(!r);
  BOOST_CHECK_MESSAGE(contains(describe(r.error()), "/nonexistent/model"), describe(r.error()));
  auto bad_spec = parse_embedder_spec("openai");
  BOOST_REQUIRE(!bad_spec);
  BOOST_CHECK_MESSAGE(contains(describe(bad_spec.error()), "expected builtin, http:URL"),
                      describe(bad_spec.error()));
}

BOOST_AUTO_TEST_CASE(damaged_or_foreign_directories_are_refused) {
  temp_dir dir;
  build_sample(dir);
  const fs::path idx = dir / "index";
  // A changed graph byte: the SHA-256 no longer matches.
  {
    std::fstream g(idx / "graph.hnsw", std::ios::in | std::ios::out | std::ios::binary);
    g.seekp(200);
    g.put('\x7f');
  }
  auto damaged = kernel_index::open(idx.string());
  BOOST_REQUIRE(!damaged);
  BOOST_CHECK_MESSAGE(contains(describe(damaged.error()), "graph.hnsw was changed or damaged"),
                      describe(damaged.error()));
  // Entries pointing past sources.bin.
  build_sample(dir, "index2");
  const fs::path idx2 = dir / "index2";
  std::ofstream(idx2 / "sources.bin", std::ios::binary | std::ios::trunc) << "short";
  auto cut = kernel_index::open(idx2.string());
  BOOST_REQUIRE(!cut);
  BOOST_CHECK_MESSAGE(contains(describe(cut.error()), "runs past the end of sources.bin"),
                      describe(cut.error()));
  // Not an index at all.
  auto foreign = kernel_index::open(dir.path.string());
  BOOST_REQUIRE(!foreign);
  BOOST_CHECK_MESSAGE(contains(describe(foreign.error()), "has no manifest.json"),
                      describe(foreign.error()));
  fs::create_directories(dir / "m");
  std::ofstream(dir / "m/manifest.json") << R"({"format": "kbrl-retrieval-index", "version": 99})";
  auto future = kernel_index::open(dir / "m");
  BOOST_REQUIRE(!future);
  BOOST_CHECK_MESSAGE(contains(describe(future.error()), "reads version 1, the index is version 99"),
                      describe(future.error()));
}

BOOST_AUTO_TEST_CASE(an_existing_output_is_kept_unless_forced) {
  temp_dir dir;
  dir.write("out/keep.txt", "precious");
  build_options o;
  o.corpus_path = data_dir + "/kernelbook_sample.jsonl";
  o.mapping = kernelbook_mapping();
  o.output_dir = dir / "out";
  auto refused = build_index(o);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_MESSAGE(contains(describe(refused.error()), "exists and is not empty"),
                      describe(refused.error()));
  BOOST_CHECK(fs::exists(dir / "out/keep.txt"));
  o.overwrite = true;
  auto built = build_index(o);
  BOOST_REQUIRE_MESSAGE(built, why(built));
  BOOST_CHECK(!fs::exists(dir / "out/keep.txt"));
  BOOST_CHECK_EQUAL(built->entries, 3);
  BOOST_CHECK_EQUAL(built->report.malformed.size(), 3u);
  // A corpus that fails leaves no partial directory behind.
  o.output_dir = dir / "never";
  o.corpus_path = dir.write("bad.jsonl", "nope\n");
  BOOST_REQUIRE(!build_index(o));
  BOOST_CHECK(!fs::exists(dir / "never"));
}

BOOST_AUTO_TEST_CASE(kbrl_index_builds_queries_and_describes) {
  temp_dir dir;
  auto b = test::run_command({tool, "build", "--corpus", data_dir + "/kernelbook_sample.jsonl",
                              "--mapping", "kernelbook", "--output", dir / "idx", "--dimension",
                              "128"});
  BOOST_REQUIRE_MESSAGE(b.code == 0, b.output);
  for (const char* part : {"entries     3 (7 lines: 3 kept, 3 malformed (lines 6, 7, 8), 1 duplicate)",
                           "skipped     4", "embedder    builtin lexical-v1, dimension 128",
                           "dimension   128", "build time  ", "size        graph ",
                           "kernelbook_sample.jsonl:7: skipped: field 'triton_code' is missing",
                           "kbrl-index: embedding"})
    BOOST_CHECK_MESSAGE(contains(b.output, part), "\"" << part << "\" missing from:\n"
                                                       << b.output);
  // The query is a KernelBench problem file: ReLU is nearest to the ReLU module.
  auto q = test::run_command({tool, "query", dir / "idx", "--problem",
                              kernelbench + "/level1/19_ReLU.py", "-k", "2"});
  BOOST_REQUIRE_MESSAGE(q.code == 0, q.output);
  BOOST_CHECK_MESSAGE(contains(q.output, "2 of 2 neighbours"), q.output);
  const auto first = q.output.find("\n 1  ");
  BOOST_REQUIRE_MESSAGE(first != std::string::npos, q.output);
  BOOST_CHECK_MESSAGE(q.output.find("ReluNet", first) < q.output.find("\n 2  "), q.output);
  auto j = test::run_command({tool, "query", dir / "idx", "--problem",
                              kernelbench + "/level1/19_ReLU.py", "-k", "1", "--json",
                              "--backend", "triton"});
  BOOST_REQUIRE_MESSAGE(j.code == 0, j.output);
  BOOST_CHECK_MESSAGE(contains(j.output, "\"name\":\"ReluNet\"") && contains(j.output, "\"rank\":1"),
                      j.output);
  auto i = test::run_command({tool, "info", dir / "idx"});
  BOOST_REQUIRE_MESSAGE(i.code == 0, i.output);
  BOOST_CHECK_MESSAGE(contains(i.output, "mapping kernelbook") && contains(i.output, "programs    3"),
                      i.output);
  auto bad = test::run_command({tool, "build", "--corpus", dir / "missing.jsonl", "--output",
                                dir / "x"});
  BOOST_CHECK_NE(bad.code, 0);
  BOOST_CHECK_MESSAGE(contains(bad.output, "kbrl-index: build: io_failure: corpus ")
                        && contains(bad.output, "missing.jsonl: cannot open"),
                      bad.output);
  auto other = test::run_command({tool, "query", dir / "idx", "--problem",
                                  kernelbench + "/level1/19_ReLU.py", "--embedder",
                                  "http:http://127.0.0.1:9"});
  BOOST_CHECK_NE(other.code, 0);
  BOOST_CHECK_MESSAGE(contains(other.output, "refusing to search it with http"), other.output);
}

BOOST_AUTO_TEST_SUITE_END()
