// kbrl-core-link-check: links every object of kbrl_core and nothing of libtorch (CMakeLists.txt).
// Building it is the check: a core file that calls into the torch part (model, train, devices)
// leaves an undefined reference and fails the build. Running it prints what it is.
#include <cstdio>

int main() {
  std::puts("kbrl-core-link-check: kbrl_core links without libtorch");
  return 0;
}
