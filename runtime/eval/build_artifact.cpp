#include "runtime/eval/build_artifact.hpp"

#include "messages/errors.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/io/file_io.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

namespace kbrl::eval {

namespace fs = std::filesystem;

std::string build_dir_for(const std::string& extensions_dir, const std::string& candidate_source) {
  return extensions_dir + "/" + source_hash(candidate_source);
}

namespace {

bool is_record(const fs::path& p) { return p.filename() == library_record_name; }
bool is_library(const fs::path& p) { return p.extension() == ".so"; }

/// The library a record names, or "" when the record does not name a plain file name.
std::string library_of(const std::string& record_text) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view library;
  if (parser.parse(record_text).get(doc) || doc["library"].get(library))
    return "";
  fs::path p{std::string(library)};
  if (p.has_parent_path() || !is_library(p))
    return "";
  return std::string(library);
}

/// A path from another node, relative and inside the folder, or an empty path.
fs::path safe_relative(const std::string& text) {
  fs::path p{text};
  if (text.empty() || p.is_absolute())
    return {};
  for (auto& part : p)
    if (part == ".." || part == "." || part.empty())
      return {};
  return p;
}

} // namespace

caf::expected<std::vector<build_file>> collect_build_files(const std::string& build_dir) {
  std::vector<build_file> out;
  std::error_code ec;
  if (!fs::is_directory(build_dir, ec))
    return out;
  uint64_t total = 0;
  auto add = [&](const fs::path& file) -> caf::expected<void> {
    auto bytes = io::read_text_file(file);
    if (!bytes)
      return bytes.error();
    total += bytes->size();
    if (total > max_build_files_bytes)
      return make_error(errc::io_failure, "the build in " + build_dir + " is larger than "
                                            + std::to_string(max_build_files_bytes >> 20)
                                            + " MiB");
    out.push_back({fs::relative(file, build_dir).string(), std::move(*bytes)});
    return {};
  };
  std::vector<fs::path> records;
  for (auto it = fs::recursive_directory_iterator(build_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && is_record(it->path()))
      records.push_back(it->path());
  if (ec)
    return make_error(errc::io_failure, "cannot list " + build_dir + ": " + ec.message());
  std::sort(records.begin(), records.end());
  for (auto& record : records) {
    auto text = io::read_text_file(record);
    if (!text)
      return text.error();
    auto library = library_of(*text);
    if (library.empty() || !fs::is_regular_file(record.parent_path() / library, ec))
      continue; // a record without its library: nothing usable to send
    if (auto ok = add(record.parent_path() / library); !ok)
      return ok.error();
    if (auto ok = add(record); !ok)
      return ok.error();
  }
  return out;
}

caf::expected<size_t> install_build_files(const std::string& build_dir,
                                          const std::vector<build_file>& files) {
  uint64_t total = 0;
  std::vector<std::pair<fs::path, const build_file*>> planned;
  for (auto& f : files) {
    auto rel = safe_relative(f.path);
    if (rel.empty() || !(is_record(rel) || is_library(rel)))
      return make_error(errc::invalid_argument,
                        "a build file at \"" + f.path
                          + "\": expected a relative path inside the build folder to a "
                          + library_record_name + " or a .so library");
    total += f.bytes.size();
    if (total > max_build_files_bytes)
      return make_error(errc::invalid_argument,
                        "build files larger than " + std::to_string(max_build_files_bytes >> 20)
                          + " MiB");
    planned.emplace_back(fs::path(build_dir) / rel, &f);
  }
  // Libraries first: a record is only ever next to the library it names.
  std::stable_sort(planned.begin(), planned.end(),
                   [](auto& a, auto& b) { return !is_record(a.first) && is_record(b.first); });
  // What is written belongs to whoever owns the build cache: as root, the worker runs as user
  // nobody and must be able to write beside these files (torch writes its sources there).
  struct stat cache {};
  const auto cache_dir = fs::path(build_dir).parent_path();
  const bool hand_over = ::stat(cache_dir.c_str(), &cache) == 0 && cache.st_uid != ::geteuid();
  auto give = [&](const fs::path& p) {
    if (hand_over)
      (void)::lchown(p.c_str(), cache.st_uid, cache.st_gid);
  };
  for (auto& [path, file] : planned) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec)
      return make_error(errc::io_failure,
                        "cannot create " + path.parent_path().string() + ": " + ec.message());
    for (auto dir = path.parent_path(); dir.string().size() > cache_dir.string().size();
         dir = dir.parent_path())
      give(dir);
    if (auto ok = io::write_file_atomically(path, {file->bytes}); !ok)
      return ok.error();
    give(path);
  }
  return planned.size();
}

} // namespace kbrl::eval
