// kbrl-eval-kernel --static-only as a user runs it (a real process): files and directories
// pre-screened with the static checks, one block per file, text or JSON, exit 0 when nothing is
// refused and 1 when a file is; no problem file and no worker are needed.

#include "cluster_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace kbrl;

namespace {

const std::string tool = std::string(KBRL_BUILD_DIR) + "/kbrl-eval-kernel";
const std::string corpus = std::string(KBRL_TEST_DATA) + "/static_corpus";

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(eval_kernel_static)

BOOST_AUTO_TEST_CASE(honest_files_pass_with_their_warnings) {
  auto r = test::run_command({tool, "--static-only", corpus + "/honest/cuda_dispatch_and2.py",
                              corpus + "/honest/cuda_streams_joined.py", "--backend", "cuda"});
  BOOST_TEST_MESSAGE(r.output);
  BOOST_CHECK_EQUAL(r.code, 0);
  BOOST_CHECK_EQUAL(count_of(r.output, ": passed ("), 2u);
  BOOST_CHECK(r.output.find("warning stream_injection") != std::string::npos);
  BOOST_CHECK(r.output.find("error ") == std::string::npos);
  // The backend decides the backend rule: the same CUDA file is refused as Triton.
  r = test::run_command({tool, "--static-only", "--backend", "triton",
                         corpus + "/honest/cuda_dispatch_and2.py"});
  BOOST_CHECK_EQUAL(r.code, 1);
  BOOST_CHECK(r.output.find("error triton_impl line 0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_directory_gets_one_block_per_file_and_refusals_exit_1) {
  auto r = test::run_command({tool, "--static-only", corpus + "/obfuscated"});
  BOOST_CHECK_EQUAL(r.code, 1);
  BOOST_CHECK_GE(count_of(r.output, ".py: refused ("), 10u);
  BOOST_CHECK(r.output.find("error name_obfuscation line 22:") != std::string::npos);
  BOOST_CHECK(r.output.find("      | ") != std::string::npos); // excerpts
  // JSON: one entry per file, with rule, severity, line, message and excerpt.
  auto j = test::run_command({tool, "--static-only", "--json", corpus + "/obfuscated"});
  BOOST_CHECK_EQUAL(j.code, 1);
  BOOST_CHECK_EQUAL(count_of(j.output, "\"path\":"), count_of(r.output, ".py: "));
  for (auto key : {"\"rule\":", "\"severity\":", "\"line\":", "\"message\":", "\"excerpt\":"})
    BOOST_CHECK_MESSAGE(j.output.find(key) != std::string::npos, key);
  // A rule turned into a warning by a run-config override no longer refuses.
  auto w = test::run_command({tool, "--static-only", corpus + "/obfuscated/setattr_literal.py",
                              "--config", "eval.rules_warn=[\"timing_event_patch\"]"});
  BOOST_CHECK_MESSAGE(w.code == 0, w.output);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_3) {
  auto r = test::run_command({tool, "--static-only", corpus + "/no_such_file.py"});
  BOOST_CHECK_EQUAL(r.code, 3);
  BOOST_CHECK(r.output.find("no such file") != std::string::npos);
  r = test::run_command({tool, "--static-only", "--backend", "fortran", corpus + "/honest"});
  BOOST_CHECK_EQUAL(r.code, 3);
}

BOOST_AUTO_TEST_SUITE_END()
