#pragma once
// A helper process spoken to in lines: one request line on its stdin, one answer line on its
// stdout (kbrl's chat-template renderer, tools/kbrl_chat_template.py). Started on first use and
// started again after it died; its stderr goes to ours. Not thread-safe: one exchange at a time.

#include <caf/expected.hpp>

#include <chrono>
#include <string>
#include <sys/types.h>
#include <vector>

namespace kbrl::io {

class line_process {
public:
  /// `argv[0]` is looked up on PATH.
  explicit line_process(std::vector<std::string> argv);
  ~line_process();
  line_process(const line_process&) = delete;
  line_process& operator=(const line_process&) = delete;

  /// Sends `request` (one line, without its newline) and returns the answer line (without its
  /// newline). errc::io_failure when the process cannot be started, dies, or answers nothing
  /// within `timeout` (it is then stopped; the next exchange starts it again).
  caf::expected<std::string> exchange(const std::string& request,
                                      std::chrono::milliseconds timeout);

private:
  caf::expected<void> start();
  void stop();

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string pending_; ///< bytes read past the last answer's newline
};

} // namespace kbrl::io
