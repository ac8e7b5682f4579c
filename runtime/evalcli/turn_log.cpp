#include "runtime/evalcli/turn_log.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/verdict_codec.hpp"
#include "runtime/eval/verdict_format.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/report/results_json.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <simdjson.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace kbrl::evalcli {

namespace {

namespace fs = std::filesystem;
using simdjson::dom::element;

caf::expected<eval_result> verdict_of(element v, const std::string& where) {
  eval_result r;
  if (!v.is_object())
    return make_error(errc::invalid_argument, where + ": \"verdict\": expected an object");
  std::string_view error;
  if (v["error"].get(error))
    error = {}; // missing or not a string: no category
  auto category = eval::eval_error_named(error);
  if (!category)
    return make_error(errc::invalid_argument, where + ": verdict \"error\": \""
                                                + std::string(error)
                                                + "\" is not an error category");
  r.error = *category;
  // The one verdict codec, shared with the engine's reading of the worker's answers.
  eval::read_verdict_fields(v, r);
  eval::read_verdict_identity(v, r);
  return r;
}

} // namespace

std::string turn_log_path(const std::string& output_dir, const std::string& problem_id,
                          int32_t sample) {
  return (fs::path(output_dir) / "turns" / problem_id
          / ("sample_" + std::to_string(sample) + ".jsonl"))
    .string();
}

caf::expected<eval_result> parse_verdict(std::string_view json, const std::string& where) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return make_error(errc::invalid_argument,
                      where + ": not readable as JSON: " + simdjson::error_message(err));
  return verdict_of(doc, where);
}

caf::expected<std::vector<logged_turn>> read_turn_log(const std::string& path) {
  std::vector<logged_turn> out;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return out; // no turn finished yet
  simdjson::dom::parser parser;
  std::string line;
  size_t number_of_line = 0;
  while (std::getline(in, line)) {
    ++number_of_line;
    auto where = path + ":" + std::to_string(number_of_line);
    // A line without its closing brace was cut short by a crash: the turn runs again.
    auto last = line.find_last_not_of(" \t\r");
    if (last == std::string::npos || line[last] != '}')
      break;
    element doc;
    if (auto err = parser.parse(line).get(doc))
      return make_error(errc::invalid_argument,
                        where + ": not readable as JSON: " + simdjson::error_message(err)
                          + " (delete the file to run the sample's turns again)");
    int64_t turn = -1;
    if (doc["turn"].get(turn) || turn < 0)
      return make_error(errc::invalid_argument, where + ": \"turn\": expected an integer >= 0");
    if (turn != static_cast<int64_t>(out.size()))
      break; // not the next turn: the episode goes on from the turns before it
    logged_turn t;
    t.turn = static_cast<int32_t>(turn);
    std::string_view completion;
    if (doc["completion"].get(completion))
      return make_error(errc::invalid_argument, where + ": \"completion\": expected a string");
    t.completion = std::string(completion);
    if (doc["evaluated"].get(t.evaluated))
      return make_error(errc::invalid_argument, where + ": \"evaluated\": expected true or false");
    if (t.evaluated) {
      element v;
      if (doc["verdict"].get(v))
        return make_error(errc::invalid_argument, where + ": \"verdict\": missing");
      auto verdict = verdict_of(v, where);
      if (!verdict)
        return verdict.error();
      t.verdict = std::move(*verdict);
    }
    element rec;
    if (doc["record"].get(rec))
      return make_error(errc::invalid_argument, where + ": \"record\": missing");
    auto record = report::parse_record(simdjson::minify(rec), where + ": record");
    if (!record)
      return record.error();
    t.record = std::move(*record);
    out.push_back(std::move(t));
  }
  return out;
}

caf::expected<void> append_turn(const std::string& path, const logged_turn& t) {
  std::string completion;
  append_json_string(completion, t.completion);
  json_writer record;
  report::write_record(record, t.record);
  std::string line = "{\"turn\":" + std::to_string(t.turn) + ",\"completion\":" + completion
                     + ",\"evaluated\":" + (t.evaluated ? "true" : "false")
                     + ",\"verdict\":" + (t.evaluated ? eval::verdict_json(t.verdict) : "null")
                     + ",\"record\":" + record.str() + "}";
  // Invalid UTF-8 (in a completion or an error excerpt) would make the line unreadable.
  line = tok::repair_utf8(line) + "\n";
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(errc::io_failure, path + ": cannot open for appending: "
                                          + std::strerror(errno));
  auto written = ::write(fd, line.data(), line.size());
  int saved = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size()))
    return make_error(errc::io_failure, path + ": cannot append a turn: "
                                          + std::strerror(written < 0 ? saved : EIO));
  return {};
}

} // namespace kbrl::evalcli
