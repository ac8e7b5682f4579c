#pragma once
// The safetensors file format (https://huggingface.co/docs/safetensors): reading through a
// memory mapping, and writing.
//
// Layout of a file:
//   bytes 0..7      N, the length of the header, unsigned 64-bit little-endian
//   bytes 8..8+N    the header: a JSON object. Each key names a tensor and maps to
//                   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, offsets in
//                   bytes relative to the data section; the optional key "__metadata__" maps to
//                   an object of string values. Writers pad the header with spaces so that the
//                   data section starts at a multiple of 8.
//   bytes 8+N..     the data section: each tensor's elements, row-major, little-endian.
//
// Every file is checked as a whole when it is opened: a truncated file, a header length past the
// end, offsets that overlap or run past the data, a byte size that does not match shape * dtype
// or an unknown dtype is an error naming the file and the tensor. After open() succeeds, every
// tensor can be read without further checks.

#include "runtime/model/st_dtype.hpp"

#include <ATen/core/Tensor.h>

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbrl::model {

/// The torch scalar type of a dtype (BOOL is torch's kBool, U8 kByte, I8 kChar).
c10::ScalarType to_scalar_type(st_dtype dtype);

/// The dtype of a torch scalar type, or nullopt for types the format has no name for here
/// (complex, quantised).
std::optional<st_dtype> from_scalar_type(c10::ScalarType type);

/// One tensor as the header describes it.
struct tensor_entry {
  std::string name;
  st_dtype dtype = st_dtype::f32;
  std::vector<int64_t> shape;
  /// Byte range [begin, end) inside the data section.
  uint64_t begin = 0;
  uint64_t end = 0;

  /// Product of the shape (1 for a scalar, shape []).
  uint64_t numel() const;
  /// end - begin.
  uint64_t byte_size() const { return end - begin; }
};

/// "[2, 3]": a shape as error messages and logs write it.
std::string shape_string(const std::vector<int64_t>& shape);

/// How tensor() hands out the data.
enum class tensor_access {
  /// A tensor over the mapped file; it keeps the mapping alive. The mapping is private
  /// (copy-on-write): writing into the tensor changes this process's copy, never the file.
  /// A tensor whose bytes are not aligned to its element size is copied instead. Pages are read
  /// from the file on first touch; the file must not change while mapped (hub blobs and files
  /// written by write_safetensors() never do: they are replaced by rename).
  view,
  /// A tensor with its own memory, independent of the file.
  copy,
};

class mapped_file;

/// One safetensors file, validated and mapped into memory. Copies share the mapping; the mapping
/// lives as long as any copy or any tensor viewing it.
class safetensors_file {
public:
  /// Maps and validates the file at `path`. Fails with errc::io_failure if it cannot be read,
  /// and with errc::invalid_argument, naming the file and the tensor, if it is not a valid
  /// safetensors file.
  static caf::expected<safetensors_file> open(const std::filesystem::path& path);

  /// The file it was opened from.
  const std::filesystem::path& path() const { return path_; }

  /// The "__metadata__" entries (empty if the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// Every tensor, ordered by its position in the data section.
  const std::vector<tensor_entry>& entries() const { return entries_; }

  /// Every tensor name, sorted.
  std::vector<std::string> names() const;

  /// The tensor called `name`, or nullptr.
  const tensor_entry* find(const std::string& name) const;

  /// The raw bytes of tensor `name` (little-endian elements). Fails with errc::invalid_argument
  /// naming the file and tensor if there is none of that name.
  caf::expected<std::string_view> bytes(const std::string& name) const;

  /// Tensor `name` as a CPU torch tensor of its dtype and shape. Fails like bytes().
  caf::expected<at::Tensor> tensor(const std::string& name,
                                   tensor_access access = tensor_access::view) const;

private:
  std::filesystem::path path_;
  std::shared_ptr<const mapped_file> mapping_;
  const unsigned char* data_ = nullptr; ///< start of the data section inside the mapping
  std::map<std::string, std::string> metadata_;
  std::vector<tensor_entry> entries_;
  std::map<std::string, std::size_t> index_; ///< name -> position in entries_
};

/// A tensor handed to write_safetensors(): its bytes are borrowed, not copied, and must stay
/// valid during the call.
struct tensor_bytes {
  std::string name;
  st_dtype dtype = st_dtype::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::size_t size = 0; ///< bytes; must equal numel * element_size
};

/// Writes a safetensors file at `path` atomically: into a temporary file beside it, synced, then
/// renamed over `path`, so a reader sees the old file or the whole new one. Tensors are laid out
/// by decreasing element size, then name, so every tensor is aligned to its element size; the
/// header is padded with spaces to a multiple of 8. Fails with errc::invalid_argument for a
/// duplicate or empty name, the name "__metadata__", or a size that does not match the shape,
/// and with errc::io_failure if the file cannot be written.
caf::expected<void> write_safetensors(const std::filesystem::path& path,
                                      const std::vector<tensor_bytes>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

/// write_safetensors() for torch tensors: each is moved to the CPU and made contiguous first.
/// Fails with errc::invalid_argument for a dtype the format has no name for here.
caf::expected<void> write_safetensors(const std::filesystem::path& path,
                                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

} // namespace kbrl::model
