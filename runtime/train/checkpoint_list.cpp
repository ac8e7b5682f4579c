// checkpoints.jsonl: the list of a learner's checkpoints (checkpoint_list.hpp). No torch: the
// run directory's summary and kbrl-eval read it too.
#include "runtime/train/checkpoint_list.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"

#include <simdjson.h>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace kbrl::train {

namespace fs = std::filesystem;

namespace {

caf::error io_error(const fs::path& path, const std::string& what) {
  return make_error(errc::io_failure, path.string() + ": " + what);
}

std::string entry_line(const checkpoint_entry& e) {
  json_writer w;
  w.begin_object();
  w.field("step", e.step);
  w.field("dir", e.dir);
  w.field("unix_ms", e.unix_ms);
  w.field("policy_version", e.cursor.policy_version);
  write_data_cursor(w, e.cursor);
  w.end_object();
  return w.str() + "\n";
}

caf::expected<checkpoint_entry> parse_entry(simdjson::dom::parser& parser, std::string_view line,
                                            const std::string& where) {
  simdjson::dom::object obj;
  if (parser.parse(line.data(), line.size()).get(obj))
    return make_error(errc::invalid_config, where + ": not a JSON object");
  checkpoint_entry e;
  std::string_view dir;
  if (obj["step"].get(e.step) || e.step < 0)
    return make_error(errc::invalid_config, where + ": step: expected an integer >= 0");
  if (obj["dir"].get(dir) || dir.empty() || dir.find('/') != std::string_view::npos
      || dir == "." || dir == "..")
    return make_error(errc::invalid_config, where + ": dir: expected a directory name");
  e.dir = std::string(dir);
  if (obj["unix_ms"].get(e.unix_ms))
    e.unix_ms = 0;
  auto cursor = read_data_cursor(obj, where);
  if (!cursor)
    return cursor.error();
  e.cursor = *cursor;
  return e;
}

/// Appends `line` to the list, durably; a torn previous line gets its own line ended first.
caf::expected<void> append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error(path, std::string("cannot open for appending: ") + std::strerror(errno));
  std::string text = line;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, size - 1) == 1 && last != '\n')
      text = "\n" + text;
  }
  std::string_view rest = text;
  while (!rest.empty()) {
    auto n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return io_error(path, std::string("write failed: ") + std::strerror(err));
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  const int synced = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (synced != 0)
    return io_error(path, std::string("sync failed: ") + std::strerror(err));
  return {};
}

} // namespace

void write_data_cursor(json_writer& w, const data_cursor& c) {
  w.key("cursor").begin_object();
  w.field("batches_trained", c.batches_trained);
  w.field("last_batch_id", c.last_batch_id);
  w.field("last_coordinator_step", c.last_coordinator_step);
  w.field("policy_version", c.policy_version);
  w.end_object();
}

caf::expected<data_cursor> read_data_cursor(simdjson::dom::object obj, const std::string& where) {
  simdjson::dom::object c;
  if (obj["cursor"].get(c))
    return make_error(errc::invalid_config, where + ": cursor: expected an object");
  data_cursor out;
  struct field {
    const char* key;
    uint64_t* value;
  };
  for (auto f : {field{"batches_trained", &out.batches_trained},
                 field{"last_batch_id", &out.last_batch_id},
                 field{"last_coordinator_step", &out.last_coordinator_step},
                 field{"policy_version", &out.policy_version}})
    if (c[f.key].get(*f.value))
      return make_error(errc::invalid_config,
                        where + ": cursor." + f.key + ": expected an unsigned integer");
  return out;
}

caf::expected<void> append_checkpoint_entry(const fs::path& root, const checkpoint_entry& entry) {
  return append_line(root / checkpoint_list_file, entry_line(entry));
}

caf::expected<std::vector<checkpoint_entry>> list_checkpoints(const fs::path& root) {
  const auto path = root / checkpoint_list_file;
  std::vector<checkpoint_entry> out;
  if (!fs::exists(path))
    return out;
  auto text = io::read_text_file(path);
  if (!text)
    return text.error();
  std::vector<std::string_view> lines;
  std::string_view all = *text;
  while (!all.empty()) {
    const auto end = all.find('\n');
    lines.push_back(all.substr(0, end));
    all = end == std::string_view::npos ? std::string_view{} : all.substr(end + 1);
  }
  simdjson::dom::parser parser;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    auto e = parse_entry(parser, lines[i], path.string() + ":" + std::to_string(i + 1));
    if (!e) {
      // A write cut short by a crash leaves a line without its closing brace (append_line ends
      // it before the next entry): skipped. Anything else is not ours to ignore.
      const auto end = lines[i].find_last_not_of(" \t\r");
      if (lines[i][end] != '}')
        continue;
      return e.error();
    }
    out.push_back(std::move(*e));
  }
  return out;
}

caf::expected<std::optional<checkpoint_entry>> latest_checkpoint(const fs::path& root) {
  auto listed = list_checkpoints(root);
  if (!listed)
    return listed.error();
  for (auto it = listed->rbegin(); it != listed->rend(); ++it)
    if (fs::exists(root / it->dir / trainer_state_file))
      return std::optional<checkpoint_entry>(*it);
  return std::optional<checkpoint_entry>{};
}

} // namespace kbrl::train
