// kbrl-bench-retrieval: build time, size and query speed of a retrieval index over a synthetic
// corpus, with its peer measured in the same run: exact brute-force cosine search over the very
// vectors the HNSW graph holds, as a user without an index would write it (one BLAS
// matrix-vector product through libtorch, then top-k). Prints hnswlib's recall against the exact
// search and the speed ratio. Both sides run one query at a time on one thread. See
// bench/retrieval/README.md.
//
//   kbrl-bench-retrieval [--entries 50000] [--queries 1000] [-k 10] [--dimension 1024]
//                        [--workdir DIR] [--threads 0] [--seed 1]

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/lexical_embedder.hpp"
#include "runtime/retrieval/retriever.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace kbrl;
using namespace kbrl::retrieval;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// -- a generator of KernelBench-like PyTorch programs -------------------------------------------

struct module_kind {
  const char* ctor;      ///< "nn.Conv2d"
  const char* args;      ///< constructor arguments after the channels
  int rank;              ///< input rank it expects
};

const module_kind modules[] = {
  {"nn.Conv1d", "kernel_size", 3},         {"nn.Conv2d", "kernel_size", 4},
  {"nn.Conv3d", "kernel_size", 5},         {"nn.ConvTranspose1d", "kernel_size", 3},
  {"nn.ConvTranspose2d", "kernel_size, stride=stride", 4},
  {"nn.ConvTranspose3d", "kernel_size, stride=stride, padding=padding", 5},
  {"nn.Linear", "", 2},                    {"nn.BatchNorm1d", "", 3},
  {"nn.BatchNorm2d", "", 4},               {"nn.BatchNorm3d", "", 5},
  {"nn.InstanceNorm2d", "", 4},            {"nn.GroupNorm", "num_groups", 4},
  {"nn.LayerNorm", "", 2},                 {"nn.MaxPool2d", "pool_size", 4},
  {"nn.AvgPool3d", "pool_size", 5},        {"nn.Embedding", "", 2},
};

const char* const elementwise[] = {
  "torch.relu(x)", "torch.sigmoid(x)", "torch.tanh(x)", "F.gelu(x)", "F.silu(x)",
  "F.leaky_relu(x, negative_slope=0.01)", "F.elu(x)", "F.selu(x)", "F.softplus(x)",
  "F.hardtanh(x, min_val=-1.0, max_val=1.0)", "F.hardswish(x)", "F.mish(x)",
  "torch.clamp(x, min=0.0, max=6.0)", "x * self.scale", "x + self.bias", "x - x.mean()",
  "torch.exp(x)", "torch.log1p(torch.abs(x))", "x / (1 + torch.abs(x))", "x * torch.sigmoid(x)"};

const char* const reductions[] = {
  "torch.softmax(x, dim=1)", "torch.log_softmax(x, dim=-1)", "x.mean(dim=1, keepdim=True)",
  "torch.sum(x, dim=2)", "torch.max(x, dim=1)[0]", "torch.logsumexp(x, dim=1)",
  "torch.cumsum(x, dim=1)", "torch.norm(x, p=2, dim=1, keepdim=True)", "torch.argmax(x, dim=1)",
  "torch.min(x, dim=-1)[0]", "torch.prod(x, dim=1)", "torch.var(x, dim=1)"};

const char* const words[] = {"alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "tmp",
                             "val",   "buf",  "acc",   "out",   "res",   "feat",  "hid",   "proj",
                             "lhs",   "rhs",  "step",  "scale", "shift", "mix",   "core",  "blk"};

class program_generator {
public:
  explicit program_generator(uint64_t seed) : rng_(seed) {}

  std::string next() {
    auto pick = [&](size_t n) { return static_cast<size_t>(rng_() % n); };
    const auto& m = modules[pick(std::size(modules))];
    const int ops = 1 + static_cast<int>(pick(5));
    std::string attr = std::string{words[pick(std::size(words))]} + "_"
                       + std::to_string(pick(100));
    std::ostringstream s;
    s << "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
      << "class Model(nn.Module):\n    \"\"\"\n    " << m.ctor + 3 << " followed by " << ops
      << " operations.\n    \"\"\"\n"
      << "    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, "
         "num_groups, pool_size):\n"
      << "        super(Model, self).__init__()\n"
      << "        self." << attr << " = " << m.ctor << "(in_channels, out_channels"
      << (m.args[0] ? ", " : "") << m.args << ")\n"
      << "        self.scale = " << (1 + pick(9)) << ".0\n"
      << "        self.bias = nn.Parameter(torch.randn(out_channels))\n\n"
      << "    def forward(self, x):\n"
      << "        x = self." << attr << "(x)\n";
    for (int i = 0; i < ops; ++i) {
      const bool reduce = pick(4) == 0;
      s << "        x = "
        << (reduce ? reductions[pick(std::size(reductions))]
                   : elementwise[pick(std::size(elementwise))])
        << "\n";
    }
    s << "        return x\n\n";
    const int batch = 1 << (3 + pick(5));
    s << "batch_size = " << batch << "\nin_channels = " << (1 << (2 + pick(5)))
      << "\nout_channels = " << (1 << (3 + pick(5))) << "\nkernel_size = " << (1 + 2 * pick(3))
      << "\nstride = " << (1 + pick(2)) << "\npadding = " << pick(2)
      << "\nnum_groups = " << (1 << pick(4)) << "\npool_size = 2\n";
    s << "\ndef get_inputs():\n    return [torch.randn(batch_size, in_channels";
    for (int d = 2; d < m.rank; ++d)
      s << ", " << (1 << (4 + pick(4)));
    s << ")]\n\ndef get_init_inputs():\n    return [in_channels, out_channels, kernel_size, "
         "stride, padding, num_groups, pool_size]\n";
    return s.str();
  }

  /// A CUDA-extension-like kernel text of about 1.5 KB.
  std::string kernel(size_t i) {
    std::ostringstream s;
    s << "#include <torch/extension.h>\n#include <cuda_runtime.h>\n\n"
      << "__global__ void fused_kernel_" << i
      << "(const float* __restrict__ x, float* __restrict__ y, int n) {\n"
      << "    int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
      << "    if (idx < n) {\n        float v = x[idx];\n";
    for (int k = 0; k < 20; ++k)
      s << "        v = v * " << (rng_() % 97) << ".0f + " << (rng_() % 13) << ".0f;\n";
    s << "        y[idx] = v;\n    }\n}\n\n"
      << "torch::Tensor forward(torch::Tensor x) {\n    auto y = torch::empty_like(x);\n"
      << "    int n = x.numel();\n    fused_kernel_" << i
      << "<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n"
      << "    return y;\n}\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
      << "    m.def(\"forward\", &forward, \"fused forward\");\n}\n";
    return s.str();
  }

private:
  std::mt19937_64 rng_;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-bench-retrieval: HNSW index against exact search on a synthetic corpus"};
  size_t entries = 50000, queries = 1000, k = 10;
  int dimension = lexical_embedder::default_dimension, threads = 0;
  uint64_t seed = 1;
  std::string workdir;
  app.add_option("--entries", entries, "Corpus size")->capture_default_str();
  app.add_option("--queries", queries, "Queries, drawn from the same generator")
    ->capture_default_str();
  app.add_option("-k", k, "Neighbours per query for recall")->capture_default_str();
  app.add_option("--dimension", dimension, "Built-in embedding dimension")->capture_default_str();
  app.add_option("--threads", threads, "Build threads; 0: all cores")->capture_default_str();
  app.add_option("--seed", seed, "Generator seed")->capture_default_str();
  app.add_option("--workdir", workdir, "Where the corpus and index go (default: a temp dir)");
  kbrl::config::add_version_flag(app, "kbrl-bench-retrieval");
  if (auto status = kbrl::config::parse_command_line(app, argc, argv, 2))
    return *status;

  const bool own_dir = workdir.empty();
  if (own_dir)
    workdir = (fs::temp_directory_path() / ("kbrl-bench-retrieval-" + std::to_string(::getpid())))
                .string();
  fs::create_directories(workdir);
  const auto corpus = (fs::path(workdir) / "corpus.jsonl").string();
  const auto index_dir = (fs::path(workdir) / "index").string();

  std::printf("machine: %s, %u hardware threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency());
  program_generator gen(seed);
  {
    auto t = clock_type::now();
    std::ofstream out(corpus, std::ios::binary | std::ios::trunc);
    for (size_t i = 0; i < entries; ++i) {
      auto program = gen.next();
      out << "{\"Op_Name\": \"synthetic_" << i << "\", \"Level_ID\": 2, \"Task_ID\": " << i
          << ", \"Kernel_Name\": \"k" << i << "\", \"Correct\": true, \"CUDA_Speedup_Native\": "
          << (0.5 + static_cast<double>(i % 300) / 100.0)
          << ", \"PyTorch_Code_Module\": " << json_string(program)
          << ", \"CUDA_Code\": " << json_string(gen.kernel(i)) << "}\n";
    }
    std::printf("corpus: %zu entries, %.1f MB, written in %.1f s\n", entries,
                static_cast<double>(fs::file_size(corpus)) / 1e6, seconds_since(t));
  }

  build_options b;
  b.corpus_path = corpus;
  b.mapping = sakana_mapping();
  b.output_dir = index_dir;
  b.overwrite = true;
  b.threads = threads;
  b.embedding.builtin_dimension = dimension;
  auto built = build_index(b);
  if (!built) {
    std::fprintf(stderr, "build failed: %s\n", describe(built.error()).c_str());
    return 1;
  }
  std::printf("build: %lld entries, %lld programs, dimension %d: %.2f s (read %.2f, embed %.2f, "
              "graph %.2f, write %.2f); graph %.1f MB, entries+sources %.1f MB\n",
              static_cast<long long>(built->entries), static_cast<long long>(built->references),
              built->embedder.dimension, built->total_seconds, built->read_seconds,
              built->embed_seconds, built->graph_seconds, built->write_seconds,
              static_cast<double>(built->graph_bytes) / 1e6,
              static_cast<double>(built->data_bytes) / 1e6);

  retriever_options o;
  o.index_dir = index_dir;
  auto t_open = clock_type::now();
  auto r = retriever::open(o);
  if (!r) {
    std::fprintf(stderr, "open failed: %s\n", describe(r.error()).c_str());
    return 1;
  }
  const double open_s = seconds_since(t_open);
  const auto& index = (*r)->index();
  const int32_t dim = index.manifest().embedder.dimension;
  const size_t count = index.vectors().size();
  // The peer searches the very vectors the graph holds.
  std::vector<float> rows;
  rows.reserve(count * static_cast<size_t>(dim));
  for (size_t i = 0; i < count; ++i) {
    auto v = index.vectors().vector(static_cast<uint32_t>(i));
    rows.insert(rows.end(), v.begin(), v.end());
  }
  // Queries: fresh programs from the same generator, embedded once up front.
  std::vector<std::string> texts;
  for (size_t i = 0; i < queries; ++i)
    texts.push_back(gen.next());
  auto query_vectors = (*r)->query_embedder().embed(texts);
  if (!query_vectors) {
    std::fprintf(stderr, "embedding failed: %s\n", describe(query_vectors.error()).c_str());
    return 1;
  }
  const float* qv = query_vectors->data();

  std::vector<std::vector<neighbor>> approx(queries), exact(queries);
  auto t = clock_type::now();
  for (size_t i = 0; i < queries; ++i)
    approx[i] = index.vectors().search(qv + i * static_cast<size_t>(dim), k);
  const double hnsw_s = seconds_since(t);
  // The peer: scores = X q (BLAS sgemv), then the k best.
  at::set_num_threads(1);
  const auto matrix = at::from_blob(rows.data(), {static_cast<int64_t>(count), dim}, at::kFloat);
  t = clock_type::now();
  for (size_t i = 0; i < queries; ++i) {
    auto q = at::from_blob(const_cast<float*>(qv) + i * static_cast<size_t>(dim), {dim},
                           at::kFloat);
    auto best = at::topk(at::mv(matrix, q), static_cast<int64_t>(k));
    auto scores = std::get<0>(best);
    auto labels = std::get<1>(best);
    for (int64_t j = 0; j < scores.size(0); ++j)
      exact[i].push_back({static_cast<uint32_t>(labels[j].item<int64_t>()),
                          scores[j].item<float>()});
  }
  const double exact_s = seconds_since(t);
  // The same ground truth from kbrl's own scalar exact search, as a check of the peer.
  size_t agree = 0;
  for (size_t i = 0; i < std::min<size_t>(queries, 20); ++i)
    agree += exact_search(rows, dim, qv + i * static_cast<size_t>(dim), 1)[0].label
             == exact[i][0].label;

  auto recall_at = [&](size_t n) {
    size_t found = 0, total = 0;
    for (size_t i = 0; i < queries; ++i) {
      std::set<uint32_t> truth;
      for (size_t j = 0; j < std::min(n, exact[i].size()); ++j)
        truth.insert(exact[i][j].label);
      for (size_t j = 0; j < std::min(n, approx[i].size()); ++j)
        found += truth.count(approx[i][j].label);
      total += truth.size();
    }
    return total ? static_cast<double>(found) / static_cast<double>(total) : 0.0;
  };

  // End to end as the retriever actor runs it: embed, search, filter, read sources.
  t = clock_type::now();
  size_t returned = 0;
  for (size_t i = 0; i < queries; ++i) {
    problem p;
    p.reference_source = texts[i];
    p.backend = kernel_backend::cuda;
    auto found = (*r)->retrieve(p, 3);
    if (!found) {
      std::fprintf(stderr, "retrieve failed: %s\n", describe(found.error()).c_str());
      return 1;
    }
    returned += found->size();
  }
  const double e2e_s = seconds_since(t);

  const double hnsw_qps = static_cast<double>(queries) / hnsw_s;
  const double exact_qps = static_cast<double>(queries) / exact_s;
  std::printf("\n%zu queries, k = %zu, one thread, %zu vectors of dimension %d "
              "(index opened in %.2f s)\n\n",
              queries, k, count, dim, open_s);
  std::printf("| search | queries/s | mean latency (ms) | recall@1 | recall@%zu |\n", k);
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::printf("| exact brute-force cosine, libtorch mv + topk (peer) | %.0f | %.3f | 1.000 | 1.000 |\n", exact_qps,
              1000.0 * exact_s / static_cast<double>(queries));
  std::printf("| kbrl hnswlib (M %d, ef %d) | %.0f | %.3f | %.3f | %.3f |\n",
              index.manifest().hnsw.m, index.manifest().hnsw.ef_search, hnsw_qps,
              1000.0 * hnsw_s / static_cast<double>(queries), recall_at(1), recall_at(k));
  std::printf("| ratio | **%.1fx** | | | |\n", hnsw_qps / exact_qps);
  std::printf("| kbrl retrieve() end to end (embed + search + sources, k = 3) | %.0f | %.3f | | "
              "|\n",
              static_cast<double>(queries) / e2e_s, 1000.0 * e2e_s / static_cast<double>(queries));
  std::printf("\n(%zu examples returned end to end; the peer's top-1 matches a scalar exact "
              "search on %zu of the first %zu queries)\n",
              returned, agree, std::min<size_t>(queries, 20));
  if (own_dir) {
    std::error_code ec;
    fs::remove_all(workdir, ec);
  }
  return 0;
}
