// The retriever actor: retrieve requests in, examples out, from a real index on disk; its status
// as kbrl-shell renders it; reload after a rebuild; a missing index kept as a failed state that
// answers every request with the reason.

#include "actors/retriever.hpp"
#include "messages/status_details.hpp"
#include "messages/type_ids.hpp"
#include "runtime/retrieval/index_store.hpp"
#include "runtime/shell/shell_session.hpp"
#include "test_support.hpp"

#include <caf/all.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>

using namespace kbrl;
using namespace std::chrono_literals;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/retrieval";

void build(const std::string& corpus, retrieval::field_mapping mapping, const std::string& out) {
  retrieval::build_options o;
  o.corpus_path = corpus;
  o.mapping = std::move(mapping);
  o.output_dir = out;
  o.overwrite = true;
  o.embedding.builtin_dimension = 128;
  auto s = retrieval::build_index(o);
  BOOST_REQUIRE_MESSAGE(s, why(s));
}

struct actor_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  temp_dir dir;

  actor_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  retriever_actor spawn(const std::string& index_dir, int32_t k = 3) {
    actor_stats stats;
    stats.name = "head/retriever";
    stats.role = "retriever";
    stats.node = "head";
    retrieval::retrieval_settings settings;
    settings.index_dir = index_dir;
    settings.k = k;
    return sys->spawn<caf::detached>(retriever, stats, settings,
                                     retrieval::retriever_options_from(settings));
  }
};

caf::expected<std::vector<retrieved_example>> ask(caf::scoped_actor& self,
                                                  const retriever_actor& r, const problem& p,
                                                  int32_t k) {
  caf::expected<std::vector<retrieved_example>> out{caf::error{}};
  self->request(r, 10s, retrieve_atom::value, p, k)
    .receive([&](std::vector<retrieved_example>& xs) { out = std::move(xs); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

actor_status status_of(caf::scoped_actor& self, const retriever_actor& r) {
  actor_status out;
  self->request(r, 10s, status_atom::value).receive([&](actor_status& st) { out = st; },
                                                    [&](caf::error&) {});
  return out;
}

std::string detail(const actor_status& st, const std::string& key) {
  return detail_of(st, key, "(no " + key + ")");
}

caf::expected<std::string> control(caf::scoped_actor& self, const retriever_actor& r,
                                   const std::string& verb) {
  caf::expected<std::string> out{caf::error{}};
  self->request(r, 10s, control_atom::value, verb, std::vector<std::string>{})
    .receive([&](std::string& s) { out = std::move(s); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

problem relu_problem() {
  problem p;
  p.id = "level1/19_ReLU";
  p.reference_source = "import torch\nclass Model(nn.Module):\n    def forward(self, x):\n"
                       "        return torch.relu(x)\n";
  p.backend = kernel_backend::cuda;
  return p;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(retrieval_actor, actor_fixture)

BOOST_AUTO_TEST_CASE(retrieve_answers_examples_and_status_shows_the_index) {
  build(data_dir + "/sakana_sample.jsonl", retrieval::sakana_mapping(), dir / "index");
  auto r = spawn(dir / "index");
  caf::scoped_actor self{*sys};
  auto xs = ask(self, r, relu_problem(), 0); // 0: the configured k (3)
  BOOST_REQUIRE_MESSAGE(xs, why(xs));
  BOOST_REQUIRE_EQUAL(xs->size(), 2u); // the corpus holds two programs
  BOOST_CHECK_EQUAL((*xs)[0].id, "1/19/relu_grid_stride");
  BOOST_CHECK(contains((*xs)[0].kernel_source, "relu_gs"));
  BOOST_CHECK((*xs)[0].backend == kernel_backend::cuda);

  auto too_many = ask(self, r, relu_problem(), 33);
  BOOST_REQUIRE(!too_many);
  BOOST_CHECK_MESSAGE(contains(describe(too_many.error()), "at most 32 examples"),
                      describe(too_many.error()));

  auto st = status_of(self, r);
  BOOST_CHECK_EQUAL(st.name, "head/retriever");
  BOOST_CHECK_EQUAL(st.state, "ready");
  BOOST_CHECK_EQUAL(detail(st, "index"), dir / "index");
  BOOST_CHECK_EQUAL(detail(st, "entries"), "5");
  BOOST_CHECK_EQUAL(detail(st, "embedder"), "builtin lexical-v1, dimension 128");
  BOOST_CHECK_EQUAL(detail(st, "queries"), "1");
  BOOST_CHECK_EQUAL(detail(st, "failures"), "1");
  BOOST_CHECK_NE(detail(st, "mean latency (ms)"), "-");
  BOOST_CHECK((st.commands == std::vector<std::string>{"reload"}));
  // What kbrl-shell shows for `status head/retriever`.
  const auto shown = render_status(st, st.since_unix_ms + 1000);
  for (const char* part : {"head/retriever", "ready", "entries", "queries", "mean latency (ms)"})
    BOOST_CHECK_MESSAGE(contains(shown, part), "\"" << part << "\" missing from:\n" << shown);
  self->send_exit(r, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(reload_picks_up_a_rebuilt_index) {
  build(data_dir + "/sakana_sample.jsonl", retrieval::sakana_mapping(), dir / "index");
  auto r = spawn(dir / "index");
  caf::scoped_actor self{*sys};
  build(data_dir + "/kernelbook_sample.jsonl", retrieval::kernelbook_mapping(), dir / "index");
  auto answer = control(self, r, "reload");
  BOOST_REQUIRE_MESSAGE(answer, why(answer));
  BOOST_CHECK_EQUAL(*answer, "reloaded " + (dir / "index") + " on head/retriever: 3 examples");
  BOOST_CHECK_EQUAL(detail(status_of(self, r), "entries"), "3");
  auto p = relu_problem();
  p.backend = kernel_backend::triton;
  auto xs = ask(self, r, p, 1);
  BOOST_REQUIRE_MESSAGE(xs, why(xs));
  BOOST_REQUIRE_EQUAL(xs->size(), 1u);
  BOOST_CHECK((*xs)[0].backend == kernel_backend::triton);
  auto unknown = control(self, r, "restart");
  BOOST_REQUIRE(!unknown);
  BOOST_CHECK_MESSAGE(contains(describe(unknown.error()), "not_supported"),
                      describe(unknown.error()));
  self->send_exit(r, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_missing_index_is_a_failed_state_not_a_crash) {
  auto r = spawn(dir / "nowhere");
  caf::scoped_actor self{*sys};
  auto xs = ask(self, r, relu_problem(), 3);
  BOOST_REQUIRE(!xs);
  BOOST_CHECK_MESSAGE(contains(describe(xs.error()), "nowhere"), describe(xs.error()));
  auto st = status_of(self, r);
  BOOST_CHECK_EQUAL(st.state, "failed");
  BOOST_CHECK_MESSAGE(contains(detail(st, "error"), "is not a directory"), detail(st, "error"));
  BOOST_CHECK_MESSAGE(contains(st.last_error, "nowhere"), st.last_error);
  // Built later, a reload brings it up.
  build(data_dir + "/sakana_sample.jsonl", retrieval::sakana_mapping(), dir / "nowhere");
  auto answer = control(self, r, "reload");
  BOOST_REQUIRE_MESSAGE(answer, why(answer));
  BOOST_CHECK_EQUAL(status_of(self, r).state, "ready");
  BOOST_CHECK(ask(self, r, relu_problem(), 1));
  self->send_exit(r, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
