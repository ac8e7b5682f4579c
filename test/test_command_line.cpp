// The command line every kbrl tool reads through runtime/config/command_line: --help and
// --version exit 0, a mistake exits with the tool's usage status (not CLI11's 105-109) and a
// mistyped flag gets the closest real one.

#include "runtime/config/command_line.hpp"

#include <CLI/CLI.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace kbrl;

namespace {

/// Parses `args` (after the program name) with a small tool's options.
std::optional<int> parse(std::vector<std::string> args, std::string* levels = nullptr) {
  CLI::App app{"test tool"};
  std::string l, out;
  app.add_option("--levels", l);
  app.add_option("--output", out);
  config::add_version_flag(app, "kbrl-test");
  std::vector<char*> argv{const_cast<char*>("kbrl-test")};
  for (auto& a : args)
    argv.push_back(a.data());
  auto status = config::parse_command_line(app, static_cast<int>(argv.size()), argv.data(), 2);
  if (levels)
    *levels = l;
  return status;
}

} // namespace

BOOST_AUTO_TEST_SUITE(command_line)

BOOST_AUTO_TEST_CASE(good_arguments_go_on_and_help_and_version_exit_zero) {
  std::string levels;
  BOOST_CHECK(!parse({"--levels", "1,2"}, &levels));
  BOOST_CHECK_EQUAL(levels, "1,2");
  BOOST_CHECK(parse({"--version"}) == 0);
  BOOST_CHECK(parse({"--help"}) == 0);
}

BOOST_AUTO_TEST_CASE(mistakes_exit_with_the_usage_status_and_name_the_closest_flag) {
  BOOST_CHECK(parse({"--levls", "1"}) == 2);
  BOOST_CHECK(parse({"--levels"}) == 2); // a value is missing
  CLI::App app;
  std::string l;
  app.add_option("--levels", l);
  app.add_subcommand("build")->add_option("--corpus", l);
  BOOST_CHECK_EQUAL(config::mistyped_flag_hint(
                      app, "The following arguments were not expected: --levls 1"),
                    " (did you mean '--levels'?)");
  BOOST_CHECK_EQUAL(config::mistyped_flag_hint(app, "not expected: --corpse=x"),
                    " (did you mean '--corpus'?)"); // a subcommand's flag, with a value
  BOOST_CHECK_EQUAL(config::mistyped_flag_hint(app, "not expected: --frobnicate"), "");
}

BOOST_AUTO_TEST_SUITE_END()
