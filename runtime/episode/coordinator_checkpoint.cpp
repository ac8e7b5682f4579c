#include "runtime/episode/coordinator_checkpoint.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"

#include <simdjson.h>

#include <filesystem>

namespace kbrl {

namespace fs = std::filesystem;

caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(const std::string& run_dir) {
  coordinator_checkpoint out;
  auto path = run_dir + "/coordinator.json";
  if (!fs::exists(path))
    return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t step = 0, cursor = 0, version = 0;
  if (parser.load(path).get(doc) || doc["step"].get(step) || doc["cursor"].get(cursor)
      || doc["policy_version"].get(version))
    return make_error(errc::invalid_config,
                      path + ": expected {\"step\", \"cursor\", \"policy_version\"} as integers");
  return coordinator_checkpoint{step, cursor, version};
}

caf::expected<void> write_coordinator_checkpoint(const std::string& run_dir,
                                                 const coordinator_checkpoint& checkpoint) {
  json_writer w;
  w.begin_object()
    .field("step", checkpoint.step)
    .field("cursor", checkpoint.cursor)
    .field("policy_version", checkpoint.policy_version)
    .end_object();
  return io::write_file_atomically(fs::path(run_dir) / "coordinator.json", {w.str() + "\n"});
}

} // namespace kbrl
