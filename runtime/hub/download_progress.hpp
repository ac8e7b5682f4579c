#pragma once
// What a person sees while files download: on a terminal, one live line per file, redrawn at
// most ten times a second
//   model-00001-of-00002.safetensors   812.3 / 3968.0 MB   95.1 MB/s
// and elsewhere (logs, CI) one line per finished file through spdlog:
//   downloaded Qwen/Qwen2.5-Coder-1.5B-Instruct/config.json (0.0 MB in 0.1 s, 0.3 MB/s)

#include "runtime/hub/hub_options.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace kbrl::hub {

/// The live line for `file`: name, MB done / MB total (just MB done when total is 0), MB/s.
std::string format_progress(const std::string& file, uint64_t done, uint64_t total,
                            double bytes_per_s);

/// Progress of one file's download.
class download_progress {
public:
  /// `label` names the file in the lines ("Org/Name/file"); `mode` automatic picks the bar when
  /// stderr is a terminal.
  download_progress(progress_mode mode, std::string label, uint64_t total);

  /// The file now has `done` bytes of `total` (0: keep the total given before).
  void update(uint64_t done, uint64_t total);

  /// The download ended; `ok` false when it failed (the bar line is then ended without the
  /// finished log line).
  void finish(bool ok);

private:
  using clock = std::chrono::steady_clock;
  bool bar_ = false;
  bool quiet_ = false;
  std::string label_;
  uint64_t total_ = 0;
  uint64_t first_ = 0;   ///< bytes present at the start (resumed downloads)
  uint64_t done_ = 0;
  bool seen_ = false;
  clock::time_point start_ = clock::now();
  clock::time_point last_draw_{};
};

} // namespace kbrl::hub
