// Embeddings from kbrl's own transformer: a tiny random Qwen2 checkpoint with a byte tokenizer
// (test/model_fixture.hpp), on the CPU. What is checked: the shape and unit length of the
// vectors, that they are the pooled final hidden states (recomputed here from
// transformer::forward), that the pooling choice matters, that a batch gives what one-by-one
// gives, and an index built and queried through the model. The same code runs on a GPU with
// device "cuda"; that path is not exercised here (no GPU on the test machine).

#include "model_fixture.hpp"
#include "runtime/model/attention.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/retrieval/model_embedder.hpp"
#include "runtime/retrieval/retriever.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>
#include <boost/test/unit_test.hpp>

#include <cmath>

using namespace kbrl;
using namespace kbrl::retrieval;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/retrieval";

struct tiny_model {
  temp_dir dir;
  std::string path = dir / "tiny-qwen2";
  model::model_config config = model::tiny_model_config("qwen2");

  tiny_model() {
    install_model_embedder(); // as kbrl-index and kbrl-node do at start
    auto ok = model::write_random_checkpoint(path, config, 11);
    BOOST_REQUIRE_MESSAGE(ok, why(ok));
    dir.write("tiny-qwen2/tokenizer.json", test::byte_tokenizer_json());
  }

  std::unique_ptr<model_embedder> load(const std::string& pooling = "last", int batch = 8) const {
    model_embedder_options o;
    o.path = path;
    o.pooling = pooling;
    o.batch_size = batch;
    o.max_tokens = 64;
    auto e = model_embedder::load(o);
    BOOST_REQUIRE_MESSAGE(e, why(e));
    return std::move(*e);
  }
};

const std::vector<std::string> samples = {
  "import torch\nreturn torch.relu(x)\n", "conv3d", "x @ y",
  "a much longer program text that spans more tokens than the others do, to pad the batch",
  "", "def forward(self, x):\n    return self.conv(x)\n"};

double row_dot(const std::vector<float>& v, size_t a, size_t b, size_t d) {
  double s = 0;
  for (size_t j = 0; j < d; ++j)
    s += static_cast<double>(v[a * d + j]) * v[b * d + j];
  return s;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(retrieval_model, tiny_model)

BOOST_AUTO_TEST_CASE(vectors_are_unit_length_pooled_hidden_states) {
  auto e = load("last");
  const auto id = e->identity();
  BOOST_CHECK_EQUAL(id.kind, "model");
  BOOST_CHECK_EQUAL(id.model, "tiny-qwen2");
  BOOST_CHECK_EQUAL(id.pooling, "last");
  BOOST_CHECK_EQUAL(id.dimension, 64); // hidden_size
  auto v = e->embed(samples);
  BOOST_REQUIRE_MESSAGE(v, why(v));
  BOOST_REQUIRE_EQUAL(v->size(), samples.size() * 64);
  for (size_t i = 0; i < samples.size(); ++i)
    BOOST_CHECK_CLOSE(row_dot(*v, i, i, 64), 1.0, /*tol %=*/1e-4);
  // The token ids: bytes, then the model's end-of-sequence token (2), cut to max_tokens.
  BOOST_CHECK((e->token_ids("ab") == std::vector<int32_t>{'a', 'b', 2}));
  BOOST_CHECK_EQUAL(e->token_ids(std::string(500, 'x')).size(), 64u);
  BOOST_CHECK_EQUAL(e->token_ids(std::string(500, 'x')).back(), 2);
  // The vector is the last token's final hidden state, recomputed here.
  auto m = model::transformer::load(path);
  BOOST_REQUIRE(m);
  const auto ids = e->token_ids(samples[0]);
  const int64_t n = static_cast<int64_t>(ids.size());
  auto tokens = at::empty({1, n}, at::kLong);
  for (int64_t j = 0; j < n; ++j)
    tokens[0][j] = ids[static_cast<size_t>(j)];
  auto positions = at::arange(n, at::kLong).unsqueeze(0);
  auto h = m->forward(tokens, positions, model::causal_mask(at::ones({1, n}, at::kBool)));
  auto last = h[0][n - 1];
  last = last / last.norm();
  for (int64_t j = 0; j < 64; ++j)
    BOOST_CHECK_SMALL(last[j].item<float>() - (*v)[static_cast<size_t>(j)], /*atol=*/1e-4f);
}

BOOST_AUTO_TEST_CASE(mean_pooling_gives_other_vectors) {
  auto last = load("last")->embed(samples);
  auto mean = load("mean")->embed(samples);
  BOOST_REQUIRE(last && mean);
  BOOST_CHECK_EQUAL(load("mean")->identity().describe(), "model tiny-qwen2 (mean pooling), dimension 64");
  // One token alone: the mean is the last token, so both agree...
  auto one_last = load("last")->embed({""});
  auto one_mean = load("mean")->embed({""});
  BOOST_REQUIRE(one_last && one_mean);
  for (size_t j = 0; j < 64; ++j)
    BOOST_CHECK_SMALL((*one_last)[j] - (*one_mean)[j], /*atol=*/1e-5f);
  // ... and for longer texts they differ.
  double diff = 0;
  for (size_t j = 0; j < 64; ++j)
    diff += std::fabs((*last)[3 * 64 + j] - (*mean)[3 * 64 + j]);
  BOOST_CHECK_GT(diff, 1e-2);
}

BOOST_AUTO_TEST_CASE(a_batch_embeds_as_one_by_one) {
  for (const char* pooling : {"last", "mean"}) {
    auto batched = load(pooling, 4)->embed(samples);
    BOOST_REQUIRE_MESSAGE(batched, why(batched));
    auto single = load(pooling, 1);
    for (size_t i = 0; i < samples.size(); ++i) {
      auto alone = single->embed({samples[i]});
      BOOST_REQUIRE(alone);
      for (size_t j = 0; j < 64; ++j)
        BOOST_CHECK_SMALL((*alone)[j] - (*batched)[i * 64 + j], /*atol=*/1e-5f);
    }
  }
}

BOOST_AUTO_TEST_CASE(cuda_embeds_as_the_cpu_does) {
  // Runs where libtorch has CUDA and a GPU is visible (the GPU machine); says so elsewhere.
  if (!at::hasCUDA()) {
    BOOST_TEST_MESSAGE("no CUDA device: cuda_embeds_as_the_cpu_does checks nothing here");
    return;
  }
  auto on_cpu = load("last", 4)->embed(samples);
  BOOST_REQUIRE(on_cpu);
  for (const char* dtype : {"fp32", "bf16"}) {
    model_embedder_options o;
    o.path = path;
    o.device = "cuda";
    o.dtype = dtype;
    o.batch_size = 4;
    o.max_tokens = 64;
    auto gpu = model_embedder::load(o);
    BOOST_REQUIRE_MESSAGE(gpu, why(gpu));
    auto on_gpu = (*gpu)->embed(samples);
    BOOST_REQUIRE_MESSAGE(on_gpu, why(on_gpu));
    // float32: the same up to kernel rounding; bfloat16: close (unit vectors, cosine > 0.99).
    for (size_t i = 0; i < samples.size(); ++i) {
      double cos = 0;
      for (size_t j = 0; j < 64; ++j)
        cos += static_cast<double>((*on_cpu)[i * 64 + j]) * (*on_gpu)[i * 64 + j];
      BOOST_CHECK_MESSAGE(cos > (std::string{dtype} == "fp32" ? 0.9999 : 0.99),
                          dtype << " text " << i << ": cosine with the CPU vector " << cos);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_options_and_paths_fail_clearly) {
  model_embedder_options o;
  o.path = path;
  o.pooling = "cls";
  o.device = "tpu";
  auto bad = model_embedder::load(o);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_MESSAGE(contains(describe(bad.error()), "pooling: expected last or mean, got \"cls\""),
                      describe(bad.error()));
  o.pooling = "last";
  auto dev = model_embedder::load(o);
  BOOST_REQUIRE(!dev);
  BOOST_CHECK_MESSAGE(contains(describe(dev.error()), "device: expected cpu, cuda or cuda:N"),
                      describe(dev.error()));
  o.device = "cpu";
  o.path = dir / "nowhere";
  auto missing = model_embedder::load(o);
  BOOST_REQUIRE(!missing);
  BOOST_CHECK_MESSAGE(contains(describe(missing.error()), "nowhere"), describe(missing.error()));
}

BOOST_AUTO_TEST_CASE(an_index_built_with_the_model_is_queried_with_it) {
  build_options b;
  b.corpus_path = data_dir + "/sakana_sample.jsonl";
  b.mapping = sakana_mapping();
  b.output_dir = dir / "index";
  b.embedder_spec = "model:" + path;
  b.embedding.model.pooling = "mean";
  b.embedding.model.max_tokens = 128;
  auto s = build_index(b);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  BOOST_CHECK_EQUAL(s->embedder.describe(), "model tiny-qwen2 (mean pooling), dimension 64");
  retriever_options o;
  o.index_dir = dir / "index";
  auto r = retriever::open(o);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_CHECK_EQUAL((*r)->query_embedder().identity().pooling, "mean"); // from the manifest
  // Queries are cut where the build cut (max_tokens from the manifest, not the default 1024).
  auto* as_model = dynamic_cast<model_embedder*>(&(*r)->query_embedder());
  BOOST_REQUIRE(as_model != nullptr);
  BOOST_CHECK_EQUAL(as_model->token_ids(std::string(1000, 'x')).size(), 128u);
  // The indexed ReLU program itself, with the guard off, comes back first with score ~1.
  auto index = kernel_index::open(dir / "index");
  BOOST_REQUIRE(index);
  auto relu = index->reference_source(index->entries()[0]);
  BOOST_REQUIRE(relu);
  retrieval_query q;
  q.reference_source = *relu;
  q.k = 2;
  q.leakage_guard = false;
  auto hits = (*r)->search(q);
  BOOST_REQUIRE_MESSAGE(hits, why(hits));
  BOOST_REQUIRE_EQUAL(hits->size(), 2u);
  BOOST_CHECK_EQUAL(index->entries()[(*hits)[0].entry].name, "19_ReLU");
  BOOST_CHECK_CLOSE((*hits)[0].score, 1.0f, /*tol %=*/1e-2);
  q.leakage_guard = true;
  auto guarded = (*r)->search(q);
  BOOST_REQUIRE(guarded);
  BOOST_REQUIRE_EQUAL(guarded->size(), 1u);
  BOOST_CHECK_EQUAL(index->entries()[(*guarded)[0].entry].name, "1_Square_matrix_multiplication_");
}

BOOST_AUTO_TEST_SUITE_END()
