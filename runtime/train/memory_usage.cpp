#include "runtime/train/memory_usage.hpp"

#include <cstddef>
#include <fstream>

#include <dlfcn.h>
#include <unistd.h>

namespace kbrl::train {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident))
    return 0;
  return pages_resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

std::optional<std::pair<int64_t, int64_t>> cuda_memory(int gpu) {
  if (gpu < 0)
    return std::nullopt;
  // Looked up at run time: a CPU build links no CUDA library, and a CUDA build of libtorch has
  // the runtime loaded already (RTLD_NOLOAD: never load one ourselves).
  using get_device_fn = int (*)(int*);
  using set_device_fn = int (*)(int);
  using mem_get_info_fn = int (*)(std::size_t*, std::size_t*);
  void* lib = nullptr;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                           "libcudart.so"})
    if ((lib = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) != nullptr)
      break;
  void* scope = lib != nullptr ? lib : RTLD_DEFAULT;
  auto get_device = reinterpret_cast<get_device_fn>(::dlsym(scope, "cudaGetDevice"));
  auto set_device = reinterpret_cast<set_device_fn>(::dlsym(scope, "cudaSetDevice"));
  auto mem_get_info = reinterpret_cast<mem_get_info_fn>(::dlsym(scope, "cudaMemGetInfo"));
  std::optional<std::pair<int64_t, int64_t>> out;
  if (get_device != nullptr && set_device != nullptr && mem_get_info != nullptr) {
    int previous = 0;
    if (get_device(&previous) == 0 && set_device(gpu) == 0) {
      std::size_t free = 0, total = 0;
      if (mem_get_info(&free, &total) == 0)
        out = std::make_pair(static_cast<int64_t>(total - free), static_cast<int64_t>(total));
      set_device(previous);
    }
  }
  if (lib != nullptr)
    ::dlclose(lib);
  return out;
}

} // namespace kbrl::train
