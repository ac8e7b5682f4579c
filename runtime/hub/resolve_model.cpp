#include "runtime/hub/resolve_model.hpp"

#include "messages/errors.hpp"
#include "runtime/hub/download_progress.hpp"
#include "runtime/hub/hub_cache.hpp"
#include "runtime/hub/hub_http.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/hash.hpp"
#include "runtime/io/text.hpp"
#include "runtime/model/model_files.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kbrl::hub {

namespace fs = std::filesystem;

namespace {

// ---- small helpers -------------------------------------------------------------------------------

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_hex(const std::string& s, std::size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c));
         });
}

/// A blob id usable as a file name: letters, digits, '-' and '_' only.
bool is_safe_blob_id(const std::string& id) {
  return !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
         });
}

/// A file name from the API that may become a path in the snapshot: top level, no tricks.
bool is_top_level_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != ".."
         && name.find('\\') == std::string::npos;
}

/// An ETag header's value without W/ and quotes.
std::string bare_etag(std::string etag) {
  if (starts_with(etag, "W/"))
    etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  return etag;
}

std::optional<uint64_t> parse_size(const std::string& text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), ::isdigit))
    return std::nullopt;
  return std::stoull(text);
}

/// The whole size of the file a 200 or 206 reply carries: Content-Range's "/T" or
/// Content-Length.
std::optional<uint64_t> reply_total(const http_reply& r) {
  if (r.status == 206) {
    const auto range = r.header("content-range");
    const auto slash = range.rfind('/');
    return slash == std::string::npos ? std::nullopt : parse_size(range.substr(slash + 1));
  }
  return parse_size(r.header("content-length"));
}

uint64_t size_of_fd(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

caf::expected<std::string> sha256_of(const fs::path& path) {
  auto sum = io::sha256_file(path.string());
  if (!sum)
    return make_error(errc::io_failure, "cannot read " + path.string() + " to check it");
  return sum;
}

bool file_has_size(const fs::path& path, std::optional<uint64_t> size) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return false;
  return !size || fs::file_size(path, ec) == *size;
}

/// The text of a kbrl error, without the "io_failure: " that describe() puts first.
std::string text_of(const caf::error& err) {
  if (err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return describe(err);
}

// ---- the error messages for HTTP answers ---------------------------------------------------------

/// What a request was for, to word its errors.
struct request_context {
  const hub_options* options;
  const model_ref* ref;
  std::string file;   ///< empty for the API request
  std::string url;
};

std::string server_says(const http_reply& r) {
  auto message = r.header("x-error-message");
  if (message.empty() && !r.body.empty() && r.body.size() < 300
      && r.body.find('<') == std::string::npos)
    message = r.body; // a short plain-text error page
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r'))
    message.pop_back();
  return message.empty() ? std::string{} : " (the hub says: " + message + ")";
}

caf::error status_error(const http_reply& r, const request_context& c) {
  const std::string repo = c.ref->repo_id;
  const std::string what = c.file.empty() ? "model " + to_string(*c.ref)
                                          : "file " + c.file + " of " + to_string(*c.ref);
  const std::string code = r.header("x-error-code");
  const std::string status = "HTTP " + std::to_string(r.status);
  if (r.status == 401 || r.status == 403) {
    const bool gated = code == "GatedRepo" || r.header("x-error-message").find("gated") != std::string::npos;
    std::string advice =
      c.options->token.empty()
        ? "set HF_TOKEN to an access token of an account that may read it (" + c.options->endpoint
            + "/settings/tokens)"
        : "the token given (HF_TOKEN or the token file) was refused or lacks access; check it";
    if (gated)
      return make_error(errc::io_failure,
                        "access to " + what + " was refused (" + status + "): " + repo
                          + " is a gated model; accept its terms at " + c.options->endpoint + "/"
                          + repo + " and " + advice + server_says(r));
    return make_error(errc::io_failure, "access to " + what + " was refused (" + status
                                          + "): the model is private or gated, or does not exist; "
                                          + advice + server_says(r));
  }
  if (r.status == 404) {
    if (code == "RevisionNotFound")
      return make_error(errc::io_failure, "revision '" + c.ref->revision + "' of " + repo
                                            + " does not exist on " + c.options->endpoint + " ("
                                            + status + ")" + server_says(r));
    if (code == "EntryNotFound" || (!c.file.empty() && code != "RepoNotFound"))
      return make_error(errc::io_failure, "file " + c.file + " does not exist in "
                                            + to_string(*c.ref) + " on " + c.options->endpoint
                                            + " (" + status + ")" + server_says(r));
    return make_error(errc::io_failure, "no model " + to_string(*c.ref) + " on "
                                          + c.options->endpoint + " (" + status
                                          + "): check the id and revision" + server_says(r));
  }
  return make_error(errc::io_failure, "the hub answered " + status + " for " + what + " ("
                                        + c.url + ")" + server_says(r));
}

caf::error network_error(const http_reply& r, const request_context& c, int tries) {
  const std::string what = c.file.empty() ? "model " + to_string(*c.ref)
                                          : "file " + c.file + " of " + to_string(*c.ref);
  return make_error(errc::io_failure,
                    "cannot fetch " + what + " from " + c.options->endpoint + " after "
                      + std::to_string(tries) + (tries == 1 ? " try" : " tries") + ": "
                      + r.transport_error + " (" + c.url
                      + "); check the network, or set HF_HUB_OFFLINE=1 to use the cache only");
}

/// Statuses worth another try: the server's trouble, not ours.
bool retryable_status(long status) { return status == 429 || status >= 500; }

void pause_before_retry(const hub_options& o, int attempt) {
  const double seconds = o.retry_backoff_s * (1 << std::min(attempt - 1, 6));
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// ---- listing and choosing files ------------------------------------------------------------------

std::string api_url(const hub_options& o, const model_ref& ref) {
  return o.endpoint + "/api/models/" + ref.repo_id + "/revision/" + url_escape(ref.revision)
         + "?blobs=true";
}

std::string resolve_url(const hub_options& o, const model_ref& ref, const std::string& commit,
                        const std::string& file) {
  return o.endpoint + "/" + ref.repo_id + "/resolve/" + commit + "/" + url_escape(file);
}

/// The shard names model.safetensors.index.json lists, sorted and distinct.
caf::expected<std::vector<std::string>> shards_of(const fs::path& index) {
  auto text = io::read_text_file(index);
  if (!text)
    return text.error();
  simdjson::dom::parser parser;
  simdjson::dom::object weight_map;
  if (parser.parse(*text)["weight_map"].get(weight_map))
    return make_error(errc::io_failure,
                      index.string() + ": expected an object \"weight_map\" of tensor -> shard");
  std::set<std::string> shards;
  for (auto field : weight_map) {
    std::string_view shard;
    if (field.value.get(shard) || !is_top_level_name(std::string(shard)))
      return make_error(errc::io_failure, index.string() + ": weight_map['"
                                            + std::string(field.key)
                                            + "'] is not a file name beside the index");
    shards.emplace(shard);
  }
  return std::vector<std::string>(shards.begin(), shards.end());
}

// ---- one file ------------------------------------------------------------------------------------

/// Fetches one file into blobs/ (unless there) and links it from the snapshot. Sets
/// `downloaded` if bytes came over the network.
caf::expected<void> fetch_file(hub_http& http, const repo_cache& cache, const hub_options& o,
                               const model_ref& ref, const std::string& commit, hub_file file,
                               bool& downloaded) {
  downloaded = false;
  if (file_has_size(cache.snapshot_file(commit, file.name), file.size))
    return caf::unit;
  request_context ctx{&o, &ref, file.name, resolve_url(o, ref, commit, file.name)};

  if (file.blob_id.empty()) { // the API did not say: ask the file's own metadata
    http_reply r;
    for (int attempt = 1;; ++attempt) {
      r = http.head(ctx.url);
      const bool failed = !r.transport_error.empty() ? r.retryable : retryable_status(r.status);
      if (!failed || attempt >= o.attempts)
        break;
      pause_before_retry(o, attempt);
    }
    if (!r.transport_error.empty())
      return network_error(r, ctx, o.attempts);
    if (r.status >= 400)
      return status_error(r, ctx);
    const auto linked = r.header("x-linked-etag");
    file.blob_id = bare_etag(linked.empty() ? r.header("etag") : linked);
    if (!file.size) {
      const auto linked_size = r.header("x-linked-size");
      file.size = parse_size(linked_size.empty() ? r.header("content-length") : linked_size);
    }
    if (!linked.empty() && is_hex(file.blob_id, 64))
      file.sha256 = file.blob_id;
  }
  if (!is_safe_blob_id(file.blob_id))
    return make_error(errc::io_failure, "the hub gave file " + file.name + " of "
                                          + to_string(ref) + " the unusable id '" + file.blob_id
                                          + "'");

  auto lock = file_lock::acquire(cache.lock_file(file.blob_id));
  if (!lock)
    return lock.error();
  const auto blob = cache.blob(file.blob_id);
  if (file_has_size(blob, file.size)) // another process, or a Python user, fetched it already
    return cache.link_snapshot(commit, file.name, file.blob_id);

  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  const auto partial = cache.incomplete_blob(file.blob_id);
  int fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(errc::io_failure,
                      "cannot open " + partial.string() + ": " + std::strerror(errno));
  uint64_t have = size_of_fd(fd);
  if (file.size && have > *file.size) { // longer than the file: not a prefix of it
    if (::ftruncate(fd, 0) != 0) {
      ::close(fd);
      return make_error(errc::io_failure, "cannot truncate " + partial.string());
    }
    have = 0;
  }

  const std::string label = ref.repo_id + "/" + file.name;
  download_progress progress(o.progress, label, file.size.value_or(0));
  progress.update(have, file.size.value_or(0));
  std::optional<uint64_t> expected = file.size;
  caf::error failure;
  for (int attempt = 1;; ++attempt) {
    if (expected && have == *expected)
      break; // complete (a previous run stopped after the last byte)
    const auto r = http.download(ctx.url, fd, have, [&](uint64_t done, uint64_t total) {
      progress.update(done, expected.value_or(total));
    });
    downloaded = true;
    have = size_of_fd(fd);
    bool retry = false;
    if (!r.transport_error.empty()) {
      retry = r.retryable;
      failure = network_error(r, ctx, attempt);
    } else if (r.status == 416) { // our partial file does not fit the server's: start over
      retry = ::ftruncate(fd, 0) == 0;
      have = 0;
      failure = make_error(errc::io_failure, "the hub refused to resume " + label
                                               + " (HTTP 416) " + std::to_string(attempt)
                                               + " times");
    } else if (r.status == 200 || r.status == 206) {
      if (!expected)
        expected = reply_total(r);
      if (!expected || have == *expected) {
        failure = caf::error{};
        break;
      }
      retry = have < *expected;
      failure = make_error(errc::io_failure, "download of " + label + " ended at "
                                               + std::to_string(have) + " of "
                                               + std::to_string(*expected) + " bytes");
    } else {
      failure = status_error(r, ctx);
      retry = retryable_status(r.status);
    }
    if (!retry || attempt >= o.attempts)
      break;
    spdlog::warn("{}; trying again ({} of {}), resuming at {} bytes", text_of(failure),
                 attempt + 1, o.attempts, have);
    pause_before_retry(o, attempt);
  }
  ::close(fd);
  progress.finish(!failure);
  if (failure) {
    if (have == 0)
      fs::remove(partial, ec); // nothing to resume
    return failure;            // else the partial file stays: the next run resumes it
  }

  if (expected && have != *expected) {
    fs::remove(partial, ec);
    return make_error(errc::io_failure, "download of " + label + " has " + std::to_string(have)
                                          + " bytes, the hub said " + std::to_string(*expected));
  }
  if (o.verify_sha256 && is_hex(file.sha256, 64)) {
    auto sum = sha256_of(partial);
    if (!sum)
      return sum.error();
    if (*sum != file.sha256) {
      fs::remove(partial, ec);
      return make_error(errc::io_failure, "download of " + label + " is corrupt: its SHA-256 is "
                                            + *sum + ", the hub says " + file.sha256
                                            + "; the partial file was removed, try again");
    }
  }
  fs::rename(partial, blob, ec);
  if (ec)
    return make_error(errc::io_failure, "cannot move " + partial.string() + " to "
                                          + blob.string() + ": " + ec.message());
  return cache.link_snapshot(commit, file.name, file.blob_id);
}

// ---- the cache alone ------------------------------------------------------------------------------

/// The complete cached snapshot of `ref`, or an error saying what is missing; `why` says why
/// the hub was not asked.
caf::expected<resolved_model> from_cache(const repo_cache& cache, const hub_options& o,
                                         const model_ref& ref, const std::string& why) {
  const auto commit = cache.cached_commit(ref.revision);
  if (!commit)
    return make_error(errc::io_failure,
                      why + ", and the cache " + o.cache_dir.string() + " has no revision '"
                        + ref.revision + "' of " + ref.repo_id + " (no "
                        + (cache.root() / "refs" / ref.revision).string() + ")");
  const auto dir = cache.snapshot_dir(*commit);
  auto missing = model::missing_model_files(dir);
  if (!missing.empty())
    return make_error(errc::io_failure, why + ", and the cached snapshot " + dir.string()
                                          + " of " + to_string(ref) + " lacks " + join(missing));
  resolved_model out;
  out.dir = dir;
  out.commit = *commit;
  out.offline = true;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.files.push_back(it->path().filename().string());
  std::sort(out.files.begin(), out.files.end());
  return out;
}

} // namespace

// ---- the API's answer ----------------------------------------------------------------------------

caf::expected<repo_listing> parse_repo_listing(const std::string& json, const std::string& repo_id) {
  auto bad = [&](const std::string& what) {
    std::string shown = json.substr(0, 200);
    return make_error(errc::io_failure, "the hub's description of " + repo_id
                                          + " is not what kbrl expects: " + what + " (got: "
                                          + shown + (json.size() > 200 ? "..." : "") + ")");
  };
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc))
    return bad("not JSON");
  repo_listing out;
  std::string_view sha;
  if (doc["sha"].get(sha) || !is_commit_hash(std::string(sha)))
    return bad("no 40-hex commit in \"sha\"");
  out.commit = std::string(sha);
  simdjson::dom::array siblings;
  if (doc["siblings"].get(siblings))
    return bad("no \"siblings\" array");
  for (auto s : siblings) {
    hub_file f;
    std::string_view name;
    if (s["rfilename"].get(name))
      return bad("a sibling without \"rfilename\"");
    f.name = std::string(name);
    uint64_t size = 0;
    if (!s["size"].get(size))
      f.size = size;
    std::string_view text;
    if (!s["blobId"].get(text))
      f.blob_id = std::string(text);
    simdjson::dom::object lfs;
    if (!s["lfs"].get(lfs)) {
      if (!lfs["sha256"].get(text)) {
        f.sha256 = std::string(text);
        f.blob_id = f.sha256; // huggingface_hub names LFS blobs by their SHA-256
      }
      if (!lfs["size"].get(size))
        f.size = size;
    }
    out.files.push_back(std::move(f));
  }
  return out;
}

caf::expected<std::vector<hub_file>> select_model_files(const repo_listing& listing,
                                                        const std::string& repo_id) {
  std::vector<hub_file> out;
  const hub_file* single = nullptr;
  const hub_file* index = nullptr;
  std::vector<std::string> other_weights;
  for (const auto& f : listing.files) {
    if (!is_top_level_name(f.name))
      continue;
    if (f.name == "config.json" || f.name == "generation_config.json"
        || (starts_with(f.name, "tokenizer") && ends_with(f.name, ".json"))
        || f.name == "chat_template.jinja" || f.name == "chat_template.json")
      out.push_back(f);
    else if (f.name == model::safetensors_index_name)
      index = &f;
    else if (f.name == model::safetensors_single_name)
      single = &f;
    else if (ends_with(f.name, ".bin") || ends_with(f.name, ".pt") || ends_with(f.name, ".pth")
             || ends_with(f.name, ".gguf") || ends_with(f.name, ".ckpt")
             || ends_with(f.name, ".h5") || ends_with(f.name, ".msgpack")
             || ends_with(f.name, ".safetensors"))
      other_weights.push_back(f.name);
  }
  // config.json first: it is what a half-fetched directory is judged by.
  std::stable_sort(out.begin(), out.end(), [](const hub_file& a, const hub_file& b) {
    return (a.name == "config.json") > (b.name == "config.json");
  });
  if (out.empty() || out.front().name != "config.json")
    return make_error(errc::not_supported, repo_id + " has no config.json: not a transformers "
                                                     "model kbrl can run");
  if (index != nullptr)
    out.push_back(*index);
  else if (single != nullptr)
    out.push_back(*single);
  else
    return make_error(errc::not_supported,
                      repo_id + " has no safetensors weights (model.safetensors or "
                        + model::safetensors_index_name + "); kbrl reads only safetensors"
                        + (other_weights.empty() ? std::string{}
                                                 : "; it has " + join(other_weights)));
  return out;
}

// ---- the whole model -----------------------------------------------------------------------------

caf::expected<resolved_model> download_model(const model_ref& ref, const hub_options& o) {
  if (o.cache_dir.empty())
    return make_error(errc::invalid_argument, "no hub cache directory is set (HF_HUB_CACHE)");
  if (o.endpoint.rfind("http://", 0) != 0 && o.endpoint.rfind("https://", 0) != 0)
    return make_error(errc::invalid_argument, "the hub endpoint must be an http:// or https:// "
                                              "URL (HF_ENDPOINT), got '" + o.endpoint + "'");
  if (std::any_of(o.token.begin(), o.token.end(),
                  [](unsigned char c) { return std::iscntrl(c) || c == ' '; }))
    return make_error(errc::invalid_argument, "the hub token (HF_TOKEN or the token file) "
                                              "contains spaces or control characters");
  if (o.attempts < 1)
    return make_error(errc::invalid_argument,
                      "hub attempts must be >= 1, got " + std::to_string(o.attempts));
  const repo_cache cache(o.cache_dir, ref.repo_id);
  if (o.offline)
    return from_cache(cache, o, ref, "HF_HUB_OFFLINE is set");

  hub_http http(o);
  request_context ctx{&o, &ref, "", api_url(o, ref)};
  http_reply r;
  for (int attempt = 1;; ++attempt) {
    r = http.get(ctx.url);
    const bool failed = !r.transport_error.empty() ? r.retryable : retryable_status(r.status);
    if (!failed || attempt >= o.attempts)
      break;
    pause_before_retry(o, attempt);
  }
  if (!r.transport_error.empty() || retryable_status(r.status)) {
    // The hub is unreachable or in trouble: a complete cached copy still serves.
    const auto err = r.transport_error.empty() ? status_error(r, ctx) : network_error(r, ctx, o.attempts);
    auto cached = from_cache(cache, o, ref, text_of(err));
    if (cached)
      spdlog::warn("{}; using the cached snapshot {}", text_of(err), cached->dir.string());
    return cached;
  }
  if (r.status != 200)
    return status_error(r, ctx);
  auto listing = parse_repo_listing(r.body, ref.repo_id);
  if (!listing)
    return listing.error();
  auto wanted = select_model_files(*listing, ref.repo_id);
  if (!wanted)
    return wanted.error();

  resolved_model out;
  out.commit = listing->commit;
  out.dir = cache.snapshot_dir(listing->commit);
  auto fetch = [&](const hub_file& f) -> caf::expected<void> {
    bool downloaded = false;
    auto ok = fetch_file(http, cache, o, ref, listing->commit, f, downloaded);
    if (!ok)
      return ok.error();
    out.files.push_back(f.name);
    if (downloaded)
      out.downloaded.push_back(f.name);
    return caf::unit;
  };
  for (const auto& f : *wanted)
    if (auto ok = fetch(f); !ok)
      return ok.error();
  if (wanted->back().name == model::safetensors_index_name) {
    auto shards = shards_of(out.dir / model::safetensors_index_name);
    if (!shards)
      return shards.error();
    for (const auto& shard : *shards) {
      auto it = std::find_if(listing->files.begin(), listing->files.end(),
                             [&](const hub_file& f) { return f.name == shard; });
      if (it == listing->files.end())
        return make_error(errc::io_failure, "the index of " + to_string(ref) + " names shard "
                                              + shard + ", which the repository does not have");
      if (auto ok = fetch(*it); !ok)
        return ok.error();
    }
  }
  if (auto ok = cache.write_ref(ref.revision, listing->commit); !ok)
    return ok.error();
  return out;
}

caf::expected<fs::path> resolve_model(const std::string& path_or_id, const hub_options& options) {
  std::error_code ec;
  if (fs::is_directory(path_or_id, ec)) {
    auto missing = model::missing_model_files(path_or_id);
    if (!missing.empty())
      return make_error(errc::io_failure,
                        "model directory " + path_or_id + " lacks " + join(missing));
    return fs::path(path_or_id);
  }
  if (!looks_like_model_id(path_or_id))
    return make_error(errc::io_failure, "no model directory " + path_or_id
                                          + " (and it is not a hub id like Org/Name)");
  auto ref = parse_model_ref(path_or_id);
  if (!ref)
    return ref.error();
  auto got = download_model(*ref, options);
  if (!got) {
    // "models/foo" may have been meant as a directory: say both.
    if (path_or_id.find('/') != std::string::npos)
      return make_error(static_cast<errc>(got.error().code()),
                        text_of(got.error()) + " (no local directory " + path_or_id
                          + " exists either)");
    return got.error();
  }
  return got->dir;
}

} // namespace kbrl::hub
