#pragma once
// The collectives a data-parallel learner needs, over PyTorch's distributed package (c10d):
// Gloo for CPU tensors, NCCL for CUDA tensors. This header keeps c10d (and Gloo's and NCCL's
// headers) out of every other file; collective_group.cpp is the only one that includes them.
//
// Rendezvous: the ranks of a group find each other through a key-value store. Today's replicas
// are threads of one process and share an in-process store (make_in_process_store()); ranks in
// several processes or on several nodes (later) use a TCP store served by rank 0
// (serve_tcp_store() / connect_tcp_store()); join_group() is the same for both.
//
// Timeouts: every collective (and the rendezvous) gives up after group_options::timeout_s with
// errc::internal instead of hanging; the group is unusable afterwards (make a new one). With
// NCCL, libtorch's watchdog may also abort the process when a collective times out: callers keep
// every rank entering the same collectives in the same order (data_parallel.cpp does), so a
// timeout means a rank died, not that it was busy elsewhere.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace kbrl::train {

/// Whether this build of kbrl has the backend (decided by CMake from the libtorch it links:
/// KBRL_HAVE_GLOO, KBRL_HAVE_NCCL).
bool gloo_available();
bool nccl_available();

/// A key-value store the ranks of one group meet at (opaque; shared by the rank threads).
class rendezvous_store;

/// A store in this process's memory, for ranks that are threads of this process.
std::shared_ptr<rendezvous_store> make_in_process_store();

/// A TCP store served from this process on `port` of all interfaces (0: any free port, see
/// store_port()), for `world_size` ranks in any process. Fails with errc::io_failure (port taken)
/// or errc::not_supported.
caf::expected<std::shared_ptr<rendezvous_store>>
serve_tcp_store(uint16_t port, int world_size, double timeout_s);

/// A client of the TCP store at host:port; waits up to timeout_s for it. errc::io_failure.
caf::expected<std::shared_ptr<rendezvous_store>>
connect_tcp_store(const std::string& host, uint16_t port, double timeout_s);

/// The port a TCP store listens on (0 for an in-process store).
uint16_t store_port(const rendezvous_store& store);

/// How a rank joins its group.
struct group_options {
  /// "gloo", "nccl", or "auto": NCCL for a CUDA device, Gloo for the CPU.
  std::string backend = "auto";
  /// Seconds any one collective (and the rendezvous) may take before it fails, > 0.
  double timeout_s = 600;
  /// The address Gloo's TCP transport binds to: loopback for ranks of one host; this host's
  /// address on the nodes' network for a multi-node group.
  std::string gloo_hostname = "127.0.0.1";
};

/// One rank's handle on its group. Collectives block until every rank made the same call (or
/// the timeout). Not thread-safe: one rank, one thread.
class collective_group {
public:
  virtual ~collective_group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo" or "nccl".
  virtual std::string backend() const = 0;
  /// Sums `tensor` (contiguous, on this rank's device) over all ranks, in place, waiting for the
  /// result. errc::internal with the backend's text on failure or timeout.
  virtual caf::expected<void> all_reduce_sum(at::Tensor& tensor) = 0;
  /// Copies rank `root`'s `tensor` into every rank's, in place, waiting for the result.
  virtual caf::expected<void> broadcast(at::Tensor& tensor, int root) = 0;
};

/// Joins the group of `size` ranks at `store` as `rank`, for tensors on `device`. Every rank must
/// call it (concurrently: it blocks until all have joined, or the timeout). Fails with
/// errc::not_supported when this build lacks the backend (naming it and what it needs),
/// errc::invalid_argument for a bad rank/size/backend, errc::internal for a failed rendezvous.
caf::expected<std::unique_ptr<collective_group>>
join_group(const std::shared_ptr<rendezvous_store>& store, int rank, int size,
           const c10::Device& device, const group_options& options);

} // namespace kbrl::train
