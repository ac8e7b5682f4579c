// What committed rounds leave in a run directory (runtime/episode/step_ledger.hpp), over an
// in-memory file store that fails on demand: traces before the checkpoint, one write per round,
// a failed write named and retried, a broken checkpoint refused. Then the disk store once.

#include "runtime/episode/step_ledger.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

using namespace kbrl;
using namespace kbrl::episode;
using kbrl::test::contains;
using kbrl::test::lines_of;

namespace {

/// Files in memory; `fail_next` makes the next write of that file fail; `writes` lists every
/// write in order ("append traces.jsonl", "replace coordinator.json").
class memory_store final : public io::file_store {
public:
  std::map<std::string, std::string> files;
  std::set<std::string> fail_next;
  std::vector<std::string> writes;

  caf::expected<std::optional<std::string>> read(const std::string& name) override {
    auto it = files.find(name);
    if (it == files.end())
      return std::optional<std::string>{};
    return std::optional<std::string>{it->second};
  }
  caf::expected<void> replace(const std::string& name, std::string_view text) override {
    if (fail_next.erase(name))
      return make_error(errc::io_failure, "could not write " + path_of(name) + ": disk full");
    writes.push_back("replace " + name);
    files[name] = std::string(text);
    return {};
  }
  caf::expected<void> append(const std::string& name, std::string_view text) override {
    if (fail_next.erase(name))
      return make_error(errc::io_failure, "could not write " + path_of(name) + ": disk full");
    writes.push_back("append " + name);
    files[name] += std::string(text);
    return {};
  }
  uint64_t size(const std::string& name) override {
    auto it = files.find(name);
    return it == files.end() ? 0 : it->second.size();
  }
  caf::expected<void> rename(const std::string& from, const std::string& to) override {
    files[to] = files[from];
    files.erase(from);
    writes.push_back("rename " + from + " " + to);
    return {};
  }
  std::string path_of(const std::string& name) const override { return "/run/" + name; }
};

step_round round_of(uint64_t step, size_t n) {
  step_round r;
  r.key = step;
  r.step = step;
  for (size_t k = n; k >= 1; --k) { // out of order: written sorted
    trajectory t;
    t.id = step * trajectory_id_stride + k;
    t.problem_id = "level1/p" + std::to_string(k);
    t.turns.push_back(turn{});
    r.collected.push_back(t);
  }
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(step_ledger)

BOOST_AUTO_TEST_CASE(a_fresh_run_has_no_checkpoint_and_a_round_is_one_write_in_id_order) {
  auto files = std::make_shared<memory_store>();
  episode::step_ledger ledger(files, 1 << 20);
  auto opened = ledger.open();
  BOOST_REQUIRE(opened);
  BOOST_CHECK(!*opened);
  BOOST_REQUIRE(ledger.record_round(round_of(1, 3)));
  BOOST_REQUIRE(ledger.record_checkpoint({1, 2, 1}));
  BOOST_REQUIRE_EQUAL(files->writes.size(), 2u);
  BOOST_CHECK_EQUAL(files->writes[0], "append traces.jsonl");
  BOOST_CHECK_EQUAL(files->writes[1], "replace coordinator.json");
  auto lines = lines_of(files->files["traces.jsonl"]);
  BOOST_REQUIRE_EQUAL(lines.size(), 3u);
  BOOST_CHECK(contains(lines[0], "\"trajectory\":1000001"));
  BOOST_CHECK(contains(lines[2], "\"trajectory\":1000003"));
  auto again = ledger.open();
  BOOST_REQUIRE(again && *again);
  BOOST_CHECK_EQUAL((*again)->step, 1u);
  BOOST_CHECK_EQUAL((*again)->cursor, 2u);
  BOOST_CHECK_EQUAL((*again)->policy_version, 1u);
}

BOOST_AUTO_TEST_CASE(a_failed_write_names_the_file_keeps_what_was_written_and_is_retried) {
  auto files = std::make_shared<memory_store>();
  episode::step_ledger ledger(files, 1 << 20);
  BOOST_REQUIRE(ledger.record_round(round_of(1, 2)));
  BOOST_REQUIRE(ledger.record_checkpoint({1, 2, 1}));
  files->fail_next = {"traces.jsonl", "coordinator.json"};
  auto traces = ledger.record_round(round_of(2, 2));
  BOOST_REQUIRE(!traces);
  BOOST_CHECK(contains(describe(traces.error()), "/run/traces.jsonl"));
  auto cp = ledger.record_checkpoint({2, 4, 2});
  BOOST_REQUIRE(!cp);
  BOOST_CHECK(contains(describe(cp.error()), "/run/coordinator.json"));
  // What was there is whole: step 1's lines and checkpoint.
  BOOST_CHECK_EQUAL(lines_of(files->files["traces.jsonl"]).size(), 2u);
  BOOST_CHECK_EQUAL(ledger.open().value()->step, 1u);
  // The next round is written again.
  BOOST_REQUIRE(ledger.record_round(round_of(3, 2)));
  BOOST_REQUIRE(ledger.record_checkpoint({3, 6, 3}));
  BOOST_CHECK_EQUAL(lines_of(files->files["traces.jsonl"]).size(), 4u);
  BOOST_CHECK_EQUAL(ledger.open().value()->step, 3u);
}

BOOST_AUTO_TEST_CASE(a_broken_checkpoint_is_an_error_naming_the_file) {
  auto files = std::make_shared<memory_store>();
  files->files["coordinator.json"] = "{\"step\": \"three\"}";
  episode::step_ledger ledger(files, 1 << 20);
  auto opened = ledger.open();
  BOOST_REQUIRE(!opened);
  BOOST_CHECK(contains(describe(opened.error()), "/run/coordinator.json"));
  BOOST_CHECK(contains(describe(opened.error()), "as integers"));
}

BOOST_AUTO_TEST_CASE(past_the_limit_traces_rotate_before_the_next_round) {
  auto files = std::make_shared<memory_store>();
  episode::step_ledger ledger(files, 100); // one line is longer than this
  BOOST_REQUIRE(ledger.record_round(round_of(1, 1)));
  BOOST_REQUIRE(ledger.record_round(round_of(2, 1)));
  BOOST_CHECK(contains(files->files["traces.1.jsonl"], "\"step\":1"));
  BOOST_CHECK(contains(files->files["traces.jsonl"], "\"step\":2"));
  BOOST_CHECK(!contains(files->files["traces.jsonl"], "\"step\":1"));
}

BOOST_AUTO_TEST_CASE(on_disk_the_checkpoint_and_traces_land_in_the_run_directory) {
  kbrl::test::temp_dir dir;
  episode::step_ledger ledger(io::directory_store(dir.path.string()), 1 << 20);
  BOOST_REQUIRE(ledger.record_round(round_of(1, 2)));
  BOOST_REQUIRE(ledger.record_checkpoint({1, 2, 1}));
  BOOST_CHECK_EQUAL(lines_of(kbrl::test::read_file(dir / "traces.jsonl")).size(), 2u);
  auto cp = read_coordinator_checkpoint(dir.path.string());
  BOOST_REQUIRE(cp);
  BOOST_CHECK_EQUAL(cp->step, 1u);
}

BOOST_AUTO_TEST_SUITE_END()
