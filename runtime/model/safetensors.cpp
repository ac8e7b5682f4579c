#include "runtime/model/safetensors.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/io/json_writer.hpp"

#include <ATen/ATen.h>

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The format stores little-endian numbers; kbrl runs on x86-64 and AArch64 only.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors reading assumes little-endian");

namespace kbrl::model {

namespace fs = std::filesystem;

// ---- dtypes -------------------------------------------------------------------------------------

namespace {

struct dtype_info {
  st_dtype dtype;
  const char* name;
  std::size_t size;
  c10::ScalarType scalar;
};

const dtype_info dtype_table[] = {
  {st_dtype::f64, "F64", 8, c10::ScalarType::Double},
  {st_dtype::f32, "F32", 4, c10::ScalarType::Float},
  {st_dtype::f16, "F16", 2, c10::ScalarType::Half},
  {st_dtype::bf16, "BF16", 2, c10::ScalarType::BFloat16},
  {st_dtype::i64, "I64", 8, c10::ScalarType::Long},
  {st_dtype::i32, "I32", 4, c10::ScalarType::Int},
  {st_dtype::i16, "I16", 2, c10::ScalarType::Short},
  {st_dtype::i8, "I8", 1, c10::ScalarType::Char},
  {st_dtype::u8, "U8", 1, c10::ScalarType::Byte},
  {st_dtype::boolean, "BOOL", 1, c10::ScalarType::Bool},
};

const dtype_info& info(st_dtype dtype) {
  for (const auto& d : dtype_table)
    if (d.dtype == dtype)
      return d;
  return dtype_table[1]; // unreachable: every enumerator is in the table
}

} // namespace

const char* to_string(st_dtype dtype) { return info(dtype).name; }

std::optional<st_dtype> parse_st_dtype(std::string_view name) {
  for (const auto& d : dtype_table)
    if (name == d.name)
      return d.dtype;
  return std::nullopt;
}

std::string known_st_dtypes() {
  std::string out;
  for (const auto& d : dtype_table) {
    if (!out.empty())
      out += ", ";
    out += d.name;
  }
  return out;
}

std::size_t element_size(st_dtype dtype) { return info(dtype).size; }

bool is_floating(st_dtype dtype) {
  return dtype == st_dtype::f64 || dtype == st_dtype::f32 || dtype == st_dtype::f16
         || dtype == st_dtype::bf16;
}

c10::ScalarType to_scalar_type(st_dtype dtype) { return info(dtype).scalar; }

std::optional<st_dtype> from_scalar_type(c10::ScalarType type) {
  for (const auto& d : dtype_table)
    if (d.scalar == type)
      return d.dtype;
  return std::nullopt;
}

uint64_t tensor_entry::numel() const {
  uint64_t n = 1;
  for (auto d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// ---- the mapping --------------------------------------------------------------------------------

/// A whole file mapped private and writable (copy-on-write): tensors that view it may be written
/// to without touching the file. Unmapped when the last owner lets go.
class mapped_file {
public:
  static caf::expected<std::shared_ptr<const mapped_file>> open(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return make_error(errc::io_failure,
                        "cannot open " + path.string() + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      auto err = errno;
      ::close(fd);
      return make_error(errc::io_failure,
                        "cannot stat " + path.string() + ": " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return make_error(errc::io_failure, path.string() + " is not a regular file");
    }
    auto result = std::shared_ptr<mapped_file>(new mapped_file);
    result->size_ = static_cast<std::size_t>(st.st_size);
    if (result->size_ > 0) {
      void* p = ::mmap(nullptr, result->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        auto err = errno;
        ::close(fd);
        return make_error(errc::io_failure,
                          "cannot map " + path.string() + " into memory: " + std::strerror(err));
      }
      result->data_ = static_cast<unsigned char*>(p);
    }
    ::close(fd); // the mapping holds its own reference to the file
    return std::shared_ptr<const mapped_file>(std::move(result));
  }

  ~mapped_file() {
    if (data_ != nullptr)
      ::munmap(data_, size_);
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

private:
  mapped_file() = default;
  unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

// ---- reading ------------------------------------------------------------------------------------

namespace {

/// Headers larger than this are refused before parsing: no real checkpoint comes near it, and a
/// hostile length must not make us allocate gigabytes.
constexpr uint64_t max_header_bytes = 100ull << 20;

caf::error bad_file(const fs::path& path, const std::string& what) {
  return make_error(errc::invalid_argument, path.string() + ": " + what);
}

caf::error bad_tensor(const fs::path& path, std::string_view name, const std::string& what) {
  return bad_file(path, "tensor '" + std::string(name) + "': " + what);
}

/// A JSON value as an error message shows it (shortened).
std::string shown(simdjson::dom::element e) {
  std::string s = simdjson::minify(e);
  if (s.size() > 80)
    s = s.substr(0, 77) + "...";
  return s;
}

/// A non-negative integer, or nullopt (negative, fractional, not a number).
std::optional<uint64_t> non_negative(simdjson::dom::element e) {
  uint64_t u = 0;
  if (e.is_uint64() && !e.get(u))
    return u;
  return std::nullopt;
}

/// Reads one tensor's description; `name` is already known not to be "__metadata__".
caf::expected<tensor_entry> read_entry(const fs::path& path, std::string_view name,
                                       simdjson::dom::element value, uint64_t data_size) {
  tensor_entry entry;
  entry.name = std::string(name);
  simdjson::dom::object obj;
  if (value.get(obj))
    return bad_tensor(path, name, "expected an object with dtype, shape and data_offsets, got "
                                    + shown(value));

  simdjson::dom::element dtype_el;
  std::string_view dtype_name;
  if (obj["dtype"].get(dtype_el))
    return bad_tensor(path, name, "the header has no dtype");
  if (dtype_el.get(dtype_name))
    return bad_tensor(path, name, "dtype must be a string, got " + shown(dtype_el));
  auto dtype = parse_st_dtype(dtype_name);
  if (!dtype)
    return bad_tensor(path, name, "unknown dtype '" + std::string(dtype_name)
                                    + "' (kbrl reads " + known_st_dtypes() + ")");
  entry.dtype = *dtype;

  simdjson::dom::element shape_el;
  simdjson::dom::array shape;
  if (obj["shape"].get(shape_el))
    return bad_tensor(path, name, "the header has no shape");
  if (shape_el.get(shape))
    return bad_tensor(path, name, "shape must be an array of sizes, got " + shown(shape_el));
  // numel * element size must fit in 64 bits; computed in 128 to see an overflow.
  unsigned __int128 bytes = element_size(entry.dtype);
  for (auto d : shape) {
    auto size = non_negative(d);
    if (!size || *size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return bad_tensor(path, name,
                        "shape must hold non-negative integers, got " + shown(shape_el));
    entry.shape.push_back(static_cast<int64_t>(*size));
    bytes *= *size;
    if (bytes > std::numeric_limits<uint64_t>::max())
      return bad_tensor(path, name, "shape " + shown(shape_el) + " is too large");
  }

  simdjson::dom::element offsets_el;
  simdjson::dom::array offsets;
  if (obj["data_offsets"].get(offsets_el))
    return bad_tensor(path, name, "the header has no data_offsets");
  if (offsets_el.get(offsets) || offsets.size() != 2)
    return bad_tensor(path, name, "data_offsets must be [begin, end], got " + shown(offsets_el));
  auto begin = non_negative(offsets.at(0).value_unsafe());
  auto end = non_negative(offsets.at(1).value_unsafe());
  if (!begin || !end || *begin > *end)
    return bad_tensor(path, name, "data_offsets must be [begin, end] with 0 <= begin <= end, got "
                                    + shown(offsets_el));
  entry.begin = *begin;
  entry.end = *end;
  if (entry.end > data_size)
    return bad_tensor(path, name,
                      "data_offsets " + shown(offsets_el) + " run past the end of the data ("
                        + std::to_string(data_size)
                        + " bytes): the file is truncated or its header is wrong");
  if (entry.byte_size() != static_cast<uint64_t>(bytes))
    return bad_tensor(path, name,
                      "data_offsets " + shown(offsets_el) + " hold " + std::to_string(entry.byte_size())
                        + " bytes, but shape " + shape_string(entry.shape) + " of "
                        + to_string(entry.dtype) + " needs "
                        + std::to_string(static_cast<uint64_t>(bytes)));
  return entry;
}

caf::expected<std::map<std::string, std::string>> read_metadata(const fs::path& path,
                                                                simdjson::dom::element value) {
  std::map<std::string, std::string> out;
  simdjson::dom::object obj;
  if (value.get(obj))
    return bad_file(path, "__metadata__ must be an object of strings, got " + shown(value));
  for (auto field : obj) {
    std::string_view text;
    if (field.value.get(text))
      return bad_file(path, "__metadata__ entry '" + std::string(field.key)
                              + "' must be a string, got " + shown(field.value));
    out.emplace(std::string(field.key), std::string(text));
  }
  return out;
}

} // namespace

caf::expected<safetensors_file> safetensors_file::open(const fs::path& path) {
  auto mapping = mapped_file::open(path);
  if (!mapping)
    return mapping.error();
  const auto* bytes = (*mapping)->data();
  const uint64_t file_size = (*mapping)->size();
  if (file_size < 8)
    return bad_file(path, "truncated: the file has " + std::to_string(file_size)
                            + " bytes, fewer than the 8 of the header length");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes, 8);
  if (header_size == 0)
    return bad_file(path, "the header length is 0");
  if (header_size > file_size - 8)
    return bad_file(path, "the header length " + std::to_string(header_size)
                            + " runs past the end of the file (" + std::to_string(file_size)
                            + " bytes): the file is truncated or not a safetensors file");
  if (header_size > max_header_bytes)
    return bad_file(path, "the header length " + std::to_string(header_size)
                            + " is larger than the " + std::to_string(max_header_bytes)
                            + " bytes kbrl accepts");
  const std::string_view header(reinterpret_cast<const char*>(bytes) + 8, header_size);
  if (header.front() != '{')
    return bad_file(path, "the header does not start with '{': not a safetensors file");

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::padded_string padded(header);
  if (auto err = parser.parse(padded).get(doc))
    return bad_file(path, std::string("the header is not valid JSON: ") + simdjson::error_message(err));
  simdjson::dom::object root;
  if (doc.get(root))
    return bad_file(path, "the header is not a JSON object");

  safetensors_file file;
  file.path_ = path;
  file.mapping_ = *mapping;
  file.data_ = bytes + 8 + header_size;
  const uint64_t data_size = file_size - 8 - header_size;
  for (auto field : root) {
    if (field.key == "__metadata__") {
      auto meta = read_metadata(path, field.value);
      if (!meta)
        return meta.error();
      file.metadata_ = std::move(*meta);
      continue;
    }
    auto entry = read_entry(path, field.key, field.value, data_size);
    if (!entry)
      return entry.error();
    if (file.index_.count(entry->name) != 0)
      return bad_tensor(path, entry->name, "the header names it twice");
    file.index_.emplace(entry->name, 0);
    file.entries_.push_back(std::move(*entry));
  }

  std::stable_sort(file.entries_.begin(), file.entries_.end(),
                   [](const tensor_entry& a, const tensor_entry& b) { return a.begin < b.begin; });
  // Overlap: an entry that starts before the furthest end seen so far. Empty tensors occupy no
  // bytes and cannot overlap anything.
  const tensor_entry* furthest = nullptr;
  for (std::size_t i = 0; i < file.entries_.size(); ++i) {
    const auto& e = file.entries_[i];
    file.index_[e.name] = i;
    if (e.byte_size() == 0)
      continue;
    if (furthest != nullptr && e.begin < furthest->end)
      return bad_tensor(path, e.name,
                        "its bytes [" + std::to_string(e.begin) + ", " + std::to_string(e.end)
                          + ") overlap those of tensor '" + furthest->name + "' ["
                          + std::to_string(furthest->begin) + ", " + std::to_string(furthest->end)
                          + ")");
    if (furthest == nullptr || e.end > furthest->end)
      furthest = &e;
  }
  return file;
}

std::vector<std::string> safetensors_file::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, i] : index_)
    out.push_back(name);
  return out;
}

const tensor_entry* safetensors_file::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

caf::expected<std::string_view> safetensors_file::bytes(const std::string& name) const {
  const auto* e = find(name);
  if (e == nullptr)
    return bad_tensor(path_, name, "no such tensor in the file");
  return std::string_view(reinterpret_cast<const char*>(data_) + e->begin, e->byte_size());
}

caf::expected<at::Tensor> safetensors_file::tensor(const std::string& name,
                                                   tensor_access access) const {
  const auto* e = find(name);
  if (e == nullptr)
    return bad_tensor(path_, name, "no such tensor in the file");
  const auto options = at::TensorOptions().dtype(to_scalar_type(e->dtype)).device(at::kCPU);
  // data_ points into the writable private mapping; const only guards the header's view.
  auto* first = const_cast<unsigned char*>(data_) + e->begin;
  const bool aligned = reinterpret_cast<uintptr_t>(first) % element_size(e->dtype) == 0;
  if (access == tensor_access::view && aligned && e->byte_size() > 0) {
    auto keep = mapping_;
    return at::from_blob(first, e->shape, [keep](void*) {}, options);
  }
  auto out = at::empty(e->shape, options);
  if (e->byte_size() > 0)
    std::memcpy(out.data_ptr(), first, e->byte_size());
  return out;
}

// ---- writing ------------------------------------------------------------------------------------

caf::expected<void> write_safetensors(const fs::path& path, const std::vector<tensor_bytes>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return make_error(errc::invalid_argument, "cannot write " + path.string() + ": '" + t.name
                                                  + "' is not a tensor name");
    if (!seen.insert(t.name).second)
      return make_error(errc::invalid_argument, "cannot write " + path.string() + ": tensor '"
                                                  + t.name + "' is given twice");
    unsigned __int128 need = element_size(t.dtype);
    for (auto d : t.shape) {
      if (d < 0)
        return make_error(errc::invalid_argument, "cannot write " + path.string() + ": tensor '"
                                                    + t.name + "' has a negative size in shape "
                                                    + shape_string(t.shape));
      need *= static_cast<uint64_t>(d);
    }
    if (need != t.size || (t.size > 0 && t.data == nullptr))
      return make_error(errc::invalid_argument,
                        "cannot write " + path.string() + ": tensor '" + t.name + "' has "
                          + std::to_string(t.size) + " bytes, but shape " + shape_string(t.shape)
                          + " of " + to_string(t.dtype) + " needs "
                          + std::to_string(static_cast<uint64_t>(need)));
  }

  // Larger elements first: every offset is then a multiple of the element size that follows it.
  std::vector<const tensor_bytes*> order;
  for (const auto& t : tensors)
    order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const tensor_bytes* a, const tensor_bytes* b) {
    auto sa = element_size(a->dtype), sb = element_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  json_writer w;
  w.begin_object();
  if (!metadata.empty()) {
    w.key("__metadata__").begin_object();
    for (const auto& [k, v] : metadata)
      w.field(k, v);
    w.end_object();
  }
  uint64_t offset = 0;
  for (const auto* t : order) {
    w.key(t->name).begin_object().field("dtype", to_string(t->dtype)).key("shape").begin_array();
    for (auto d : t->shape)
      w.value(static_cast<int64_t>(d));
    w.end_array().key("data_offsets").begin_array().value(offset);
    offset += t->size;
    w.value(offset).end_array().end_object();
  }
  w.end_object();
  std::string header = w.str();
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string prefix(8, '\0');
  const uint64_t header_size = header.size();
  std::memcpy(prefix.data(), &header_size, 8);
  std::vector<std::string_view> pieces{prefix, header};
  for (const auto* t : order)
    pieces.emplace_back(static_cast<const char*>(t->data), t->size);
  return io::write_file_atomically(path, pieces);
}

caf::expected<void>
write_safetensors(const fs::path& path,
                  const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> keep; // contiguous CPU copies, alive until the file is written
  std::vector<tensor_bytes> views;
  keep.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      return make_error(errc::invalid_argument,
                        "cannot write " + path.string() + ": tensor '" + name + "' is undefined");
    auto dtype = from_scalar_type(t.scalar_type());
    if (!dtype)
      return make_error(errc::invalid_argument,
                        "cannot write " + path.string() + ": tensor '" + name + "' has dtype "
                          + std::string(c10::toString(t.scalar_type()))
                          + ", which has no safetensors name here (kbrl writes "
                          + known_st_dtypes() + ")");
    keep.push_back(t.to(at::kCPU).contiguous());
    const auto& c = keep.back();
    tensor_bytes b;
    b.name = name;
    b.dtype = *dtype;
    b.shape = c.sizes().vec();
    b.data = c.data_ptr();
    b.size = c.numel() * c.element_size();
    views.push_back(std::move(b));
  }
  return write_safetensors(path, views, metadata);
}

} // namespace kbrl::model
