#include "runtime/hub/download_progress.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>

#include <unistd.h>

namespace kbrl::hub {

namespace {

double megabytes(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

} // namespace

std::string format_progress(const std::string& file, uint64_t done, uint64_t total,
                            double bytes_per_s) {
  char buf[512];
  if (total > 0)
    std::snprintf(buf, sizeof buf, "%-40s %9.1f / %.1f MB  %7.1f MB/s", file.c_str(),
                  megabytes(done), megabytes(total), bytes_per_s / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%-40s %9.1f MB  %7.1f MB/s", file.c_str(), megabytes(done),
                  bytes_per_s / 1e6);
  return buf;
}

download_progress::download_progress(progress_mode mode, std::string label, uint64_t total)
  : label_(std::move(label)), total_(total) {
  bar_ = mode == progress_mode::bar
         || (mode == progress_mode::automatic && ::isatty(STDERR_FILENO) == 1);
  quiet_ = mode == progress_mode::none;
}

void download_progress::update(uint64_t done, uint64_t total) {
  if (!seen_) {
    seen_ = true;
    first_ = done;
  }
  done_ = done;
  if (total > 0)
    total_ = total;
  if (!bar_)
    return;
  const auto now = clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100))
    return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done_ - first_) / seconds : 0;
  std::fprintf(stderr, "\r%s", format_progress(label_, done_, total_, rate).c_str());
  std::fflush(stderr);
}

void download_progress::finish(bool ok) {
  const double seconds = std::chrono::duration<double>(clock::now() - start_).count();
  const uint64_t moved = done_ - first_;
  const double rate = seconds > 0 ? static_cast<double>(moved) / seconds : 0;
  if (bar_) {
    if (ok)
      std::fprintf(stderr, "\r%s\n", format_progress(label_, done_, total_, rate).c_str());
    else
      std::fprintf(stderr, "\n");
    std::fflush(stderr);
    return;
  }
  if (ok && !quiet_)
    spdlog::info("downloaded {} ({:.1f} MB in {:.1f} s, {:.1f} MB/s{})", label_,
                 megabytes(done_), seconds, rate / 1e6,
                 first_ > 0 ? ", resumed at " + std::to_string(first_) + " bytes" : "");
}

} // namespace kbrl::hub
