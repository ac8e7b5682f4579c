#include "runtime/node/logging.hpp"

#include "messages/errors.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

namespace kbrl {

caf::expected<void> setup_logging(const log_options& opts) {
  std::vector<spdlog::sink_ptr> sinks;
  if (opts.console)
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!opts.file.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(opts.file).parent_path());
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(opts.file));
    } catch (const std::exception& e) {
      return make_error(errc::io_failure, "cannot open log file " + opts.file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>(opts.logger_name, sinks.begin(), sinks.end());
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e [%n] %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(opts.level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  // spdlog 1.10 flushes in whole seconds; round up so a small setting still flushes.
  spdlog::flush_every(std::chrono::seconds(static_cast<int64_t>(std::ceil(opts.flush_s))));
  return caf::unit;
}

} // namespace kbrl
