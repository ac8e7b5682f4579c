// Tests of the safetensors reader and writer: a round trip for every dtype, the exact bytes of a
// small file, views that outlive their file object, and a clear error (file and tensor named)
// for each kind of damaged or lying file; sharded checkpoints with their index.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/safetensors_checkpoint.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace kbrl::model;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::read_file_bytes;
using kbrl::test::contains;

namespace {

/// The bytes of a safetensors file with this header and data; `declared` overrides the header
/// length written in the first 8 bytes.
std::string file_bytes(const std::string& header, const std::string& data,
                       std::optional<uint64_t> declared = std::nullopt) {
  uint64_t n = declared.value_or(header.size());
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string write_bytes(const temp_dir& dir, const std::string& name, const std::string& bytes) {
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

/// The text of the error `open` gives for a file with these bytes; fails the test if it opens.
std::string open_error(const temp_dir& dir, const std::string& bytes) {
  const auto path = write_bytes(dir, "bad.safetensors", bytes);
  auto f = safetensors_file::open(path);
  BOOST_REQUIRE_MESSAGE(!f, "a damaged file opened");
  BOOST_CHECK_EQUAL(f.error().code(), static_cast<uint8_t>(kbrl::errc::invalid_argument));
  const auto text = kbrl::describe(f.error());
  BOOST_CHECK_MESSAGE(text.find(path) != std::string::npos, "the error names no file: " + text);
  return text;
}

/// A tensor of `dtype` with distinct values where the dtype allows.
at::Tensor sample(st_dtype dtype, std::vector<int64_t> shape) {
  const auto type = to_scalar_type(dtype);
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  auto values = at::arange(n, at::kDouble).reshape(shape);
  if (dtype == st_dtype::boolean)
    return values.remainder(3).eq(1);
  if (is_floating(dtype))
    return (values * 0.25 - 1.5).to(type); // exact in F16 and BF16 for these sizes
  return (values * 7 - 20).to(type);       // negative values in the signed types, wrap in U8
}

const st_dtype all_dtypes[] = {st_dtype::f64, st_dtype::f32, st_dtype::f16, st_dtype::bf16,
                               st_dtype::i64, st_dtype::i32, st_dtype::i16, st_dtype::i8,
                               st_dtype::u8,  st_dtype::boolean};

} // namespace

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(round_trip_of_every_dtype) {
  temp_dir dir;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto dtype : all_dtypes) {
    tensors.emplace_back(std::string("t_") + to_string(dtype), sample(dtype, {3, 5}));
    tensors.emplace_back(std::string("scalar_") + to_string(dtype), sample(dtype, {}));
    tensors.emplace_back(std::string("empty_") + to_string(dtype), sample(dtype, {0, 4}));
  }
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "\"quoted\" \n"}};
  const auto path = dir / "all.safetensors";
  auto written = write_safetensors(path, tensors, meta);
  BOOST_REQUIRE_MESSAGE(written, why(written));

  auto f = safetensors_file::open(path);
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(f->metadata() == meta);
  BOOST_CHECK_EQUAL(f->entries().size(), tensors.size());
  for (const auto& [name, original] : tensors) {
    const auto* e = f->find(name);
    BOOST_REQUIRE_MESSAGE(e != nullptr, name);
    BOOST_CHECK_EQUAL(to_scalar_type(e->dtype), original.scalar_type());
    BOOST_CHECK(e->shape == original.sizes().vec());
    for (auto access : {tensor_access::view, tensor_access::copy}) {
      auto t = f->tensor(name, access);
      BOOST_REQUIRE_MESSAGE(t, why(t));
      BOOST_CHECK_EQUAL(t->scalar_type(), original.scalar_type());
      BOOST_CHECK(t->sizes() == original.sizes());
      BOOST_CHECK_MESSAGE(at::equal(*t, original), name << " differs after the round trip");
    }
    auto raw = f->bytes(name);
    BOOST_REQUIRE(raw);
    BOOST_CHECK_EQUAL(raw->size(), original.numel() * original.element_size());
  }
}

BOOST_AUTO_TEST_CASE(writer_lays_out_the_format_exactly) {
  // Two tensors given small-first: the writer puts the 4-byte one first (alignment), pads the
  // header with spaces to a multiple of 8 and numbers offsets from the data section.
  temp_dir dir;
  const int16_t a[] = {1, -2};
  const float b[] = {0.5f};
  std::vector<tensor_bytes> tensors{{"a", st_dtype::i16, {2}, a, sizeof a},
                                    {"b", st_dtype::f32, {1, 1}, b, sizeof b}};
  const auto path = dir / "x.safetensors";
  BOOST_REQUIRE(write_safetensors(path, tensors, {{"k", "v"}}));
  std::string header = R"({"__metadata__":{"k":"v"},"b":{"dtype":"F32","shape":[1,1],)"
                       R"("data_offsets":[0,4]},"a":{"dtype":"I16","shape":[2],"data_offsets":[4,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(reinterpret_cast<const char*>(b), 4);
  data.append(reinterpret_cast<const char*>(a), 4);
  BOOST_CHECK(read_file_bytes(path) == file_bytes(header, data));
  // No temporary file is left beside it.
  BOOST_CHECK_EQUAL(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);
}

BOOST_AUTO_TEST_CASE(reads_a_file_written_by_hand) {
  // Independent of the writer: a header without padding, tensors out of offset order, and an
  // F32 tensor at an odd address (copied rather than viewed, with the same values).
  temp_dir dir;
  const std::string header =
    R"({"odd":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  const float values[] = {3.25f, -1.0f};
  std::string data(1, '\x07');
  data.append(reinterpret_cast<const char*>(values), sizeof values);
  const auto path = write_bytes(dir, "hand.safetensors", file_bytes(header, data));
  auto f = safetensors_file::open(path);
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(f->metadata().empty());
  BOOST_CHECK(f->names() == (std::vector<std::string>{"odd", "u"}));
  BOOST_CHECK_EQUAL(f->entries().front().name, "u"); // ordered by offset
  auto odd = f->tensor("odd");
  BOOST_REQUIRE(odd);
  BOOST_CHECK_EQUAL(odd->data_ptr<float>()[0], 3.25f);
  BOOST_CHECK_EQUAL(odd->data_ptr<float>()[1], -1.0f);
  auto u = f->tensor("u");
  BOOST_REQUIRE(u);
  BOOST_CHECK_EQUAL(u->item<uint8_t>(), 7);
}

BOOST_AUTO_TEST_CASE(views_outlive_the_file_object_and_never_write_the_file) {
  temp_dir dir;
  const auto path = dir / "v.safetensors";
  auto original = at::arange(12, at::kFloat).reshape({3, 4});
  BOOST_REQUIRE(write_safetensors(path, {{"w", original}}));
  const auto before = read_file_bytes(path);
  at::Tensor view;
  {
    auto f = safetensors_file::open(path);
    BOOST_REQUIRE(f);
    auto t = f->tensor("w");
    BOOST_REQUIRE(t);
    view = *t;
  } // the file object is gone; the tensor keeps the mapping
  BOOST_CHECK(at::equal(view, original));
  view.mul_(2); // copy-on-write: this process's pages change, the file does not
  BOOST_CHECK(at::equal(view, original * 2));
  BOOST_CHECK(read_file_bytes(path) == before);
}

BOOST_AUTO_TEST_CASE(hostile_files_are_refused_naming_file_and_tensor) {
  temp_dir dir;
  const std::string good_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');

  BOOST_CHECK(contains(open_error(dir, "abc"), "truncated"));
  BOOST_CHECK(contains(open_error(dir, file_bytes("{}", "", 0)), "header length is 0"));
  BOOST_CHECK(contains(open_error(dir, file_bytes("{" + good_entry + "}", eight, 5000)),
                       "header length 5000 runs past the end of the file"));
  BOOST_CHECK(contains(open_error(dir, file_bytes("[1,2]", "")), "does not start with '{'"));
  BOOST_CHECK(contains(open_error(dir, file_bytes("{\"w\": {", "")), "not valid JSON"));

  // Offsets that lie.
  auto text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                         std::string(6, '\0')));
  BOOST_CHECK(contains(text, "tensor 'w'"));
  BOOST_CHECK(contains(text, "run past the end of the data (6 bytes)"));
  text = open_error(dir, file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                    eight));
  BOOST_CHECK(contains(text, "tensor 'b'"));
  BOOST_CHECK(contains(text, "overlap those of tensor 'a'"));
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                    eight));
  BOOST_CHECK(contains(text, "tensor 'w'"));
  BOOST_CHECK(contains(text, "hold 8 bytes, but shape [3] of F32 needs 12"));
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                                    eight));
  BOOST_CHECK(contains(text, "0 <= begin <= end"));
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})",
                                    eight));
  BOOST_CHECK(contains(text, "data_offsets must be [begin, end]"));

  // Descriptions that make no sense.
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})",
                                    eight));
  BOOST_CHECK(contains(text, "tensor 'w': unknown dtype 'F8_E4M3'"));
  BOOST_CHECK(contains(text, "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL"));
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                                    eight));
  BOOST_CHECK(contains(text, "non-negative integers"));
  text = open_error(dir, file_bytes(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", eight));
  BOOST_CHECK(contains(text, "tensor 'w': the header has no dtype"));
  text = open_error(dir, file_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                                    R"("data_offsets":[0,8]}})", eight));
  BOOST_CHECK(contains(text, "too large"));
  text = open_error(dir, file_bytes("{" + good_entry + "," + good_entry + "}", eight));
  BOOST_CHECK(contains(text, "names it twice"));
  text = open_error(dir, file_bytes(R"({"__metadata__":{"n":3},)" + good_entry + "}", eight));
  BOOST_CHECK(contains(text, "__metadata__ entry 'n' must be a string"));
  text = open_error(dir, file_bytes(R"({"w":[1,2]})", ""));
  BOOST_CHECK(contains(text, "tensor 'w': expected an object"));
}

BOOST_AUTO_TEST_CASE(a_truncated_file_names_the_tensor_cut_off) {
  temp_dir dir;
  const auto path = dir / "full.safetensors";
  BOOST_REQUIRE(write_safetensors(path, {{"first", at::ones({4})}, {"second", at::ones({4})}}));
  auto bytes = read_file_bytes(path);
  auto text = open_error(dir, bytes.substr(0, bytes.size() - 3));
  BOOST_CHECK_MESSAGE(contains(text, "tensor 'second'") && contains(text, "truncated"), text);
}

BOOST_AUTO_TEST_CASE(missing_files_and_tensors) {
  temp_dir dir;
  auto none = safetensors_file::open(dir / "absent.safetensors");
  BOOST_REQUIRE(!none);
  BOOST_CHECK_EQUAL(none.error().code(), static_cast<uint8_t>(kbrl::errc::io_failure));
  BOOST_CHECK(contains(kbrl::describe(none.error()), "absent.safetensors"));

  const auto path = dir / "one.safetensors";
  BOOST_REQUIRE(write_safetensors(path, {{"w", at::ones({2})}}));
  auto f = safetensors_file::open(path);
  BOOST_REQUIRE(f);
  auto t = f->tensor("nope");
  BOOST_REQUIRE(!t);
  const auto text = kbrl::describe(t.error());
  BOOST_CHECK(contains(text, path) && contains(text, "tensor 'nope'"));
}

BOOST_AUTO_TEST_CASE(writer_refuses_bad_input_and_leaves_nothing_behind) {
  temp_dir dir;
  const float one = 1;
  auto dup = write_safetensors(dir / "d.safetensors", {{"x", st_dtype::f32, {1}, &one, 4},
                                                       {"x", st_dtype::f32, {1}, &one, 4}});
  BOOST_REQUIRE(!dup);
  BOOST_CHECK(contains(kbrl::describe(dup.error()), "'x' is given twice"));
  auto size = write_safetensors(dir / "s.safetensors", {{"x", st_dtype::f32, {2}, &one, 4}});
  BOOST_REQUIRE(!size);
  BOOST_CHECK(contains(kbrl::describe(size.error()), "has 4 bytes, but shape [2] of F32 needs 8"));
  auto meta = write_safetensors(dir / "m.safetensors", {{"__metadata__", st_dtype::f32, {1}, &one, 4}});
  BOOST_CHECK(!meta);
  auto complex = write_safetensors(dir / "c.safetensors",
                                   {{"z", at::ones({2}, at::TensorOptions().dtype(at::kComplexFloat))}});
  BOOST_REQUIRE(!complex);
  BOOST_CHECK(contains(kbrl::describe(complex.error()), "tensor 'z' has dtype ComplexFloat"));
  auto nowhere = write_safetensors(dir.path / "no" / "such" / "dir.safetensors",
                                   {{"x", at::ones({1})}});
  BOOST_REQUIRE(!nowhere);
  BOOST_CHECK_EQUAL(nowhere.error().code(), static_cast<uint8_t>(kbrl::errc::io_failure));
  BOOST_CHECK_EQUAL(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 0);
}

BOOST_AUTO_TEST_CASE(a_new_file_replaces_the_old_one_whole) {
  temp_dir dir;
  const auto path = dir / "a.safetensors";
  BOOST_REQUIRE(write_safetensors(path, {{"old", at::ones({1000})}}));
  auto old_file = safetensors_file::open(path);
  BOOST_REQUIRE(old_file);
  auto old_view = old_file->tensor("old");
  BOOST_REQUIRE(old_view);
  BOOST_REQUIRE(write_safetensors(path, {{"new", at::zeros({3})}}));
  // The mapping still shows the old file (rename keeps its inode), a new open the new one.
  BOOST_CHECK(at::equal(*old_view, at::ones({1000})));
  auto new_file = safetensors_file::open(path);
  BOOST_REQUIRE(new_file);
  BOOST_CHECK(new_file->names() == std::vector<std::string>{"new"});
}

BOOST_AUTO_TEST_CASE(sharded_checkpoint_reads_like_a_single_file) {
  temp_dir dir;
  const auto config = tiny_model_config("qwen2");
  const auto single = dir.path / "single";
  const auto sharded = dir.path / "sharded";
  BOOST_REQUIRE(write_random_checkpoint(single, config, /*seed=*/7));
  BOOST_REQUIRE(write_random_checkpoint(sharded, config, /*seed=*/7, st_dtype::f32,
                                        /*max_shard_bytes=*/40000));
  BOOST_REQUIRE(fs::exists(sharded / safetensors_index_name));
  BOOST_REQUIRE(!fs::exists(sharded / safetensors_single_name));

  auto one = safetensors_checkpoint::open_dir(single);
  auto many = safetensors_checkpoint::open_dir(sharded);
  BOOST_REQUIRE_MESSAGE(one, why(one));
  BOOST_REQUIRE_MESSAGE(many, why(many));
  BOOST_CHECK_EQUAL(one->files().size(), 1u);
  std::size_t shard_count = 0;
  for (const auto& entry : fs::directory_iterator(sharded))
    shard_count += entry.path().extension() == ".safetensors";
  BOOST_CHECK_GT(shard_count, 2u);
  BOOST_CHECK_EQUAL(many->files().size(), shard_count); // each shard opened once
  BOOST_CHECK_EQUAL(many->index_path(), sharded / safetensors_index_name);
  BOOST_REQUIRE(one->names() == many->names());
  for (const auto& name : one->names()) {
    auto a = one->tensor(name);
    auto b = many->tensor(name);
    BOOST_REQUIRE(a && b);
    BOOST_CHECK_MESSAGE(at::equal(*a, *b), name << " differs between the two layouts");
  }
  auto none = many->tensor("model.nothing.weight");
  BOOST_REQUIRE(!none);
  BOOST_CHECK(contains(kbrl::describe(none.error()), "no tensor 'model.nothing.weight'"));
}

BOOST_AUTO_TEST_CASE(index_that_lies_is_refused_naming_tensor_and_shard) {
  temp_dir dir;
  const auto sharded = dir.path / "m";
  BOOST_REQUIRE(write_random_checkpoint(sharded, tiny_model_config("llama"), /*seed=*/1,
                                        st_dtype::f32, /*max_shard_bytes=*/40000));
  const auto index = (sharded / safetensors_index_name).string();
  std::string first_shard;
  for (const auto& entry : fs::directory_iterator(sharded))
    if (entry.path().filename().string().rfind("model-00001-of-", 0) == 0)
      first_shard = entry.path().filename().string();
  BOOST_REQUIRE(!first_shard.empty());
  auto with_map = [&](const std::string& map) {
    std::ofstream(index) << R"({"metadata":{"total_size":1},"weight_map":{)" << map << "}}";
    auto c = safetensors_checkpoint::open_dir(sharded);
    BOOST_REQUIRE_MESSAGE(!c, "the index was accepted: " + map);
    return kbrl::describe(c.error());
  };
  auto text = with_map(R"("model.ghost.weight":")" + first_shard + "\"");
  BOOST_CHECK_MESSAGE(contains(text, "tensor 'model.ghost.weight'") && contains(text, first_shard)
                        && contains(text, "does not hold it"),
                      text);
  text = with_map(R"("model.norm.weight":"model-00009-of-00009.safetensors")");
  BOOST_CHECK_MESSAGE(contains(text, "shard model-00009-of-00009.safetensors")
                        && contains(text, "does not exist"),
                      text);
  text = with_map(R"("model.norm.weight":"../elsewhere.safetensors")");
  BOOST_CHECK(contains(text, "is not a file name in the index's directory"));
  text = with_map(R"("model.norm.weight":3)");
  BOOST_CHECK(contains(text, "expected a shard file name"));
  text = with_map("");
  BOOST_CHECK(contains(text, "weight_map is empty"));
  std::ofstream(index) << "not json";
  auto bad = safetensors_checkpoint::open_dir(sharded);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(contains(kbrl::describe(bad.error()), index));
}

BOOST_AUTO_TEST_CASE(a_directory_without_weights_names_both_layouts) {
  temp_dir dir;
  auto c = safetensors_checkpoint::open_dir(dir.path);
  BOOST_REQUIRE(!c);
  const auto text = kbrl::describe(c.error());
  BOOST_CHECK(contains(text, "model.safetensors") && contains(text, "model.safetensors.index.json"));
}

BOOST_AUTO_TEST_SUITE_END()

// Measurements, in a suite of their own that is disabled: Boost.Test runs the disabled test
// cases of a suite that is selected by name (ctest selects the suite of this file).
BOOST_AUTO_TEST_SUITE(safetensors_measurements, *boost::unit_test::disabled())

// A measurement, not run by default (--run_test=safetensors_measurements): time to
// write, open, view and copy 1 GiB of BF16 tensors (64 x 16 MiB, like a 0.5B model's layers).
BOOST_AUTO_TEST_CASE(measure_one_gigabyte) {
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point since) {
    return std::chrono::duration<double>(clock::now() - since).count();
  };
  temp_dir dir;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (int i = 0; i < 64; ++i)
    tensors.emplace_back("layer." + std::to_string(i), at::full({4096, 2048}, i, at::kBFloat16));
  const auto path = dir / "big.safetensors";
  auto t0 = clock::now();
  BOOST_REQUIRE(write_safetensors(path, tensors));
  const double write_s = seconds(t0);
  t0 = clock::now();
  auto f = safetensors_file::open(path);
  BOOST_REQUIRE(f);
  const double open_s = seconds(t0);
  t0 = clock::now();
  std::vector<at::Tensor> views;
  for (const auto& [name, t] : tensors)
    views.push_back(*f->tensor(name));
  const double view_s = seconds(t0);
  t0 = clock::now();
  std::vector<at::Tensor> copies;
  for (const auto& [name, t] : tensors)
    copies.push_back(*f->tensor(name, tensor_access::copy)); // first touch of every mapped page
  const double copy_s = seconds(t0);
  for (int i = 0; i < 64; i += 21)
    BOOST_CHECK(at::equal(views[i], tensors[i].second) && at::equal(copies[i], tensors[i].second));
  BOOST_TEST_MESSAGE("1 GiB BF16 in 64 tensors: write (with fsync) " << write_s << " s, open "
                     << open_s * 1e3 << " ms, 64 views " << view_s * 1e3
                     << " ms, 64 copies (first touch of the mapping) " << copy_s << " s");
}

BOOST_AUTO_TEST_SUITE_END()
