#include "runtime/train/collective_group.hpp"

#include "messages/errors.hpp"

// c10d's backend headers only declare their classes when libtorch's build macro is set; CMake
// defines KBRL_HAVE_GLOO / KBRL_HAVE_NCCL after checking that the headers compile and the
// libraries have the classes (see CMakeLists.txt).
#if KBRL_HAVE_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if KBRL_HAVE_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>
#include <mutex>

namespace kbrl::train {

class rendezvous_store {
public:
  explicit rendezvous_store(c10::intrusive_ptr<c10d::Store> store, uint16_t port = 0)
    : store_(std::move(store)), port_(port) {
  }
  const c10::intrusive_ptr<c10d::Store>& get() const { return store_; }
  uint16_t port() const { return port_; }

private:
  c10::intrusive_ptr<c10d::Store> store_;
  uint16_t port_;
};

namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

/// One rank of a c10d process group of type PG (ProcessGroupGloo or ProcessGroupNCCL; their
/// common base moved from ProcessGroup to Backend in libtorch 2, so the class is named directly).
template <class PG>
class c10d_group final : public collective_group {
public:
  c10d_group(c10::intrusive_ptr<PG> pg, int rank, int size, std::string backend,
             std::chrono::milliseconds timeout)
    : pg_(std::move(pg)), rank_(rank), size_(size), backend_(std::move(backend)),
      timeout_(timeout) {
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  caf::expected<void> all_reduce_sum(at::Tensor& tensor) override {
    return run("all-reduce", [&] {
      std::vector<at::Tensor> one{tensor};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp::SUM;
      o.timeout = timeout_;
      return pg_->allreduce(one, o);
    });
  }

  caf::expected<void> broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= size_)
      return make_error(errc::invalid_argument, "broadcast: root rank " + std::to_string(root)
                                                  + " outside the group of "
                                                  + std::to_string(size_));
    return run("broadcast", [&] {
      std::vector<at::Tensor> one{tensor};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      o.timeout = timeout_;
      return pg_->broadcast(one, o);
    });
  }

private:
  template <class Start>
  caf::expected<void> run(const char* what, Start&& start) {
    try {
      auto work = start();
      work->wait(timeout_);
      return {};
    } catch (const std::exception& e) {
      return make_error(errc::internal, backend_ + " " + what + " failed on rank "
                                          + std::to_string(rank_) + " of "
                                          + std::to_string(size_) + ": " + e.what());
    }
  }

  c10::intrusive_ptr<PG> pg_;
  int rank_, size_;
  std::string backend_;
  std::chrono::milliseconds timeout_;
};

} // namespace

bool gloo_available() {
  return KBRL_HAVE_GLOO != 0;
}

bool nccl_available() {
  return KBRL_HAVE_NCCL != 0;
}

std::shared_ptr<rendezvous_store> make_in_process_store() {
  return std::make_shared<rendezvous_store>(c10::make_intrusive<c10d::HashStore>());
}

caf::expected<std::shared_ptr<rendezvous_store>>
serve_tcp_store(uint16_t port, int world_size, double timeout_s) {
  try {
    c10d::TCPStoreOptions o;
    o.port = port;
    o.isServer = true;
    o.numWorkers = static_cast<std::size_t>(world_size);
    o.waitWorkers = false; // the ranks meet in join_group(), not here
    o.timeout = to_ms(timeout_s);
    auto store = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", o);
    const auto bound = static_cast<uint16_t>(store->getPort());
    return std::make_shared<rendezvous_store>(store, bound);
  } catch (const std::exception& e) {
    return make_error(errc::io_failure, "cannot serve the rendezvous store on port "
                                          + std::to_string(port) + ": " + e.what());
  }
}

caf::expected<std::shared_ptr<rendezvous_store>>
connect_tcp_store(const std::string& host, uint16_t port, double timeout_s) {
  try {
    c10d::TCPStoreOptions o;
    o.port = port;
    o.isServer = false;
    o.waitWorkers = false;
    o.timeout = to_ms(timeout_s);
    auto store = c10::make_intrusive<c10d::TCPStore>(host, o);
    return std::make_shared<rendezvous_store>(store, port);
  } catch (const std::exception& e) {
    return make_error(errc::io_failure, "cannot reach the rendezvous store at " + host + ":"
                                          + std::to_string(port) + ": " + e.what());
  }
}

uint16_t store_port(const rendezvous_store& store) {
  return store.port();
}

caf::expected<std::unique_ptr<collective_group>>
join_group(const std::shared_ptr<rendezvous_store>& store, int rank, int size,
           const c10::Device& device, const group_options& options) {
  if (!store)
    return make_error(errc::invalid_argument, "join_group: no rendezvous store");
  if (size < 1 || rank < 0 || rank >= size)
    return make_error(errc::invalid_argument, "join_group: rank " + std::to_string(rank)
                                                + " outside a group of " + std::to_string(size));
  if (!(options.timeout_s > 0))
    return make_error(errc::invalid_argument, "join_group: the timeout must be > 0 s, got "
                                                + std::to_string(options.timeout_s));
  std::string backend = options.backend;
  if (backend == "auto")
    backend = device.is_cuda() ? "nccl" : "gloo";
  const auto timeout = to_ms(options.timeout_s);
  const std::string where = "rank " + std::to_string(rank) + " of " + std::to_string(size) + " ("
                            + device.str() + ")";
  if (backend == "gloo") {
#if KBRL_HAVE_GLOO
    if (device.is_cuda())
      return make_error(errc::not_supported,
                        "join_group: " + where + ": CUDA tensors go through NCCL, not Gloo");
    try {
      auto o = c10d::ProcessGroupGloo::Options::create(timeout);
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.gloo_hostname));
      auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store->get(), rank, size, o);
      return std::unique_ptr<collective_group>(
        new c10d_group<c10d::ProcessGroupGloo>(pg, rank, size, "gloo", timeout));
    } catch (const std::exception& e) {
      return make_error(errc::internal, "join_group: " + where + ": the Gloo rendezvous failed: "
                                          + e.what());
    }
#else
    return make_error(errc::not_supported,
                      "join_group: this kbrl was built without Gloo (CMake found no Gloo headers "
                      "matching its libtorch; on Debian install libgloo-dev and reconfigure)");
#endif
  }
  if (backend == "nccl") {
#if KBRL_HAVE_NCCL
    if (!device.is_cuda())
      return make_error(errc::not_supported,
                        "join_group: " + where + ": NCCL needs CUDA tensors; the CPU uses Gloo");
    // A blocking wait makes a timed-out collective throw on the waiting thread (an error this
    // code can answer) rather than leave it to the watchdog. Set once, before any group exists.
    static std::once_flag blocking_wait;
    std::call_once(blocking_wait, [] {
      ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
      ::setenv("NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
    });
    try {
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = timeout;
      auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store->get(), rank, size, o);
      return std::unique_ptr<collective_group>(
        new c10d_group<c10d::ProcessGroupNCCL>(pg, rank, size, "nccl", timeout));
    } catch (const std::exception& e) {
      return make_error(errc::internal, "join_group: " + where + ": NCCL setup failed: "
                                          + e.what());
    }
#else
    return make_error(errc::not_supported,
                      "join_group: this kbrl was built without NCCL (it needs a CUDA libtorch "
                      "with c10d's ProcessGroupNCCL and nccl.h at configure time)");
#endif
  }
  return make_error(errc::invalid_argument, "join_group: unknown backend '" + options.backend
                                              + "' (expected gloo, nccl or auto)");
}

} // namespace kbrl::train
