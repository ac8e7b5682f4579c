#pragma once
// One isolated evaluation worker process (tools/kbrl_eval_worker.py) and the pipes to it.
//
// The worker speaks the line protocol of runtime/eval/worker_protocol.md on its own fds 3 (in) and
// 4 (out). Its stdout and stderr belong to the candidate and are drained by a thread into a
// bounded head+tail capture, so a candidate that prints gigabytes costs CPU, never memory or disk,
// and can never corrupt the protocol.
//
// Isolation, chosen by `isolation` (see isolation_mode) and probed once per process:
//   bwrap    no network, a read-only view of / (/tmp included) except the scratch and build
//            directories, its own /dev/shm and /run, its own PID namespace (a fork storm dies
//            with it), dies with its parent
//   unshare  no network only (root only; `unshare -n`)
//   none     no namespaces (logged as a warning by the caller)
// In every mode: its own session (the whole group is killed on timeout), limits on processes,
// file size and core dumps, no connect(2) and no unix datagram sockets (a seccomp filter:
// socket_filter.hpp), and - when kbrl runs as root - the unprivileged user `nobody`.

#include <caf/expected.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace kbrl::eval {

/// How a worker is fenced off from the machine.
enum class isolation_mode { automatic, bwrap, unshare, none };

/// Parses "auto", "bwrap", "unshare", "none".
caf::expected<isolation_mode> parse_isolation(const std::string& text);
const char* to_string(isolation_mode mode);

/// `requested`, or for automatic: bwrap when it works on this machine (probed by running `true`
/// under it once), else none - which worker_process::start then refuses: only an explicit
/// isolation = none runs a worker without a sandbox.
isolation_mode resolve_isolation(isolation_mode requested);

/// How to start a worker. Every field states its default.
struct worker_options {
  std::string python = "/usr/bin/python3"; ///< interpreter with torch (see python_probe.hpp)
  std::string script;              ///< path of kbrl_eval_worker.py
  std::string scratch_dir;         ///< private, writable; created if missing
  std::string extensions_dir;      ///< shared build cache (TORCH_EXTENSIONS_DIR); created if missing
  int gpu = -1;                    ///< CUDA device for CUDA_VISIBLE_DEVICES; -1: CPU only
  isolation_mode isolation = isolation_mode::automatic;
  bool drop_privileges = true;     ///< when running as root, run the worker as `nobody`
  uint64_t max_processes = 512;    ///< RLIMIT_NPROC of the worker's user
  uint64_t max_file_bytes = 1ull << 30; ///< RLIMIT_FSIZE: largest file it may write (1 GiB)
  size_t capture_bytes = 64 * 1024; ///< candidate output kept: first and last half of this
  std::vector<std::string> extra_env; ///< NAME=value pairs added to the worker's environment
};

/// What the candidate printed since the last take.
struct captured_output {
  std::string head;        ///< the first bytes
  std::string tail;        ///< the last bytes (empty if everything fit in head)
  uint64_t total_bytes = 0;
  /// head, a "[... N bytes left out ...]" marker if anything was dropped, and tail.
  std::string text() const;
};

/// A running worker. Not thread-safe: one owner calls it.
class worker_process {
public:
  /// Starts the worker. Fails with errc::worker_crashed / io_failure and the reason.
  static caf::expected<std::unique_ptr<worker_process>> start(const worker_options& opts);

  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  /// Sends one request line (without newline) and waits for its answer line, at most `deadline`.
  /// When the request has an integer "id", the answer is the first line with the same id: lines
  /// with another id, or that are not JSON objects (a forged or stale answer), are dropped and
  /// counted in stray_answers(). On timeout the whole process group is killed: errc::timeout. If
  /// the worker dies first: errc::worker_crashed with its exit status or signal ("killed by
  /// SIGSEGV").
  caf::expected<std::string> call(const std::string& request, std::chrono::milliseconds deadline);

  /// Answer lines dropped so far because they did not answer the request they came after.
  uint64_t stray_answers() const { return stray_answers_; }

  /// Output captured since the last call of take_output().
  captured_output take_output();

  /// Kills the worker's process group (SIGKILL) and reaps it.
  void kill();

  /// True while the process has not exited.
  bool alive();

  pid_t pid() const { return pid_; }
  isolation_mode isolation() const { return isolation_; }

  /// "exited with status 3", "killed by SIGSEGV", or "running".
  std::string exit_description();

private:
  struct capture_state;
  worker_process() = default;
  void reap(bool wait);

  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  int status_ = -1; ///< waitpid status once reaped
  isolation_mode isolation_ = isolation_mode::none;
  std::string pending_; ///< bytes read past the last answer line
  uint64_t stray_answers_ = 0;
  std::shared_ptr<capture_state> capture_;
};

} // namespace kbrl::eval
