// tests/test_data.cpp — the data pipeline: IDX and CSV readers, TensorDataset, DataLoader
// (order, shuffle, drop_last, prefetch, early exit, resume) and Fashion-MNIST.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/data/readers.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;        // NOLINT: test file
using namespace ember::data;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::write_bytes;
using ember_test::write_text;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

/// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() / ("ember_test_data_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(tick) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---- IDX ----

template <typename T>
void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape()) << got.shape() << " vs " << want.shape();
  const std::vector<T> g = got.to_vector<T>(), w = want.to_vector<T>();
  ASSERT_EQ(g.size(), w.size());
  EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size() * sizeof(T)), 0) << "values differ";
}

Tensor sample_u8() {
  std::vector<uint8_t> v(3 * 4 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 37 + 11);
  return from_vector(v, {3, 4, 5});
}

Tensor sample_f32(int64_t n = 2 * 7) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.7f) * 1e3f - 3.25f;
  return from_vector(v, {2, n / 2});
}

TEST(DataIdx, RoundTripU8PlainAndGzip) {
  TempDir dir;
  for (const bool gz : {false, true}) {
    const std::string path = dir.file(gz ? "a.idx.gz" : "a.idx");
    write_idx(path, sample_u8(), gz);
    const std::vector<uint8_t> head = read_bytes(path);
    ASSERT_GE(head.size(), 4u);
    if (gz) {
      EXPECT_EQ(head[0], 0x1f);
      EXPECT_EQ(head[1], 0x8b);
    } else {
      EXPECT_EQ(head[2], 0x08);
      EXPECT_EQ(head[3], 3);
      EXPECT_EQ(head.size(), 4u + 3 * 4 + 60);
    }
    expect_same<uint8_t>(read_idx(path), sample_u8());
  }
}

TEST(DataIdx, RoundTripF32F64I32PlainAndGzip) {
  TempDir dir;
  for (const bool gz : {false, true}) {
    write_idx(dir.file("f.idx"), sample_f32(), gz);
    expect_same<float>(read_idx(dir.file("f.idx")), sample_f32());
    const Tensor d = sample_f32().to(DType::f64);
    write_idx(dir.file("d.idx"), d, gz);
    expect_same<double>(read_idx(dir.file("d.idx")), d);
    const Tensor i = from_vector<int32_t>({-5, 0, 7, 2147483647, -2147483647 - 1}, {5});
    write_idx(dir.file("i.idx"), i, gz);
    expect_same<int32_t>(read_idx(dir.file("i.idx")), i);
  }
}

TEST(DataIdx, ReadsBigEndianAndWidensNarrowTypes) {
  TempDir dir;
  // i32 [2] = {258, -2}, written by hand in big-endian order.
  write_bytes(dir.file("i32"), {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE});
  expect_same<int32_t>(read_idx(dir.file("i32")), from_vector<int32_t>({258, -2}, {2}));
  // f32 [1] = 1.5f (0x3FC00000).
  write_bytes(dir.file("f32"), {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0});
  expect_same<float>(read_idx(dir.file("f32")), from_vector<float>({1.5f}, {1}));
  // i8 [3] and i16 [2] are read as i32.
  write_bytes(dir.file("i8"), {0, 0, 0x09, 1, 0, 0, 0, 3, 0x7F, 0x80, 0xFF});
  expect_same<int32_t>(read_idx(dir.file("i8")), from_vector<int32_t>({127, -128, -1}, {3}));
  write_bytes(dir.file("i16"), {0, 0, 0x0B, 1, 0, 0, 0, 2, 0x01, 0x00, 0xFF, 0xFE});
  expect_same<int32_t>(read_idx(dir.file("i16")), from_vector<int32_t>({256, -2}, {2}));
}

TEST(DataIdx, WriteRefusesUnsupportedTensors) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { write_idx(dir.file("x"), zeros({2}, {.dtype = DType::i64})); }),
              HasSubstr("unsupported dtype i64"));
  EXPECT_THAT(error_of([&] { write_idx(dir.file("x"), scalar_tensor(1.0)); }), HasSubstr("rank 0"));
  EXPECT_THAT(error_of([&] { write_idx(dir.file("no/such/dir/x"), zeros({2})); }),
              HasSubstr("cannot open for writing"));
}

// Writes `bytes` to a file, reads it back as IDX and returns the error message.
std::string idx_error(const TempDir& dir, const std::string& name,
                      const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file(name);
  write_bytes(path, bytes);
  const std::string msg = error_of([&] { read_idx(path); });
  EXPECT_THAT(msg, HasSubstr(path)) << "the message must name the file";
  EXPECT_THAT(msg, HasSubstr("read_idx"));
  return msg;
}

TEST(DataIdx, RejectsBadHeaders) {
  TempDir dir;
  EXPECT_THAT(idx_error(dir, "empty", {}), HasSubstr("empty file"));
  EXPECT_THAT(idx_error(dir, "short", {0, 0}), HasSubstr("truncated header"));
  EXPECT_THAT(idx_error(dir, "magic", {0x01, 0x02, 0x08, 1, 0, 0, 0, 1, 5}),
              HasSubstr("bad magic 0x01 0x02"));
  EXPECT_THAT(idx_error(dir, "code", {0, 0, 0x0A, 1, 0, 0, 0, 1, 5}),
              HasSubstr("unknown type code 0x0A"));
  EXPECT_THAT(idx_error(dir, "rank0", {0, 0, 0x08, 0}), HasSubstr("rank 0 (expected 1 to 8)"));
  std::vector<uint8_t> rank9 = {0, 0, 0x08, 9};
  for (int i = 0; i < 9; ++i) rank9.insert(rank9.end(), {0, 0, 0, 1});
  rank9.push_back(7);
  EXPECT_THAT(idx_error(dir, "rank9", rank9), HasSubstr("rank 9 (expected 1 to 8)"));
  EXPECT_THAT(idx_error(dir, "sizes", {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0}),
              HasSubstr("truncated header"));
  const std::string missing = dir.file("does-not-exist");
  EXPECT_THAT(error_of([&] { read_idx(missing); }), HasSubstr(missing + ": cannot open"));
}

TEST(DataIdx, RejectsTruncatedAndOversizedData) {
  TempDir dir;
  write_idx(dir.file("full"), sample_f32(), false);
  const std::vector<uint8_t> full = read_bytes(dir.file("full"));
  const size_t header = 4 + 2 * 4, data = 2 * 7 * 4;
  ASSERT_EQ(full.size(), header + data);
  for (const size_t keep : {size_t{0}, size_t{1}, data / 2, data - 1}) {
    std::vector<uint8_t> cut(full.begin(),
                             full.begin() + static_cast<std::ptrdiff_t>(header + keep));
    EXPECT_THAT(idx_error(dir, "cut" + std::to_string(keep), cut),
                HasSubstr("truncated: expected 56 data bytes, got " + std::to_string(keep)));
  }
  std::vector<uint8_t> longer = full;
  longer.push_back(0);
  EXPECT_THAT(idx_error(dir, "long", longer),
              HasSubstr("trailing data: expected 56 data bytes, got 57"));
  // A header promising far more than the file holds fails before allocating it.
  EXPECT_THAT(idx_error(dir, "huge", {0, 0, 0x0D, 2, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 1, 2}),
              HasSubstr("truncated: expected 17179344900 data bytes, got 2"));
  EXPECT_THAT(idx_error(dir, "overflow",
                        {0, 0, 0x0D, 2, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1}),
              HasSubstr("sizes [4294967295, 4294967295] hold too many elements"));
}

TEST(DataIdx, RejectsTruncatedAndCorruptGzip) {
  TempDir dir;
  const Tensor big = sample_f32(20000);
  write_idx(dir.file("big.gz"), big, true);
  const std::vector<uint8_t> gz = read_bytes(dir.file("big.gz"));
  ASSERT_GT(gz.size(), 1000u);
  for (const size_t keep : {size_t{12}, gz.size() / 3, gz.size() / 2}) {
    std::vector<uint8_t> cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::string msg = idx_error(dir, "gzcut" + std::to_string(keep), cut);
    EXPECT_THAT(msg, HasSubstr("truncated"));
    EXPECT_THAT(msg, HasSubstr("gzip stream ends early"));
  }
  // Only the 8-byte trailer (CRC and size) missing: all data arrived, still truncated.
  std::vector<uint8_t> no_trailer(gz.begin(), gz.end() - 8);
  EXPECT_THAT(idx_error(dir, "notrailer", no_trailer),
              HasSubstr("truncated: the gzip stream ends early"));
  // A wrong CRC is corrupt data.
  std::vector<uint8_t> bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF;
  EXPECT_THAT(idx_error(dir, "badcrc", bad_crc), HasSubstr("corrupt gzip data"));
  // A gzip-compressed file with a valid stream but a truncated IDX body.
  write_idx(dir.file("small.gz"), sample_u8(), true);
  ASSERT_NO_THROW(read_idx(dir.file("small.gz")));
}

// ---- CSV ----

TEST(DataCsv, HeaderAndLabelByNameOrIndex) {
  TempDir dir;
  const std::string path = dir.file("iris.csv");
  write_text(path,
             "sepal, \"petal width\",class,score\n1.5,2,0,0.5\n-3,4e2,2,1\n\n+7, .25 ,1,-2\n");
  const CsvData by_name = read_csv(path, {.label_column = "class"});
  EXPECT_EQ(by_name.inputs.dtype(), DType::f32);
  EXPECT_EQ(by_name.inputs.shape(), (Shape{3, 3}));
  EXPECT_EQ(by_name.inputs.to_vector<float>(),
            (std::vector<float>{1.5f, 2, 0.5f, -3, 400, 1, 7, 0.25f, -2}));
  EXPECT_EQ(by_name.labels.dtype(), DType::i64);
  EXPECT_EQ(by_name.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(by_name.feature_names, (std::vector<std::string>{"sepal", "petal width", "score"}));
  EXPECT_EQ(by_name.label_name, "class");

  const CsvData by_index = read_csv(path, {.label_column = int64_t{2}});
  EXPECT_EQ(by_index.labels.to_vector<int64_t>(), by_name.labels.to_vector<int64_t>());
  EXPECT_EQ(by_index.inputs.to_vector<float>(), by_name.inputs.to_vector<float>());

  const CsvData last = read_csv(path);  // default: the last column; not all integers -> f32
  EXPECT_EQ(last.labels.dtype(), DType::f32);
  EXPECT_EQ(last.labels.to_vector<float>(), (std::vector<float>{0.5f, 1, -2}));
  EXPECT_EQ(last.label_name, "score");
  EXPECT_EQ(last.inputs.shape(), (Shape{3, 3}));
}

TEST(DataCsv, NoHeaderOtherDelimiterAndWindowsLineEnds) {
  TempDir dir;
  const std::string path = dir.file("plain.tsv");
  write_text(path, "3;1.0;2.0\r\n4;3.0;4.0\r\n");
  const CsvData d = read_csv(path, {.label_column = 0, .has_header = false, .delimiter = ';'});
  EXPECT_EQ(d.inputs.shape(), (Shape{2, 2}));
  EXPECT_EQ(d.inputs.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(d.labels.to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"1", "2"}));
  EXPECT_THAT(error_of([&] {
                read_csv(path, {.label_column = "x", .has_header = false, .delimiter = ';'});
              }),
              HasSubstr("has_header is false"));
}

// Issue 15 item 23: a file of numbers alone starts with data (Note [CSV header detection]).
TEST(DataCsv, NumericFirstRowIsDataUnlessForced) {
  TempDir dir;
  const std::string path = dir.file("numbers.csv");
  write_text(path, "1.5,2,0\n3,4,1\n5,6,1\n");
  const CsvData detected = read_csv(path, {.label_column = int64_t{2}});
  EXPECT_EQ(detected.inputs.shape(), (Shape{3, 2})) << "the first row was taken for a header";
  EXPECT_EQ(detected.inputs.to_vector<float>(), (std::vector<float>{1.5f, 2, 3, 4, 5, 6}));
  EXPECT_EQ(detected.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(detected.feature_names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(detected.label_name, "2");

  const CsvData forced_data = read_csv(path, {.label_column = int64_t{2}, .has_header = false});
  EXPECT_EQ(forced_data.inputs.to_vector<float>(), detected.inputs.to_vector<float>());
  const CsvData forced_header = read_csv(path, {.label_column = int64_t{2}, .has_header = true});
  EXPECT_EQ(forced_header.inputs.shape(), (Shape{2, 2}));
  EXPECT_EQ(forced_header.feature_names, (std::vector<std::string>{"1.5", "2"}));
  EXPECT_EQ(forced_header.label_name, "0");

  // One name that is not a number makes a header; quoted numbers are numbers.
  write_text(path, "x,2,label\n1,2,0\n");
  EXPECT_EQ(read_csv(path, {.label_column = "label"}).inputs.shape(), (Shape{1, 2}));
  write_text(path, "\"1\", 2 ,0\n3,4,1\n");
  EXPECT_EQ(read_csv(path).inputs.shape(), (Shape{2, 2}));
  // A label given by name needs a header: say why there is none.
  EXPECT_THAT(error_of([&] { read_csv(path, {.label_column = "label"}); }),
              HasSubstr("label column 'label' is given by name but the first line is all numbers"));
  // Forcing data reports a non-number in the first line instead of taking it for a header.
  write_text(path, "1,abc,0\n3,4,1\n");
  EXPECT_EQ(read_csv(path).inputs.shape(), (Shape{1, 2}));
  EXPECT_THAT(error_of([&] { read_csv(path, {.has_header = false}); }),
              HasSubstr(path + ":1: field 2 'abc' is not a number"));
}

TEST(DataCsv, BadNumberNamesLineAndField) {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  write_text(path, "a,b,c\n1,2,3\n4,5,6\n7,abc,9\n");
  const std::string msg = error_of([&] { read_csv(path); });
  EXPECT_THAT(msg, HasSubstr("read_csv: " + path + ":4: field 2 'abc' is not a number"));
  EXPECT_THAT(msg, HasSubstr("column 'b'"));
  write_text(path, "a,b\n1,\n");
  EXPECT_THAT(error_of([&] { read_csv(path); }), HasSubstr(path + ":2: field 2 '' is empty"));
  write_text(path, "a,b,c\n1,2x,0\n");  // a label that is not a number is a class name
  EXPECT_THAT(error_of([&] { read_csv(path); }),
              HasSubstr(path + ":2: field 2 '2x' is not a number"));
}

TEST(DataCsv, WrongFieldCountAndUnknownLabel) {
  TempDir dir;
  const std::string path = dir.file("rows.csv");
  write_text(path, "a,b,c,d\n1,2,3,4\n\n1,2,3\n");
  EXPECT_THAT(error_of([&] { read_csv(path); }), HasSubstr(path + ":4: 3 fields (expected 4"));
  write_text(path, "a,b,c,d\n1,2,3,4\n");
  const std::string msg = error_of([&] { read_csv(path, {.label_column = "label"}); });
  EXPECT_THAT(msg, HasSubstr("no column named 'label'"));
  EXPECT_THAT(msg, HasSubstr("'a', 'b', 'c', 'd'"));
  EXPECT_THAT(error_of([&] { read_csv(path, {.label_column = int64_t{4}}); }),
              HasSubstr("label column 4 is out of range (the file has 4 columns)"));
}

TEST(DataCsv, EmptyFileAndNoRows) {
  TempDir dir;
  write_text(dir.file("empty.csv"), "");
  EXPECT_THAT(error_of([&] { read_csv(dir.file("empty.csv")); }),
              HasSubstr(dir.file("empty.csv") + ": empty file"));
  write_text(dir.file("header.csv"), "a,b\n\n");
  EXPECT_THAT(error_of([&] { read_csv(dir.file("header.csv")); }), HasSubstr("no data rows"));
  EXPECT_THAT(error_of([&] { read_csv(dir.file("missing.csv")); }), HasSubstr("cannot open"));
}

TEST(DataCsv, NoLabelColumnKeepsEveryColumn) {
  TempDir dir;
  write_text(dir.file("x.csv"), "a,b,c\n1,2,3\n4,5,6.5\n");
  CsvOptions o;
  o.has_label = false;
  const CsvData d = read_csv(dir.file("x.csv"), o);
  EXPECT_EQ(d.inputs.shape(), (Shape{2, 3}));
  EXPECT_EQ(d.inputs.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
  EXPECT_FALSE(d.labels.defined());
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"a", "b", "c"}));
  write_text(dir.file("h.csv"), "a,b\n");
  EXPECT_THAT(error_of([&] { read_csv(dir.file("h.csv"), o); }), HasSubstr("no data rows"));
}

// ---- TensorDataset ----

constexpr int64_t kRows = 103;

// Row i: input (i, 2i) f32, target i (i64).
std::shared_ptr<TensorDataset> counting_dataset(int64_t n = kRows) {
  std::vector<float> x(static_cast<size_t>(2 * n));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[2 * i] = static_cast<float>(i);
    x[2 * i + 1] = static_cast<float>(2 * i);
    y[i] = i;
  }
  return std::make_shared<TensorDataset>(from_vector(x, {n, 2}), from_vector(y, {n}));
}

TEST(DataTensorDataset, GetAndGetBatch) {
  auto ds = counting_dataset(10);
  EXPECT_EQ(ds->size(), 10);
  const Example e = ds->get(3);
  EXPECT_EQ(e.input.to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  const std::vector<int64_t> idx{7, 0, 7};
  const Example b = ds->get_batch(idx);
  EXPECT_EQ(b.input.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.input.to_vector<float>(), (std::vector<float>{7, 14, 0, 0, 7, 14}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 7}));
  EXPECT_THAT(error_of([&] { ds->get(10); }), HasSubstr("out of range"));
  const std::vector<int64_t> bad{1, 12};
  EXPECT_THAT(error_of([&] { ds->get_batch(bad); }), HasSubstr("12"));
}

TEST(DataTensorDataset, MismatchedFirstDimsNameBothShapes) {
  const std::string msg = error_of([] { TensorDataset(zeros({4, 3}), zeros({5})); });
  EXPECT_THAT(msg, HasSubstr("[4, 3]"));
  EXPECT_THAT(msg, HasSubstr("[5]"));
  EXPECT_THAT(error_of([] { TensorDataset(scalar_tensor(1.0), zeros({1})); }), HasSubstr("0-d"));
}

// Uses the default get_batch (stacking get(i)): input [i, i*i], target i.
class SquaresDataset : public Dataset {
 public:
  int64_t size() const override { return 6; }
  Example get(int64_t i) const override {
    const auto f = static_cast<float>(i);
    return {from_vector<float>({f, f * f}, {2}),
            scalar_tensor(static_cast<double>(i), {.dtype = DType::i64})};
  }
};

TEST(DataDataset, DefaultGetBatchStacks) {
  SquaresDataset ds;
  const std::vector<int64_t> idx{2, 5};
  const Example b = ds.get_batch(idx);
  EXPECT_EQ(b.input.shape(), (Shape{2, 2}));
  EXPECT_EQ(b.input.to_vector<float>(), (std::vector<float>{2, 4, 5, 25}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{2, 5}));
}

// ---- DataLoader ----

// Every batch of one pass over `loader`, as target lists (checking inputs match targets).
std::vector<std::vector<int64_t>> one_epoch(DataLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  for (Example& batch : loader) {
    const std::vector<int64_t> t = batch.target.to_vector<int64_t>();
    const std::vector<float> x = batch.input.to_vector<float>();
    EXPECT_EQ(x.size(), 2 * t.size());
    for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(x[2 * i], static_cast<float>(t[i]));
    batches.push_back(t);
  }
  return batches;
}

std::vector<int64_t> joined(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST(DataLoaderTest, EverySampleOncePerEpoch) {
  for (const bool shuffle : {false, true}) {
    for (const bool prefetch : {false, true}) {
      DataLoader loader(counting_dataset(),
                        {.batch_size = 10, .shuffle = shuffle, .seed = 5, .prefetch = prefetch});
      EXPECT_EQ(loader.num_batches(), 11);
      EXPECT_EQ(loader.size(), kRows);
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        EXPECT_EQ(loader.epoch(), epoch);
        const auto batches = one_epoch(loader);
        ASSERT_EQ(batches.size(), 11u);
        EXPECT_EQ(batches.back().size(), 3u);
        std::vector<int64_t> all = joined(batches);
        if (!shuffle) {
          EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
        }
        std::sort(all.begin(), all.end());
        std::vector<int64_t> want(kRows);
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(all, want) << "shuffle=" << shuffle << " epoch " << epoch;
      }
      EXPECT_EQ(loader.epoch(), 3);
      EXPECT_EQ(loader.position(), 0);
    }
  }
}

TEST(DataLoaderTest, SeedFixesOrderAndEpochsDiffer) {
  DataLoader a(counting_dataset(), {.batch_size = 16, .shuffle = true, .seed = 11});
  DataLoader b(counting_dataset(), {.batch_size = 16, .shuffle = true, .seed = 11});
  DataLoader c(counting_dataset(), {.batch_size = 16, .shuffle = true, .seed = 12});
  const auto a0 = joined(one_epoch(a)), a1 = joined(one_epoch(a));
  const auto b0 = joined(one_epoch(b)), b1 = joined(one_epoch(b));
  const auto c0 = joined(one_epoch(c));
  EXPECT_EQ(a0, b0);
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a0, a1) << "each epoch must reshuffle";
  EXPECT_NE(a0, c0) << "a different seed must give a different order";
  EXPECT_EQ(a0, shuffled_indices(kRows, 11, 0));
  EXPECT_EQ(a1, shuffled_indices(kRows, 11, 1));
  EXPECT_EQ(a.batch_indices(1, 2), std::vector<int64_t>(a1.begin() + 32, a1.begin() + 48));
}

TEST(DataLoaderTest, ShuffleIsPinnedAcrossPlatforms) {
  // The permutation is part of the reproducibility contract: these values must never change.
  EXPECT_EQ(shuffled_indices(10, 42, 0), (std::vector<int64_t>{9, 3, 6, 4, 0, 7, 5, 2, 8, 1}));
  EXPECT_EQ(shuffled_indices(10, 42, 1), (std::vector<int64_t>{9, 5, 1, 0, 7, 2, 3, 8, 4, 6}));
  EXPECT_TRUE(shuffled_indices(0, 1, 0).empty());
  EXPECT_EQ(shuffled_indices(1, 1, 0), (std::vector<int64_t>{0}));
}

TEST(DataLoaderTest, DropLastCounts) {
  DataLoader keep(counting_dataset(), {.batch_size = 10});
  DataLoader drop(counting_dataset(), {.batch_size = 10, .drop_last = true});
  EXPECT_EQ(keep.num_batches(), 11);
  EXPECT_EQ(drop.num_batches(), 10);
  const auto batches = one_epoch(drop);
  ASSERT_EQ(batches.size(), 10u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 10u);
  DataLoader even(counting_dataset(100), {.batch_size = 10, .drop_last = true});
  EXPECT_EQ(even.num_batches(), 10);
  DataLoader none(counting_dataset(5), {.batch_size = 10, .drop_last = true});
  EXPECT_EQ(none.num_batches(), 0);
  EXPECT_TRUE(one_epoch(none).empty());
  EXPECT_EQ(none.epoch(), 1);
  EXPECT_THAT(error_of([] { DataLoader(counting_dataset(), {.batch_size = 0}); }),
              HasSubstr("batch_size"));
}

TEST(DataLoaderTest, PrefetchOnAndOffGiveIdenticalBatches) {
  DataLoader on(counting_dataset(),
                {.batch_size = 7, .shuffle = true, .seed = 3, .prefetch = true});
  DataLoader off(counting_dataset(),
                 {.batch_size = 7, .shuffle = true, .seed = 3, .prefetch = false});
  for (int epoch = 0; epoch < 3; ++epoch)
    EXPECT_EQ(one_epoch(on), one_epoch(off)) << "epoch " << epoch;
}

// A dataset whose examples take a while, to catch the worker mid-batch.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(int64_t fail_at = -1) : fail_at_(fail_at) {}
  int64_t size() const override { return 40; }
  Example get(int64_t i) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EMBER_CHECK(i != fail_at_, "SlowDataset: example ", i, " is broken");
    return {full({2}, static_cast<double>(i)),
            scalar_tensor(static_cast<double>(i), {.dtype = DType::i64})};
  }

 private:
  int64_t fail_at_;
};

TEST(DataLoaderTest, EarlyBreakAndDestructionDoNotHang) {
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 20; ++round) {
    DataLoader loader(std::make_shared<SlowDataset>(), {.batch_size = 4, .prefetch = true});
    int seen = 0;
    for (Example& batch : loader) {
      (void)batch;
      if (++seen == 2) break;  // the worker is now assembling (or holding) batch 2
    }
    EXPECT_EQ(loader.position(), 2);
    if (round % 2 == 0) {
      // The next loop continues mid-epoch.
      std::vector<int64_t> rest;
      for (Example& batch : loader) {
        for (int64_t t : batch.target.to_vector<int64_t>()) rest.push_back(t);
        break;
      }
      EXPECT_EQ(rest, (std::vector<int64_t>{8, 9, 10, 11}));
    }
  }  // destruction with the worker mid-batch or parked
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(DataLoaderTest, WorkerExceptionsReachTheCaller) {
  for (const bool prefetch : {true, false}) {
    DataLoader loader(std::make_shared<SlowDataset>(9), {.batch_size = 4, .prefetch = prefetch});
    int64_t batches = 0;
    const std::string msg = error_of([&] {
      for (Example& batch : loader) {
        (void)batch;
        ++batches;
      }
    });
    EXPECT_THAT(msg, HasSubstr("example 9 is broken"));
    EXPECT_EQ(batches, 2);  // batches 0 and 1 were fine; batch 2 holds example 9
    EXPECT_EQ(loader.position(), 2);
  }
}

TEST(DataLoaderTest, SetStateResumesExactly) {
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 99};
  std::vector<std::vector<int64_t>> reference;
  {
    DataLoader loader(counting_dataset(), options);
    for (int e = 0; e < 3; ++e)
      for (const auto& b : one_epoch(loader)) reference.push_back(b);
  }
  const int64_t per_epoch = 13;  // ceil(103 / 8)
  for (const int64_t stop_after : {int64_t{1}, int64_t{13}, int64_t{17}, int64_t{25}}) {
    int64_t saved_epoch = -1, saved_position = -1;
    std::vector<std::vector<int64_t>> seen;
    {
      DataLoader loader(counting_dataset(), options);
      for (int e = 0; e < 3 && saved_epoch < 0; ++e) {
        for (Example& batch : loader) {
          seen.push_back(batch.target.to_vector<int64_t>());
          if (static_cast<int64_t>(seen.size()) == stop_after) {
            saved_epoch = loader.epoch();
            saved_position = loader.position();  // checkpoint taken inside the loop body
            break;
          }
        }
      }
    }
    EXPECT_EQ(saved_epoch * per_epoch + saved_position, stop_after);
    DataLoader resumed(counting_dataset(), options);
    resumed.set_state(saved_epoch, saved_position);
    while (seen.size() < reference.size())
      for (const auto& b : one_epoch(resumed)) seen.push_back(b);
    EXPECT_EQ(seen, reference) << "resumed after " << stop_after << " batches";
  }
  DataLoader loader(counting_dataset(), options);
  EXPECT_THAT(error_of([&] { loader.set_state(0, 14); }),
              HasSubstr("position is 14 (expected 0 to 13"));
}

// Issue 15 item 18: a state resumes only into a loader that makes the same batches.
TEST(DataLoaderTest, LoadStateRefusesOtherOptions) {
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 99};
  DataLoader saved(counting_dataset(), options);
  auto it = saved.begin();
  for (int i = 0; i < 2; ++i) ++it;  // 3 batches handed out
  const DataLoaderState s = saved.state();
  EXPECT_EQ(s.epoch, 0);
  EXPECT_EQ(s.position, 3);
  EXPECT_EQ(s.size, kRows);
  EXPECT_EQ(s.batch_size, 8);
  EXPECT_TRUE(s.shuffle);
  EXPECT_FALSE(s.drop_last);
  EXPECT_EQ(s.seed, 99u);

  struct Case {
    DataLoaderOptions options;
    int64_t rows;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {{.batch_size = 4, .shuffle = true, .seed = 99},
       kRows,
       {"batch_size (got 8 in the state, expected 4"}},
      {{.batch_size = 8, .shuffle = false, .seed = 99},
       kRows,
       {"shuffle (got true in the state, expected false"}},
      {{.batch_size = 8, .shuffle = true, .seed = 7},
       kRows,
       {"seed (got 99 in the state, expected 7"}},
      {{.batch_size = 8, .shuffle = true, .drop_last = true, .seed = 99},
       kRows,
       {"drop_last (got false"}},
      {{.batch_size = 8, .shuffle = true, .seed = 99},
       kRows - 1,
       {"dataset size (got 103 in the state, expected 102"}},
      {{.batch_size = 16, .shuffle = false, .seed = 99},
       kRows,
       {"batch_size (got 8", "shuffle (got true"}},
  };
  for (const Case& c : cases) {
    DataLoader other(counting_dataset(c.rows), c.options);
    const std::string msg = error_of([&] { other.load_state(s); });
    EXPECT_THAT(
        msg,
        HasSubstr("DataLoader::load_state: the state was taken from a loader with other options"));
    for (const std::string& part : c.says) EXPECT_THAT(msg, HasSubstr(part));
    EXPECT_EQ(other.epoch(), 0) << "a refused state changed nothing";
    EXPECT_EQ(other.position(), 0);
  }

  // The same options (prefetch and device do not change the batches) resume exactly.
  DataLoader same(counting_dataset(),
                  {.batch_size = 8, .shuffle = true, .seed = 99, .prefetch = false});
  same.load_state(s);
  ++it;
  EXPECT_EQ(same.begin()->target.to_vector<int64_t>(), it->target.to_vector<int64_t>());
  // Without shuffling the seed plays no part, so it may differ.
  DataLoader plain_a(counting_dataset(), {.batch_size = 8, .seed = 1});
  DataLoader plain_b(counting_dataset(), {.batch_size = 8, .seed = 2});
  (void)plain_a.begin();
  EXPECT_NO_THROW(plain_b.load_state(plain_a.state()));
  EXPECT_EQ(plain_b.position(), 1);
  // A position past the end of an epoch is refused as set_state refuses it.
  DataLoaderState far = s;
  far.position = 14;
  EXPECT_THAT(error_of([&] { same.load_state(far); }),
              HasSubstr("position is 14 (expected 0 to 13"));
}

// ---- Fashion-MNIST ----

TEST(DataFashionMnist, LoadsSyntheticFilesWithUncompressedNames) {
  TempDir dir;
  std::vector<uint8_t> pixels(3 * 28 * 28, 0);
  pixels[0] = 255;
  pixels[1] = 51;
  write_idx(dir.file("t10k-images-idx3-ubyte"), from_vector(pixels, {3, 28, 28}));
  write_idx(dir.file("t10k-labels-idx1-ubyte"), from_vector<uint8_t>({9, 0, 4}, {3}));
  const FashionMnist fm = load_fashion_mnist("test", dir.path().string());
  EXPECT_EQ(fm.images.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(fm.images.dtype(), DType::f32);
  EXPECT_EQ(fm.flat_images().shape(), (Shape{3, 784}));
  const std::vector<float> v = fm.flat_images().to_vector<float>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 51.0f / 255.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(fm.labels.dtype(), DType::i64);
  EXPECT_EQ(fm.labels.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 4}));
  EXPECT_EQ(fashion_mnist_class_names()[9], "Ankle boot");
  write_idx(dir.file("t10k-labels-idx1-ubyte"), from_vector<uint8_t>({9, 10, 4}, {3}));
  EXPECT_THAT(error_of([&] { load_fashion_mnist("test", dir.path().string()); }),
              HasSubstr("label 10"));
}

TEST(DataFashionMnist, MissingFilesSayHowToInstall) {
  const std::string msg = error_of([] { load_fashion_mnist("train", "/nonexistent/ember-fm"); });
  EXPECT_THAT(msg, HasSubstr("/nonexistent/ember-fm"));
  EXPECT_THAT(msg, HasSubstr("apt-get install dataset-fashion-mnist"));
  EXPECT_THAT(msg, HasSubstr("EMBER_FASHION_MNIST"));
  EXPECT_THAT(error_of([] { load_fashion_mnist("validation"); }), HasSubstr("split 'validation'"));
}

TEST(DataFashionMnist, RealFiles) {
  const std::string dir = fashion_mnist_directory();
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz") &&
      !fs::exists(fs::path(dir) / "train-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << dir
                 << " (apt-get install dataset-fashion-mnist, or set EMBER_FASHION_MNIST)";
  for (const auto& [split, n] :
       {std::pair<std::string, int64_t>{"train", 60000}, {"test", 10000}}) {
    const FashionMnist fm = load_fashion_mnist(split);
    EXPECT_EQ(fm.images.shape(), (Shape{n, 1, 28, 28}));
    EXPECT_EQ(fm.labels.shape(), (Shape{n}));
    EXPECT_EQ(fm.images.min().item<float>(), 0.0f);
    EXPECT_EQ(fm.images.max().item<float>(), 1.0f);
    const std::vector<int64_t> labels = fm.labels.to_vector<int64_t>();
    EXPECT_EQ(*std::min_element(labels.begin(), labels.end()), 0);
    EXPECT_EQ(*std::max_element(labels.begin(), labels.end()), 9);
    std::vector<int64_t> counts(10, 0);
    for (int64_t y : labels) ++counts[y];
    for (int64_t c : counts) EXPECT_EQ(c, n / 10) << split << ": the classes are balanced";
  }
}

}  // namespace
