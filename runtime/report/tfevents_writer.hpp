#pragma once
// TensorBoard event files written without TensorFlow: scalars at a step, as
// events.out.tfevents.<seconds>.<host>.<suffix> in a log directory TensorBoard reads.
//
// The file is a sequence of TFRecords:
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data |
//   uint32 masked CRC-32C of data
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is a
// tensorflow.Event protobuf; the few fields needed are encoded by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; HistogramProto histo = 5; }
//   HistogramProto { double min = 1; double max = 2; double num = 3; double sum = 4;
//                    double sum_squares = 5; repeated double bucket_limit = 6 [packed];
//                    repeated double bucket = 7 [packed]; }
//   Event.session_log = 7: SessionLog { SessionStatus status = 1; }  (START = 1)
// The first record carries file_version "brain.Event:2", as TensorFlow's writer does.
//
// Histograms: TensorBoard turns bucket i into the interval [bucket_limit[i-1], bucket_limit[i]]
// with min as the first left edge and max as the last right edge; kbrl writes equal-width
// buckets over [min, max] (a distribution of equal values becomes one bucket of width 1 around
// them, which TensorBoard can draw).
//
// Restarts: with file_version 2 TensorBoard purges every event at or after the step of a
// SessionLog START (written by write_session_start), so a resumed run that redoes steps shows
// each step once.
//
// Thread-compatible (one writer per thread, or guard it); every write is flushed to disk.

#include <caf/expected.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kbrl::report {

/// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
uint32_t crc32c(std::string_view data, uint32_t crc = 0);

/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32).
uint32_t masked_crc32c(std::string_view data);

/// `data` framed as one TFRecord (length, its CRC, data, the data's CRC).
std::string tfrecord(std::string_view data);

/// An Event protobuf holding only wall_time and file_version.
std::string encode_file_version_event(double wall_time, std::string_view version = "brain.Event:2");

/// An Event protobuf with wall_time, step and a Summary of scalars (tag, simple_value).
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& scalars);

/// A histogram as TensorBoard's HistogramProto holds it.
struct histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit; ///< right edge of each bucket
  std::vector<double> bucket;       ///< count of each bucket
};

/// `values` in `buckets` equal-width buckets over [min, max] (see above); empty values give an
/// empty histogram (num 0, no buckets).
histogram make_histogram(const std::vector<double>& values, size_t buckets = 30);

/// An Event protobuf with wall_time, step and a Summary of histograms (tag, histo).
std::string encode_histograms_event(double wall_time, int64_t step,
                                    const std::vector<std::pair<std::string, histogram>>& histos);

/// An Event protobuf with wall_time, step and SessionLog { status: START }.
std::string encode_session_start_event(double wall_time, int64_t step);

/// A hyperparameter for TensorBoard's HParams dashboard: a number, a flag or a text.
struct hparam {
  std::string name;
  bool is_number = false, is_bool = false;
  double number = 0;
  bool flag = false;
  std::string text;
};

/// An Event at `step` with a text summary (TensorBoard's Text dashboard renders it as markdown).
std::string encode_text_event(double wall_time, int64_t step, const std::string& tag,
                              const std::string& markdown);

/// An Event with the HParams plugin's session start info (the run's hyperparameters, its group
/// name and start time), as tensorboard.plugins.hparams writes it.
std::string encode_hparams_event(double wall_time, const std::vector<hparam>& hparams,
                                 const std::string& group);

/// Appends summaries to one event file.
class tfevents_writer {
public:
  /// Creates `log_dir` if needed and a new event file in it, named
  /// events.out.tfevents.<unix seconds>.<host name>.<suffix>, starting with the file-version
  /// record. Fails with errc::io_failure naming the path.
  static caf::expected<tfevents_writer> create(const std::string& log_dir,
                                               const std::string& suffix = "kbrl");

  /// Writes one Event with every scalar at `step` (wall time: now) and flushes. Fails with
  /// errc::io_failure naming the file.
  caf::expected<void> write_scalars(int64_t step,
                                    const std::vector<std::pair<std::string, double>>& scalars);

  /// Writes one Event with every histogram at `step` and flushes.
  caf::expected<void> write_histograms(int64_t step,
                                       const std::vector<std::pair<std::string, histogram>>& h);

  /// Writes a SessionLog START at `step`: TensorBoard drops what earlier files hold for `step`
  /// and later (a resumed run redoing them).
  caf::expected<void> write_session_start(int64_t step);

  /// Writes a text summary at `step` (markdown).
  caf::expected<void> write_text(int64_t step, const std::string& tag, const std::string& markdown);

  /// Writes the run's hyperparameters for the HParams dashboard.
  caf::expected<void> write_hparams(const std::vector<hparam>& hparams, const std::string& group);

  /// The event file's path.
  const std::string& path() const { return path_; }

private:
  struct file_closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  tfevents_writer(std::string path, std::unique_ptr<std::FILE, file_closer> file)
    : path_(std::move(path)), file_(std::move(file)) {}
  caf::expected<void> write_record(std::string_view data);

  std::string path_;
  std::unique_ptr<std::FILE, file_closer> file_;
};

} // namespace kbrl::report
