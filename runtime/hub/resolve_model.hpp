#pragma once
// From "a model" as a person names it to a local model directory (model_files.hpp):
//   - an existing directory is used as it is;
//   - "Org/Name" or "Org/Name@revision" is fetched from the Hugging Face hub into the cache
//     (hub_cache.hpp) and its snapshot directory is returned.
//
// Fetching a revision:
//   1. GET {endpoint}/api/models/{id}/revision/{revision}?blobs=true: the commit (`sha`) and the
//      files (`siblings`: name, size, blob id, LFS SHA-256).
//   2. The files a model needs, top-level only: config.json, generation_config.json,
//      tokenizer*.json, chat_template.jinja / chat_template.json (newer repositories keep the
//      chat template there), model.safetensors.index.json, then the weights: the shards the index
//      names, or model.safetensors. Other formats (.bin, .gguf, .onnx, ...) and extra
//      .safetensors files (originals, adapters) are skipped.
//   3. Each file not yet in snapshots/<commit>/: unless its blob is already cached (by kbrl or
//      Python), GET {endpoint}/{id}/resolve/{commit}/{file} following redirects into
//      blobs/<id>.incomplete, resuming with a Range request after a dropped connection (up to
//      `attempts` tries), under the blob's lock file; the size is checked against the API's
//      size (or Content-Length), the SHA-256 of weight files against their LFS id; then the
//      blob is renamed into place and linked from the snapshot.
//   4. refs/<revision> records the commit, so an offline run finds it later.
// Offline (HF_HUB_OFFLINE=1), or when the hub cannot be reached or answers 5xx, the cached
// snapshot of refs/<revision> is used if it is complete; otherwise the error names what is
// missing. 401/403 (gated or private: set HF_TOKEN), 404 (no such model, revision or file) and
// network failures each give their own message.

#include "runtime/hub/hub_options.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kbrl::hub {

/// One file of a repository as the hub's API lists it.
struct hub_file {
  std::string name;               ///< path inside the repository ("config.json")
  std::optional<uint64_t> size;   ///< bytes, if the API says
  std::string blob_id;            ///< the cache's name for it: LFS SHA-256, else git blob SHA-1
  std::string sha256;             ///< LFS SHA-256 (weights), empty for small files
};

/// A revision of a repository as the API describes it.
struct repo_listing {
  std::string commit;             ///< 40-hex commit the revision points to
  std::vector<hub_file> files;    ///< every file (siblings), in the API's order
};

/// Parses the API's JSON answer for `repo_id`. Fails with errc::io_failure if it is not the
/// expected shape (no 40-hex `sha`, no `siblings` array of objects with `rfilename`).
caf::expected<repo_listing> parse_repo_listing(const std::string& json, const std::string& repo_id);

/// The files a model directory needs from `listing`, in download order: config.json,
/// generation_config.json, tokenizer*.json, chat_template.* and the index (those present), then
/// model.safetensors when there is no index. The shards an index names are added by
/// download_model() once the index is read. Fails with errc::not_supported if there is no
/// config.json, or neither model.safetensors nor model.safetensors.index.json (naming the weight
/// files the repository has instead).
caf::expected<std::vector<hub_file>> select_model_files(const repo_listing& listing,
                                                        const std::string& repo_id);

/// What download_model() did.
struct resolved_model {
  std::filesystem::path dir;             ///< the snapshot directory with the files
  std::string commit;                    ///< the commit it holds
  std::vector<std::string> files;        ///< file names in it that were asked for
  std::vector<std::string> downloaded;   ///< of those, the ones fetched over the network now
  bool offline = false;                  ///< true if the hub was not asked (or not reachable)
};

/// Makes the model `ref` available in the cache and says where (see the top of this file).
/// Fails with errc::invalid_argument for a hub option that makes no sense (no cache_dir,
/// attempts < 1), errc::io_failure for refused access, missing models or files, network errors
/// and corrupt downloads, errc::not_supported for a repository without safetensors weights.
caf::expected<resolved_model> download_model(const model_ref& ref, const hub_options& options);

/// `path_or_id` as a local model directory: an existing directory as it is (it must hold
/// config.json and weights), else a hub id fetched with download_model(). Fails with
/// errc::io_failure for a directory that lacks files or a path that does not exist, and with the
/// errors of download_model().
caf::expected<std::filesystem::path> resolve_model(const std::string& path_or_id,
                                                   const hub_options& options);

} // namespace kbrl::hub
