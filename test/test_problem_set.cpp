// Where a run's problems come from and the order it sees them in.

#include "runtime/episode/problem_set.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace kbrl;
using namespace kbrl::episode;

namespace {

/// A KernelBench-shaped folder (level1/, level2/) made of the small test problems.
std::string small_kernelbench(const test::temp_dir& dir) {
  const std::string src = std::string(KBRL_TEST_DATA) + "/problems/";
  for (int level : {1, 2})
    for (auto name : {"1_small_relu.py", "2_small_matmul.py", "3_small_conv_relu.py",
                      "4_small_softmax.py"}) {
      std::ifstream in(src + name);
      std::stringstream text;
      text << in.rdbuf();
      dir.write("level" + std::to_string(level) + "/" + name, text.str());
    }
  return dir.path.string();
}

std::vector<problem> numbered(int n) {
  std::vector<problem> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<size_t>(i)].id = "level1/" + std::to_string(i);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(problem_set)

BOOST_AUTO_TEST_CASE(a_selection_loads_levels_and_number_ranges) {
  test::temp_dir dir;
  problem_selection sel;
  sel.root = small_kernelbench(dir);
  sel.levels = {1, 2};
  sel.numbers = *parse_number_ranges("1,3-4,19");
  auto set = load_problem_set(sel);
  BOOST_REQUIRE_MESSAGE(set, test::why(set));
  BOOST_CHECK_EQUAL(set->size(), 6u); // 1, 3 and 4 of both levels (there is no 19)
  BOOST_CHECK_EQUAL(set->front().id.rfind("level1/", 0), 0u);
  BOOST_CHECK_EQUAL(set->back().level, 2);
  BOOST_CHECK(!parse_number_ranges("3-1"));
  BOOST_CHECK(!parse_number_ranges("a-b"));
  sel.levels = {9};
  auto missing = load_problem_set(sel);
  BOOST_REQUIRE(!missing);
  BOOST_CHECK(describe(missing.error()).find("level9") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_split_depends_on_ids_and_seed_only) {
  auto all = numbered(200);
  auto a = split_problems(all, 0.2, 5);
  BOOST_CHECK_EQUAL(a.train.size() + a.eval.size(), 200u);
  BOOST_CHECK(a.eval.size() > 20 && a.eval.size() < 60); // about 40
  // Adding problems does not move the others.
  auto more = numbered(250);
  auto b = split_problems(more, 0.2, 5);
  std::set<std::string> eval_a, eval_b;
  for (auto& p : a.eval)
    eval_a.insert(p.id);
  for (auto& p : b.eval)
    eval_b.insert(p.id);
  for (auto& id : eval_a)
    BOOST_CHECK(eval_b.count(id) == 1);
  auto c = split_problems(all, 0.2, 6);
  BOOST_CHECK(c.eval.size() != a.eval.size() || c.eval.front().id != a.eval.front().id);
  BOOST_CHECK_EQUAL(split_problems(numbered(1), 1.0, 1).train.size(), 1u);
}

BOOST_AUTO_TEST_CASE(the_order_covers_each_pass_and_resumes_from_its_cursor) {
  problem_order order(numbered(10), 3);
  auto first = order.next(10);
  std::set<std::string> seen;
  for (auto& p : first)
    seen.insert(p.id);
  BOOST_CHECK_EQUAL(seen.size(), 10u); // a pass is a permutation
  auto rest = order.next(7);
  problem_order resumed(numbered(10), 3);
  resumed.seek(13);
  auto again = resumed.next(4);
  for (size_t i = 0; i < 4; ++i)
    BOOST_CHECK_EQUAL(again[i].id, rest[3 + i].id);
}

BOOST_AUTO_TEST_CASE(a_curriculum_advances_by_steps_or_by_success) {
  curriculum c({{{1}, 2, 0, 4}, {{1, 2}, 0, 0.5, 4}, {{2}, 0, 0, 4}});
  BOOST_CHECK(c.levels() == std::vector<int32_t>{1});
  BOOST_CHECK(!c.record_step({false}));
  BOOST_CHECK(c.record_step({false})); // two steps
  BOOST_CHECK(c.levels() == (std::vector<int32_t>{1, 2}));
  BOOST_CHECK(!c.record_step({true, false, false}));
  BOOST_CHECK(!c.record_step({false})); // window of 4: 1 of 4 correct
  BOOST_CHECK(c.record_step({true, true})); // last 4: false false true true = 0.5
  BOOST_CHECK(c.levels() == std::vector<int32_t>{2});
  BOOST_CHECK(!c.record_step({true, true, true, true})); // the last stage stays
}

BOOST_AUTO_TEST_SUITE_END()
