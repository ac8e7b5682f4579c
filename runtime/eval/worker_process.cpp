#include "runtime/eval/worker_process.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/socket_filter.hpp"
#include "runtime/io/clock.hpp"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <grp.h>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <sys/syscall.h>
#include <unistd.h>

namespace kbrl::eval {

namespace {

namespace fs = std::filesystem;

constexpr uid_t nobody_uid = 65534;
constexpr gid_t nobody_gid = 65534;

bool is_root() {
  return ::geteuid() == 0;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by " + signal_name(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

/// argv and envp prepared before fork: the child may only make async-signal-safe calls.
struct exec_plan {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argv;
  std::vector<char*> envp;
  void seal() {
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

/// The bubblewrap program: $KBRL_BWRAP when set (a test points it at a missing file to see a
/// machine without one), else bwrap on PATH.
std::string bwrap_command() {
  const char* env = std::getenv("KBRL_BWRAP");
  return env != nullptr && *env != '\0' ? env : "bwrap";
}

std::vector<std::string> isolation_prefix(isolation_mode mode, const worker_options& o) {
  switch (mode) {
    case isolation_mode::bwrap:
      return {bwrap_command(), "--die-with-parent", "--unshare-net", "--unshare-ipc",
              "--unshare-pid", "--new-session",     "--ro-bind",     "/",
              "/",             "--dev-bind",        "/dev",          "/dev",
              "--tmpfs",       "/dev/shm",          "--tmpfs",       "/run",
              "--proc",        "/proc",             "--bind",        o.scratch_dir,
              o.scratch_dir,   "--bind",            o.extensions_dir, o.extensions_dir,
              "--chdir",       o.scratch_dir};
      // No private /tmp: the host's is read-only in here like the rest of /, and kbrl itself (the
      // worker script, a checkout under /tmp) may live there. TMPDIR and HOME point at scratch.
      // /dev/shm is the sandbox's own (the host's is a writable tmpfs shared by every user), and
      // so is /run (the host's daemons' sockets); connecting to a unix socket anywhere else is
      // refused by the seccomp filter (socket_filter.hpp).
    case isolation_mode::unshare:
      return {"unshare", "--net"};
    default:
      return {};
  }
}

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return name;
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    auto end = p.find(':', start);
    if (end == std::string::npos)
      end = p.size();
    auto candidate = p.substr(start, end - start) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return name;
}

/// Runs the child side after fork: limits, fds, identity, exec. Never returns.
/// fork() without the pthread_atfork handlers. A handler can block forever: OpenBLAS's waits for
/// its busy threads, so starting a worker while a CPU sampler in the same process multiplies
/// matrices deadlocked. The child only makes system calls and then execs, so it needs none of
/// what the handlers prepare.
pid_t fork_without_handlers() {
  return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0));
}

[[noreturn]] void exec_child(const exec_plan& plan, const worker_options& o, int in_read,
                             int out_write, int capture_write, bool drop,
                             const std::vector<sock_filter>& filter) {
  ::setsid();
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = o.max_processes;
  ::setrlimit(RLIMIT_NPROC, &lim);
  lim.rlim_cur = lim.rlim_max = o.max_file_bytes;
  ::setrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = lim.rlim_max = 0;
  ::setrlimit(RLIMIT_CORE, &lim);
  // Fixed descriptor layout: 0 = /dev/null, 1 and 2 = capture pipe, 3 = requests, 4 = answers.
  int devnull = ::open("/dev/null", O_RDONLY);
  // Move the pipe ends above 4 first so the dup2 calls below cannot clobber each other.
  in_read = ::fcntl(in_read, F_DUPFD, 10);
  out_write = ::fcntl(out_write, F_DUPFD, 10);
  capture_write = ::fcntl(capture_write, F_DUPFD, 10);
  devnull = ::fcntl(devnull, F_DUPFD, 10);
  ::dup2(devnull, 0);
  ::dup2(capture_write, 1);
  ::dup2(capture_write, 2);
  ::dup2(in_read, 3);
  ::dup2(out_write, 4);
  ::close_range(5, ~0u, 0);
  if (::chdir(o.scratch_dir.c_str()) != 0) {
    // Keep going in the current directory; the worker reports its own problems.
  }
  if (drop) {
    // Raw system calls: glibc's setuid/setgid/setgroups signal every thread the parent had
    // (POSIX wants the change process-wide), and this child of a raw clone has only itself.
    ::syscall(SYS_setgroups, 0, nullptr);
    if (::syscall(SYS_setgid, nobody_gid) != 0 || ::syscall(SYS_setuid, nobody_uid) != 0)
      ::_exit(126);
  }
  if (!install_socket_filter(filter)) {
    const char msg[] =
      "kbrl: cannot install the worker's seccomp filter (no connect, no unix datagrams)\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(125);
  }
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  const char msg[] = "kbrl: cannot execute the evaluation worker\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(127);
}

} // namespace

// -- capture ------------------------------------------------------------------------------------

struct worker_process::capture_state {
  std::mutex mtx;
  captured_output out;
  size_t limit = 0;
  std::thread reader;
  int fd = -1;
  std::atomic<bool> stop{false};

  void append(const char* data, size_t n) {
    std::lock_guard<std::mutex> guard{mtx};
    out.total_bytes += n;
    size_t half = limit / 2;
    size_t to_head = std::min(n, half > out.head.size() ? half - out.head.size() : 0);
    out.head.append(data, to_head);
    if (to_head < n) {
      out.tail.append(data + to_head, n - to_head);
      if (out.tail.size() > half)
        out.tail.erase(0, out.tail.size() - half);
    }
  }
};

std::string captured_output::text() const {
  auto kept = head.size() + tail.size();
  if (total_bytes <= kept)
    return head + tail;
  return head + "\n[... " + std::to_string(total_bytes - kept) + " bytes left out ...]\n" + tail;
}

// -- isolation ----------------------------------------------------------------------------------

caf::expected<isolation_mode> parse_isolation(const std::string& text) {
  if (text == "auto")
    return isolation_mode::automatic;
  if (text == "bwrap")
    return isolation_mode::bwrap;
  if (text == "unshare")
    return isolation_mode::unshare;
  if (text == "none")
    return isolation_mode::none;
  return make_error(errc::invalid_config,
                    "isolation '" + text + "': expected auto, bwrap, unshare or none");
}

const char* to_string(isolation_mode mode) {
  switch (mode) {
    case isolation_mode::automatic: return "auto";
    case isolation_mode::bwrap: return "bwrap";
    case isolation_mode::unshare: return "unshare";
    case isolation_mode::none: return "none";
  }
  return "unknown";
}

isolation_mode resolve_isolation(isolation_mode requested) {
  if (requested != isolation_mode::automatic)
    return requested;
  // Probed once per process: the answer does not change while it runs.
  static const isolation_mode resolved = [] {
    auto works = [](const std::string& cmd) { return std::system(cmd.c_str()) == 0; };
    // As root the worker runs as nobody: bwrap must work for that user (user namespaces).
    std::string as_worker = is_root() ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    if (works(as_worker + bwrap_command() + " --die-with-parent --unshare-net --unshare-pid "
                          "--ro-bind / / --dev-bind /dev /dev --proc /proc true >/dev/null 2>&1"))
      return isolation_mode::bwrap;
    // Not `unshare`: it only takes the network away (and as root, the worker runs as nobody,
    // who may not unshare); `auto` means a sandbox or a refusal
    return isolation_mode::none;
  }();
  return resolved;
}

// -- worker_process -----------------------------------------------------------------------------

caf::expected<std::unique_ptr<worker_process>> worker_process::start(const worker_options& given) {
  // Absolute paths: the child changes into scratch before it executes bwrap and the worker.
  auto o = given;
  o.scratch_dir = fs::absolute(o.scratch_dir).lexically_normal().string();
  o.extensions_dir = fs::absolute(o.extensions_dir).lexically_normal().string();
  std::error_code ec;
  for (auto* dir : {&o.scratch_dir, &o.extensions_dir}) {
    fs::create_directories(*dir, ec);
    if (ec)
      return make_error(errc::io_failure, "cannot create " + *dir + ": " + ec.message());
  }
  bool drop = o.drop_privileges && is_root();
  if (drop) {
    // nobody must be able to walk down to its directories: every parent needs o+x.
    for (auto* dir : {&o.scratch_dir, &o.extensions_dir}) {
      auto p = fs::absolute(*dir).parent_path();
      for (; !p.empty() && p != p.root_path(); p = p.parent_path()) {
        struct stat sb {};
        if (::stat(p.c_str(), &sb) == 0 && (sb.st_mode & S_IXOTH) == 0)
          return make_error(errc::io_failure,
                            "the worker runs as user nobody, who cannot reach " + *dir + ": "
                              + p.string() + " is not searchable by others (chmod o+x "
                              + p.string() + ", or set eval.drop_privileges = false)");
      }
    }
    // The worker runs as nobody: it must be able to write its scratch and build directories.
    for (auto* dir : {&o.scratch_dir, &o.extensions_dir})
      if (::chown(dir->c_str(), nobody_uid, nobody_gid) != 0)
        return make_error(errc::io_failure, "cannot hand " + *dir + " to user nobody: "
                                              + std::strerror(errno));
  }
  auto mode = resolve_isolation(o.isolation);
  if (o.isolation == isolation_mode::automatic && mode == isolation_mode::none)
    return make_error(errc::invalid_config,
                      "no sandbox for the evaluation worker: " + bwrap_command()
                        + " is missing or does not work on this machine (it needs unprivileged "
                          "user namespaces), so generated kernels would run with this node's "
                          "rights. Install bubblewrap (tools/setup.sh does), or set "
                          "eval.isolation = \"none\" to evaluate without a sandbox");

  exec_plan plan;
  auto prefix = isolation_prefix(mode, o);
  if (!prefix.empty())
    prefix[0] = find_in_path(prefix[0]);
  plan.args = prefix;
  plan.args.push_back(prefix.empty() ? find_in_path(o.python) : o.python);
  for (auto* a : {"-u", "-B"})
    plan.args.push_back(a);
  plan.args.push_back(o.script);
  for (auto a : {"--in-fd", "3", "--out-fd", "4", "--scratch"})
    plan.args.push_back(a);
  plan.args.push_back(o.scratch_dir);
  plan.args.push_back("--device");
  plan.args.push_back(o.gpu >= 0 ? "cuda" : "cpu");
  // The worker's own switches pass too (tools/kbrl_eval/README.md): the node's environment
  // turns the build shortcuts off or sets the spare processes, for comparisons on a device.
  for (auto* var : {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LANG", "CUDA_HOME",
                    "NVIDIA_DRIVER_CAPABILITIES", "KBRL_EVAL_NO_PCH", "KBRL_EVAL_FULL_CUDA_HEADER",
                    "KBRL_EVAL_OPS_CUDA_HEADER", "KBRL_EVAL_SERIAL_NVCC", "KBRL_EVAL_SPARES",
                    "KBRL_EVAL_NO_WRITE_FENCE", "KBRL_EVAL_FUSED_COMPARE",
                    "KBRL_EVAL_NO_MAIN_CACHE", "KBRL_EVAL_BUILD_NICE"})
    if (const char* v = std::getenv(var))
      plan.env.push_back(std::string(var) + "=" + v);
  plan.env.push_back("HOME=" + o.scratch_dir);
  plan.env.push_back("TMPDIR=" + o.scratch_dir);
  plan.env.push_back("TORCH_EXTENSIONS_DIR=" + o.extensions_dir);
  plan.env.push_back("CUDA_VISIBLE_DEVICES=" + (o.gpu >= 0 ? std::to_string(o.gpu) : std::string{}));
  plan.env.push_back("PYTHONUNBUFFERED=1");
  plan.env.push_back("PYTHONDONTWRITEBYTECODE=1");
  plan.env.push_back("OMP_NUM_THREADS=1");
  for (auto& e : o.extra_env)
    plan.env.push_back(e);
  plan.seal();

  auto filter = unix_socket_filter();
  if (!filter)
    return filter.error();

  int to_child[2], from_child[2], capture[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0
      || ::pipe2(capture, O_CLOEXEC) != 0)
    return make_error(errc::io_failure, std::string("cannot create pipes: ") + std::strerror(errno));

  pid_t pid = fork_without_handlers();
  if (pid < 0)
    return make_error(errc::io_failure, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0)
    exec_child(plan, o, to_child[0], from_child[1], capture[1], drop, *filter);

  ::close(to_child[0]);
  ::close(from_child[1]);
  ::close(capture[1]);
  std::unique_ptr<worker_process> w{new worker_process};
  w->pid_ = pid;
  w->to_worker_ = to_child[1];
  w->from_worker_ = from_child[0];
  w->isolation_ = mode;
  w->capture_ = std::make_shared<capture_state>();
  w->capture_->limit = o.capture_bytes;
  w->capture_->fd = capture[0];
  auto cap = w->capture_;
  cap->reader = std::thread([cap] {
    // Polls with a timeout so that the owner can stop it even when a process that escaped the
    // group kill still holds the pipe open.
    char buf[65536];
    while (!cap->stop.load()) {
      pollfd pfd{cap->fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, 100);
      if (r <= 0)
        continue;
      auto n = ::read(cap->fd, buf, sizeof buf);
      if (n > 0)
        cap->append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        break;
    }
  });
  // A worker that dies must not kill us with SIGPIPE when we write its next request.
  std::signal(SIGPIPE, SIG_IGN);
  return w;
}

worker_process::~worker_process() {
  kill();
  if (to_worker_ >= 0)
    ::close(to_worker_);
  if (from_worker_ >= 0)
    ::close(from_worker_);
  if (capture_) {
    capture_->stop = true;
    if (capture_->reader.joinable())
      capture_->reader.join();
    ::close(capture_->fd);
  }
}

void worker_process::reap(bool wait) {
  if (pid_ <= 0 || status_ >= 0)
    return;
  int st = 0;
  if (::waitpid(pid_, &st, wait ? 0 : WNOHANG) == pid_)
    status_ = st;
}

bool worker_process::alive() {
  reap(false);
  return pid_ > 0 && status_ < 0;
}

void worker_process::kill() {
  if (pid_ <= 0)
    return;
  if (status_ < 0) {
    ::kill(-pid_, SIGKILL); // the whole session: the worker and anything it started
    ::kill(pid_, SIGKILL);
  }
  reap(true);
}

std::string worker_process::exit_description() {
  reap(false);
  return status_ < 0 ? "running" : describe_status(status_);
}

captured_output worker_process::take_output() {
  std::lock_guard<std::mutex> guard{capture_->mtx};
  captured_output out = std::move(capture_->out);
  capture_->out = captured_output{};
  return out;
}

namespace {

/// The integer "id" of a JSON object line; nullopt when it is not one or has none.
std::optional<int64_t> line_id(std::string_view line) {
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(line);
  simdjson::dom::object obj;
  if (parser.parse(padded).get(obj))
    return std::nullopt;
  int64_t id = 0;
  if (obj["id"].get(id))
    return std::nullopt;
  return id;
}

} // namespace

caf::expected<std::string> worker_process::call(const std::string& request,
                                                std::chrono::milliseconds deadline) {
  auto want = line_id(request);
  if (!alive())
    return make_error(errc::worker_crashed, "the worker " + exit_description());
  std::string line = request + "\n";
  size_t written = 0;
  while (written < line.size()) {
    auto n = ::write(to_worker_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      reap(true);
      return make_error(errc::worker_crashed, "the worker " + exit_description()
                                                + " before taking the request");
    }
    written += static_cast<size_t>(n);
  }
  auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      auto answer = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (!want || line_id(answer) == want)
        return answer;
      // Not the answer to this request: a line someone else wrote on the answer pipe, or one
      // left from an earlier request. Never taken as a verdict.
      ++stray_answers_;
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill();
      return make_error(errc::timeout, "no answer within " + format_duration_ms(deadline.count())
                                         + "; the worker was killed");
    }
    pollfd pfd{from_worker_, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0)
      continue;
    char buf[65536];
    auto n = ::read(from_worker_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    // End of file: the worker died (or closed its answer pipe, which is as good as dead). Give it
    // a moment to finish dying so the report names the real cause, not our SIGKILL.
    for (int i = 0; i < 50 && alive(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto why = exit_description();
    kill();
    auto printed = take_output();
    return make_error(errc::worker_crashed,
                      "the worker " + why
                        + (printed.total_bytes > 0 ? "; it printed:\n" + printed.text() : ""));
  }
}

} // namespace kbrl::eval
