#include "runtime/retrieval/vector_index.hpp"

#include "messages/errors.hpp"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace kbrl::retrieval {

struct vector_index::impl {
  int32_t dimension;
  hnswlib::InnerProductSpace space;               // must outlive the graph, which points to it
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;

  explicit impl(int32_t dim) : dimension(dim), space(static_cast<size_t>(dim)) {}
};

namespace {

/// hnswlib's file header, in the order saveIndex() writes it.
struct hnsw_header {
  uint64_t offset_level0 = 0;
  uint64_t max_elements = 0;
  uint64_t element_count = 0;
  uint64_t size_data_per_element = 0;
  uint64_t label_offset = 0;
  uint64_t offset_data = 0;
  int32_t max_level = 0;
  uint32_t enter_point = 0;
  uint64_t max_m = 0;
  uint64_t max_m0 = 0;
  uint64_t m = 0;
  double mult = 0;
  uint64_t ef_construction = 0;
};

template <class T>
bool read_pod(std::istream& in, T& x) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&x), sizeof x));
}

caf::error bad_file(const std::string& path, const std::string& what) {
  return make_error(errc::invalid_argument, path + ": not the expected HNSW graph: " + what);
}

/// Checks the header and the layout of the file before hnswlib reads it.
caf::error check_hnsw_file(const std::string& path, int32_t dimension, size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  hnsw_header h;
  bool ok = read_pod(in, h.offset_level0) && read_pod(in, h.max_elements)
            && read_pod(in, h.element_count) && read_pod(in, h.size_data_per_element)
            && read_pod(in, h.label_offset) && read_pod(in, h.offset_data)
            && read_pod(in, h.max_level) && read_pod(in, h.enter_point) && read_pod(in, h.max_m)
            && read_pod(in, h.max_m0) && read_pod(in, h.m) && read_pod(in, h.mult)
            && read_pod(in, h.ef_construction);
  if (!ok)
    return bad_file(path, "the header is cut short (" + std::to_string(file_size) + " bytes)");
  auto expect = [&](const char* field, uint64_t got, uint64_t want) -> caf::error {
    if (got == want)
      return {};
    return bad_file(path, std::string{field} + " is " + std::to_string(got) + ", expected "
                            + std::to_string(want));
  };
  const uint64_t link_bytes0 = h.max_m0 * sizeof(hnswlib::tableint) + sizeof(uint32_t);
  const uint64_t vector_bytes = static_cast<uint64_t>(dimension) * sizeof(float);
  if (h.m < 2 || h.m > 10000)
    return bad_file(path, "M is " + std::to_string(h.m) + ", expected 2..10000");
  const uint64_t fixed_bytes = link_bytes0 + sizeof(hnswlib::labeltype);
  if (h.size_data_per_element != fixed_bytes + vector_bytes) {
    if (h.size_data_per_element > fixed_bytes
        && (h.size_data_per_element - fixed_bytes) % sizeof(float) == 0)
      return bad_file(path, "it holds vectors of dimension "
                              + std::to_string((h.size_data_per_element - fixed_bytes)
                                               / sizeof(float))
                              + ", expected " + std::to_string(dimension));
    return bad_file(path, "the bytes per element are " + std::to_string(h.size_data_per_element)
                            + ", expected " + std::to_string(fixed_bytes + vector_bytes));
  }
  for (auto err : {expect("the level-0 offset", h.offset_level0, 0),
                   expect("the element count", h.element_count, count),
                   expect("the capacity", h.max_elements, count),
                   expect("maxM", h.max_m, h.m), expect("maxM0", h.max_m0, 2 * h.m),
                   expect("the data offset", h.offset_data, link_bytes0),
                   expect("the label offset", h.label_offset, link_bytes0 + vector_bytes)})
    if (err)
      return err;
  if (h.max_level < 0 || h.max_level > 64)
    return bad_file(path, "the top level is " + std::to_string(h.max_level)
                            + ", expected 0..64");
  if (count > 0 && h.enter_point >= count)
    return bad_file(path, "the entry point " + std::to_string(h.enter_point)
                            + " is not an element");
  // Level-0 block, then one (size, links) record per element; links of upper levels come in
  // multiples of the per-level size, at most max_level levels.
  const uint64_t link_bytes = h.max_m * sizeof(hnswlib::tableint) + sizeof(uint32_t);
  uint64_t at = static_cast<uint64_t>(in.tellg()) + count * h.size_data_per_element;
  for (size_t i = 0; i < count; ++i) {
    if (at + sizeof(uint32_t) > file_size)
      return bad_file(path, "the link lists are cut short at element " + std::to_string(i));
    in.seekg(static_cast<std::streamoff>(at));
    uint32_t size = 0;
    read_pod(in, size);
    if (size % link_bytes != 0 || size / link_bytes > static_cast<uint64_t>(h.max_level))
      return bad_file(path, "element " + std::to_string(i) + " has a link list of "
                              + std::to_string(size) + " bytes");
    at += sizeof(uint32_t) + size;
  }
  if (at != file_size)
    return bad_file(path, std::to_string(file_size - std::min(at, file_size))
                            + " bytes follow the last link list (file size "
                            + std::to_string(file_size) + ", expected " + std::to_string(at)
                            + ")");
  return {};
}

} // namespace

vector_index::vector_index(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
vector_index::vector_index(vector_index&&) noexcept = default;
vector_index& vector_index::operator=(vector_index&&) noexcept = default;
vector_index::~vector_index() = default;

caf::expected<vector_index> vector_index::build(const std::vector<float>& rows,
                                                int32_t dimension, const hnsw_options& options,
                                                const std::function<void(size_t)>& progress) {
  if (dimension <= 0 || rows.size() % static_cast<size_t>(dimension) != 0)
    return make_error(errc::invalid_argument,
                      "vector_index: " + std::to_string(rows.size())
                        + " floats are not whole vectors of dimension "
                        + std::to_string(dimension));
  const size_t count = rows.size() / static_cast<size_t>(dimension);
  if (count == 0)
    return make_error(errc::invalid_argument, "vector_index: no vectors to index");
  if (options.m < 2 || options.m > 200 || options.ef_construction < options.m
      || options.ef_search < 1)
    return make_error(errc::invalid_argument,
                      "vector_index: expected 2 <= m <= 200, ef_construction >= m and "
                      "ef_search >= 1, got m "
                        + std::to_string(options.m) + ", ef_construction "
                        + std::to_string(options.ef_construction) + ", ef_search "
                        + std::to_string(options.ef_search));
  auto p = std::make_unique<impl>(dimension);
  try {
    p->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
      &p->space, count, static_cast<size_t>(options.m),
      static_cast<size_t>(options.ef_construction), static_cast<size_t>(options.seed));
    // The first point alone, so that the others all find an entry point.
    p->graph->addPoint(rows.data(), 0);
    int threads = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min<int>(threads, static_cast<int>(count / 256) + 1));
    std::atomic<size_t> next{1}, done{1};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto work = [&] {
      try {
        for (size_t i = next++; i < count && !failed; i = next++) {
          p->graph->addPoint(rows.data() + i * static_cast<size_t>(dimension), i);
          ++done;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
        failed = true;
      }
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back(work);
    // The calling thread reports while the workers insert.
    while (progress && done < count && !failed) {
      progress(done);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& w : workers)
      w.join();
    if (failure)
      std::rethrow_exception(failure);
    if (progress)
      progress(count);
    p->graph->setEf(static_cast<size_t>(options.ef_search));
  } catch (const std::exception& e) {
    return make_error(errc::internal, std::string{"vector_index: hnswlib failed: "} + e.what());
  }
  return vector_index(std::move(p));
}

caf::expected<void> vector_index::save(const std::string& path) const {
  try {
    impl_->graph->saveIndex(path);
  } catch (const std::exception& e) {
    return make_error(errc::io_failure, path + ": cannot write the graph: " + e.what());
  }
  std::error_code ec;
  const auto written = std::filesystem::file_size(path, ec);
  if (ec || written == 0)
    return make_error(errc::io_failure, path + ": the graph was not written");
  return {};
}

caf::expected<vector_index> vector_index::load(const std::string& path, int32_t dimension,
                                               size_t count, int32_t ef_search) {
  if (dimension <= 0)
    return make_error(errc::invalid_argument,
                      path + ": dimension " + std::to_string(dimension) + " is not positive");
  if (auto err = check_hnsw_file(path, dimension, count))
    return err;
  auto p = std::make_unique<impl>(dimension);
  try {
    p->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(&p->space, path, false, count);
    p->graph->setEf(static_cast<size_t>(std::max(ef_search, 1)));
  } catch (const std::exception& e) {
    return bad_file(path, e.what());
  }
  return vector_index(std::move(p));
}

std::vector<neighbor> vector_index::search(const float* query, size_t k) const {
  std::vector<neighbor> out;
  if (k == 0)
    return out;
  auto found = impl_->graph->searchKnn(query, k);
  out.resize(found.size());
  // The queue pops the farthest first.
  for (size_t i = out.size(); i-- > 0;) {
    out[i] = neighbor{static_cast<uint32_t>(found.top().second), 1.0f - found.top().first};
    found.pop();
  }
  return out;
}

std::vector<float> vector_index::vector(uint32_t label) const {
  return impl_->graph->getDataByLabel<float>(label);
}

size_t vector_index::size() const {
  return impl_->graph->cur_element_count;
}

int32_t vector_index::dimension() const {
  return impl_->dimension;
}

std::vector<neighbor> exact_search(const std::vector<float>& rows, int32_t dimension,
                                   const float* query, size_t k) {
  const size_t d = static_cast<size_t>(dimension);
  const size_t count = d == 0 ? 0 : rows.size() / d;
  std::vector<neighbor> all(count);
  for (size_t i = 0; i < count; ++i) {
    const float* row = rows.data() + i * d;
    float dot = 0;
    for (size_t j = 0; j < d; ++j)
      dot += row[j] * query[j];
    all[i] = neighbor{static_cast<uint32_t>(i), dot};
  }
  k = std::min(k, count);
  auto better = [](const neighbor& a, const neighbor& b) {
    return a.score > b.score || (a.score == b.score && a.label < b.label);
  };
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), better);
  all.resize(k);
  return all;
}

} // namespace kbrl::retrieval
