// The one Boost.Test entry point; suites live in test_<suite>.cpp files.
//
// With KBRL_TEST_BACKTRACE=1 (and --catch_system_errors=no, so Boost.Test lets the signal
// through), a crash prints a backtrace to stderr: machines without gdb still say where it was.
#define BOOST_TEST_MODULE kbrl
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdlib>
#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

namespace {

extern "C" void print_backtrace_and_die(int sig, siginfo_t*, void* context) {
  void* frames[64];
  int n = backtrace(frames, 64);
  const char msg[] = "\n*** kbrl-tests crashed; backtrace:\n";
  (void)!write(2, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, 2);
#if defined(__x86_64__)
  // A call through a null pointer leaves no frame to unwind: the caller's return address is
  // the word at the stack pointer.
  auto* uc = static_cast<ucontext_t*>(context);
  void* caller = *reinterpret_cast<void**>(uc->uc_mcontext.gregs[REG_RSP]);
  const char msg2[] = "return address at the stack pointer:\n";
  (void)!write(2, msg2, sizeof msg2 - 1);
  backtrace_symbols_fd(&caller, 1, 2);
#endif
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct crash_backtrace {
  crash_backtrace() {
    const char* on = std::getenv("KBRL_TEST_BACKTRACE");
    if (on != nullptr && on[0] == '1') {
      struct sigaction sa {};
      sa.sa_sigaction = print_backtrace_and_die;
      sa.sa_flags = SA_SIGINFO;
      sigaction(SIGSEGV, &sa, nullptr);
      sigaction(SIGABRT, &sa, nullptr);
    }
  }
};

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(crash_backtrace);
