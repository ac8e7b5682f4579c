#include "runtime/episode/coordinator_checkpoint.hpp"

#include "messages/errors.hpp"
#include "runtime/io/json_writer.hpp"

#include <simdjson.h>

namespace kbrl {

namespace {
constexpr const char* file_name = "coordinator.json";
}

caf::expected<coordinator_checkpoint> parse_coordinator_checkpoint(const std::string& text,
                                                                   const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t step = 0, cursor = 0, version = 0;
  if (parser.parse(text).get(doc) || doc["step"].get(step) || doc["cursor"].get(cursor)
      || doc["policy_version"].get(version))
    return make_error(errc::invalid_config,
                      path + ": expected {\"step\", \"cursor\", \"policy_version\"} as integers");
  return coordinator_checkpoint{step, cursor, version};
}

caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(io::file_store& files) {
  auto text = files.read(file_name);
  if (!text)
    return text.error();
  if (!*text)
    return coordinator_checkpoint{};
  return parse_coordinator_checkpoint(**text, files.path_of(file_name));
}

caf::expected<void> write_coordinator_checkpoint(io::file_store& files,
                                                 const coordinator_checkpoint& checkpoint) {
  json_writer w;
  w.begin_object()
    .field("step", checkpoint.step)
    .field("cursor", checkpoint.cursor)
    .field("policy_version", checkpoint.policy_version)
    .end_object();
  return files.replace(file_name, w.str() + "\n");
}

caf::expected<coordinator_checkpoint> read_coordinator_checkpoint(const std::string& run_dir) {
  return read_coordinator_checkpoint(*io::directory_store(run_dir));
}

caf::expected<void> write_coordinator_checkpoint(const std::string& run_dir,
                                                 const coordinator_checkpoint& checkpoint) {
  return write_coordinator_checkpoint(*io::directory_store(run_dir), checkpoint);
}

} // namespace kbrl
