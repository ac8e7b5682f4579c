// The one Boost.Test entry point; suites live in test_<suite>.cpp files.
#define BOOST_TEST_MODULE kbrl
#include <boost/test/unit_test.hpp>
