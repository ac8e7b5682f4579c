#include "runtime/report/tfevents_writer.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace kbrl::report {

namespace {

/// The byte table of the reflected Castagnoli polynomial 0x82f63b78.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit)
        c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_fixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// Protobuf wire types.
constexpr uint32_t wire_varint = 0, wire_fixed64 = 1, wire_bytes = 2, wire_fixed32 = 5;

void put_tag(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }

void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, wire_bytes);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

void put_double_field(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_tag(out, field, wire_fixed64);
  put_fixed64(out, bits);
}

void put_float_field(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_tag(out, field, wire_fixed32);
  put_fixed32(out, bits);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// The fields every Event at a step starts with: wall_time (1) and step (2).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double_field(event, 1, wall_time);
  put_tag(event, 2, wire_varint);
  put_varint(event, static_cast<uint64_t>(step));
  return event;
}

} // namespace

uint32_t crc32c(std::string_view data, uint32_t crc) {
  auto& table = crc_table();
  uint32_t c = ~crc;
  for (unsigned char b : data)
    c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t masked_crc32c(std::string_view data) {
  uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string header;
  put_fixed64(header, data.size());
  std::string out = header;
  put_fixed32(out, masked_crc32c(header));
  out.append(data.data(), data.size());
  put_fixed32(out, masked_crc32c(data));
  return out;
}

std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string event;
  put_double_field(event, 1, wall_time);
  put_bytes_field(event, 3, version);
  return event;
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (auto& [tag, value] : scalars) {
    std::string v;
    put_bytes_field(v, 1, tag);
    put_float_field(v, 2, static_cast<float>(value));
    put_bytes_field(summary, 1, v);
  }
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

histogram make_histogram(const std::vector<double>& values, size_t buckets) {
  histogram h;
  if (values.empty())
    return h;
  h.min = *std::min_element(values.begin(), values.end());
  h.max = *std::max_element(values.begin(), values.end());
  h.num = static_cast<double>(values.size());
  for (double v : values) {
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.max <= h.min || buckets <= 1) {
    if (h.max <= h.min) { // one value: a bucket of width 1 around it
      h.min -= 0.5;
      h.max += 0.5;
    }
    h.bucket_limit = {h.max};
    h.bucket = {h.num};
    return h;
  }
  const double width = (h.max - h.min) / static_cast<double>(buckets);
  h.bucket.assign(buckets, 0.0);
  for (size_t i = 0; i < buckets; ++i)
    h.bucket_limit.push_back(i + 1 == buckets ? h.max : h.min + width * static_cast<double>(i + 1));
  for (double v : values) {
    auto i = static_cast<size_t>((v - h.min) / width);
    h.bucket[std::min(i, buckets - 1)] += 1;
  }
  return h;
}

std::string encode_histograms_event(double wall_time, int64_t step,
                                    const std::vector<std::pair<std::string, histogram>>& histos) {
  std::string summary;
  for (auto& [tag, h] : histos) {
    std::string proto;
    put_double_field(proto, 1, h.min);
    put_double_field(proto, 2, h.max);
    put_double_field(proto, 3, h.num);
    put_double_field(proto, 4, h.sum);
    put_double_field(proto, 5, h.sum_squares);
    for (auto [field, list] : {std::pair{6u, &h.bucket_limit}, std::pair{7u, &h.bucket}}) {
      std::string packed;
      for (double x : *list) {
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        put_fixed64(packed, bits);
      }
      put_bytes_field(proto, field, packed);
    }
    std::string v;
    put_bytes_field(v, 1, tag);
    put_bytes_field(v, 5, proto);
    put_bytes_field(summary, 1, v);
  }
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_tag(session_log, 1, wire_varint);
  put_varint(session_log, 1); // SessionLog.START
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 7, session_log);
  return event;
}

namespace {

/// SummaryMetadata { plugin_data { plugin_name, content } }.
std::string plugin_metadata(std::string_view plugin, std::string_view content) {
  std::string plugin_data;
  put_bytes_field(plugin_data, 1, plugin);
  if (!content.empty())
    put_bytes_field(plugin_data, 2, content);
  std::string metadata;
  put_bytes_field(metadata, 1, plugin_data);
  return metadata;
}

/// An Event at `step` whose Summary holds one value: tag, metadata, tensor.
std::string tensor_event(double wall_time, int64_t step, std::string_view tag,
                         std::string_view metadata, std::string_view tensor) {
  std::string v;
  put_bytes_field(v, 1, tag);
  put_bytes_field(v, 8, tensor);
  put_bytes_field(v, 9, metadata);
  std::string summary;
  put_bytes_field(summary, 1, v);
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

/// google.protobuf.Value of a hyperparameter.
std::string hparam_value(const hparam& h) {
  std::string v;
  if (h.is_bool) {
    put_tag(v, 4, wire_varint);
    put_varint(v, h.flag ? 1 : 0);
  } else if (h.is_number) {
    put_double_field(v, 2, h.number);
  } else {
    put_bytes_field(v, 3, h.text);
  }
  return v;
}

} // namespace

std::string encode_text_event(double wall_time, int64_t step, const std::string& tag,
                              const std::string& markdown) {
  // TensorProto { dtype: DT_STRING (7), tensor_shape {} (a scalar), string_val: [markdown] }
  std::string tensor;
  put_tag(tensor, 1, wire_varint);
  put_varint(tensor, 7);
  put_bytes_field(tensor, 2, "");
  put_bytes_field(tensor, 8, markdown);
  return tensor_event(wall_time, step, tag, plugin_metadata("text", ""), tensor);
}

std::string encode_hparams_event(double wall_time, const std::vector<hparam>& hparams,
                                 const std::string& group) {
  // HParamsPluginData { version: 0, session_start_info (3) { hparams (1): map<string, Value>,
  // group_name (4), start_time_secs (5) } }, as tensorboard.plugins.hparams writes it, with its
  // empty float tensor as the value.
  std::string start;
  for (auto& h : hparams) {
    std::string entry;
    put_bytes_field(entry, 1, h.name);
    put_bytes_field(entry, 2, hparam_value(h));
    put_bytes_field(start, 1, entry);
  }
  if (!group.empty())
    put_bytes_field(start, 4, group);
  put_double_field(start, 5, wall_time);
  std::string data;
  put_bytes_field(data, 3, start);
  std::string dim; // Dim { size: 0 }
  std::string shape;
  put_bytes_field(shape, 2, dim);
  std::string tensor;
  put_tag(tensor, 1, wire_varint);
  put_varint(tensor, 1); // DT_FLOAT
  put_bytes_field(tensor, 2, shape);
  return tensor_event(wall_time, 0, "_hparams_/session_start_info",
                      plugin_metadata("hparams", data), tensor);
}

caf::expected<void> tfevents_writer::write_text(int64_t step, const std::string& tag,
                                                const std::string& markdown) {
  return write_record(encode_text_event(now_seconds(), step, tag, markdown));
}

caf::expected<void> tfevents_writer::write_hparams(const std::vector<hparam>& hparams,
                                                   const std::string& group) {
  return write_record(encode_hparams_event(now_seconds(), hparams, group));
}

caf::expected<tfevents_writer> tfevents_writer::create(const std::string& log_dir,
                                                       const std::string& suffix) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec)
    return make_error(errc::io_failure,
                      log_dir + ": cannot create the TensorBoard log directory: " + ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  auto seconds = static_cast<int64_t>(now_seconds());
  auto path = (std::filesystem::path(log_dir)
               / ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." + suffix))
                .string();
  // Two writers in the same second get distinct files rather than one appending to the other's.
  for (int n = 1; std::filesystem::exists(path, ec); ++n)
    path = (std::filesystem::path(log_dir)
            / ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." + suffix + "."
               + std::to_string(n)))
             .string();
  std::unique_ptr<std::FILE, file_closer> file{std::fopen(path.c_str(), "wb")};
  if (!file)
    return make_error(errc::io_failure, path + ": cannot create the event file: "
                                          + std::strerror(errno));
  tfevents_writer w{path, std::move(file)};
  if (auto ok = w.write_record(encode_file_version_event(now_seconds())); !ok)
    return ok.error();
  return w;
}

caf::expected<void>
tfevents_writer::write_scalars(int64_t step,
                               const std::vector<std::pair<std::string, double>>& scalars) {
  return write_record(encode_scalars_event(now_seconds(), step, scalars));
}

caf::expected<void>
tfevents_writer::write_histograms(int64_t step,
                                  const std::vector<std::pair<std::string, histogram>>& h) {
  return write_record(encode_histograms_event(now_seconds(), step, h));
}

caf::expected<void> tfevents_writer::write_session_start(int64_t step) {
  return write_record(encode_session_start_event(now_seconds(), step));
}

caf::expected<void> tfevents_writer::write_record(std::string_view data) {
  auto framed = tfrecord(data);
  if (std::fwrite(framed.data(), 1, framed.size(), file_.get()) != framed.size()
      || std::fflush(file_.get()) != 0)
    return make_error(errc::io_failure, path_ + ": cannot write the event record: "
                                          + std::strerror(errno));
  return {};
}

} // namespace kbrl::report
