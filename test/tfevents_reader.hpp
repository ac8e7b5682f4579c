#pragma once
// A TensorBoard event-file reader written for the tests, independent of the writer: TFRecord
// framing with both masked CRC-32Cs checked (its own bitwise CRC, not the writer's table), and a
// protobuf decoder for the Event fields kbrl writes (wall_time, step, file_version, summary
// values with tag and simple_value or histo, session_log's status). Unknown fields are skipped by
// wire type, as protobuf does.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kbrl::test {

/// CRC-32C bit by bit (the slow, obvious way).
inline uint32_t crc32c_bitwise(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline uint32_t masked_crc(const std::string& data) {
  uint32_t c = crc32c_bitwise(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/// A HistogramProto's fields.
struct tf_histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

struct tf_event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;
  std::vector<std::pair<std::string, tf_histogram>> histograms;
  int session_status = 0; ///< SessionLog.status (1 = START); 0 when the event has none
};

namespace detail {

inline uint64_t le(const std::string& s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s.at(pos + i))) << (8 * i);
  return v;
}

inline uint64_t varint(const std::string& s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    auto b = static_cast<unsigned char>(s.at(pos++));
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

/// Calls f(field, wire, value-or-bytes) for each field of a message.
template <class F>
void fields(const std::string& msg, F f) {
  size_t pos = 0;
  while (pos < msg.size()) {
    auto key = varint(msg, pos);
    auto field = static_cast<uint32_t>(key >> 3);
    auto wire = static_cast<uint32_t>(key & 7);
    switch (wire) {
      case 0: f(field, wire, varint(msg, pos), std::string()); break;
      case 1: f(field, wire, le(msg, pos, 8), std::string()); pos += 8; break;
      case 5: f(field, wire, le(msg, pos, 4), std::string()); pos += 4; break;
      case 2: {
        auto n = varint(msg, pos);
        if (pos + n > msg.size())
          throw std::runtime_error("length-delimited field runs past the message");
        f(field, wire, n, msg.substr(pos, n));
        pos += n;
        break;
      }
      default: throw std::runtime_error("unexpected wire type " + std::to_string(wire));
    }
  }
}

inline double as_double(uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, 8);
  return x;
}

/// Appends a repeated double field: packed (wire 2) or one element (wire 1).
inline void repeated_doubles(std::vector<double>& out, uint32_t wire, uint64_t v,
                             const std::string& bytes) {
  if (wire == 1) {
    out.push_back(as_double(v));
    return;
  }
  if (bytes.size() % 8 != 0)
    throw std::runtime_error("packed doubles: length not a multiple of 8");
  for (size_t i = 0; i < bytes.size(); i += 8)
    out.push_back(as_double(le(bytes, i, 8)));
}

inline tf_histogram decode_histogram(const std::string& msg) {
  tf_histogram h;
  fields(msg, [&](uint32_t field, uint32_t wire, uint64_t v, const std::string& bytes) {
    if (field >= 1 && field <= 5 && wire == 1) {
      double* slots[] = {&h.min, &h.max, &h.num, &h.sum, &h.sum_squares};
      *slots[field - 1] = as_double(v);
    } else if (field == 6) {
      repeated_doubles(h.bucket_limit, wire, v, bytes);
    } else if (field == 7) {
      repeated_doubles(h.bucket, wire, v, bytes);
    }
  });
  return h;
}

} // namespace detail

/// Decodes one Event message.
inline tf_event decode_event(const std::string& msg) {
  tf_event e;
  detail::fields(msg, [&](uint32_t field, uint32_t wire, uint64_t v, const std::string& bytes) {
    if (field == 1 && wire == 1)
      std::memcpy(&e.wall_time, &v, 8);
    else if (field == 2 && wire == 0)
      e.step = static_cast<int64_t>(v);
    else if (field == 3 && wire == 2)
      e.file_version = bytes;
    else if (field == 5 && wire == 2)
      detail::fields(bytes, [&](uint32_t f2, uint32_t w2, uint64_t, const std::string& value) {
        if (f2 != 1 || w2 != 2)
          return;
        std::string tag;
        float x = 0;
        bool histo = false;
        tf_histogram h;
        detail::fields(value, [&](uint32_t f3, uint32_t w3, uint64_t v3, const std::string& b3) {
          if (f3 == 1 && w3 == 2)
            tag = b3;
          if (f3 == 2 && w3 == 5) {
            auto bits = static_cast<uint32_t>(v3);
            std::memcpy(&x, &bits, 4);
          }
          if (f3 == 5 && w3 == 2) {
            histo = true;
            h = detail::decode_histogram(b3);
          }
        });
        if (histo)
          e.histograms.emplace_back(tag, h);
        else
          e.scalars.emplace_back(tag, x);
      });
    else if (field == 7 && wire == 2)
      detail::fields(bytes, [&](uint32_t f2, uint32_t w2, uint64_t v2, const std::string&) {
        if (f2 == 1 && w2 == 0)
          e.session_status = static_cast<int>(v2);
      });
  });
  return e;
}

/// Every record of an event file, each CRC checked; throws std::runtime_error naming the record
/// and what is wrong.
inline std::vector<tf_event> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  auto data = ss.str();
  std::vector<tf_event> out;
  size_t pos = 0;
  while (pos < data.size()) {
    auto n = std::to_string(out.size());
    if (pos + 12 > data.size())
      throw std::runtime_error("record " + n + ": truncated header");
    auto header = data.substr(pos, 8);
    auto length = detail::le(data, pos, 8);
    if (detail::le(data, pos + 8, 4) != masked_crc(header))
      throw std::runtime_error("record " + n + ": length CRC mismatch");
    if (pos + 12 + length + 4 > data.size())
      throw std::runtime_error("record " + n + ": truncated data");
    auto body = data.substr(pos + 12, length);
    if (detail::le(data, pos + 12 + length, 4) != masked_crc(body))
      throw std::runtime_error("record " + n + ": data CRC mismatch");
    out.push_back(decode_event(body));
    pos += 12 + length + 4;
  }
  return out;
}

} // namespace kbrl::test
