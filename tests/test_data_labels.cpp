// tests/test_data_labels.cpp — CSV text labels (sorted class names, an imposed mapping, the
// errors), data::Standardizer, and the process defaults set_default_dtype /
// set_default_device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "ember/data/preprocess.hpp"
#include "ember/data/readers.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::write_text;
using test_util::error_of;
using ::testing::HasSubstr;

}  // namespace

TEST(DataCsvLabels, TextLabelsMapToSortedClasses) {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("iris.csv");
  write_text(path, "a,b,species\n1,2,virginica\n3,4,setosa\n5,6,versicolor\n7,8,setosa\n");
  const data::CsvData d = data::read_csv(path, {.label_column = "species"});
  EXPECT_EQ(d.classes, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(d.labels.dtype(), DType::i64);
  EXPECT_EQ(d.labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 0}));
  EXPECT_EQ(d.inputs.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  // The order of the rows does not change the mapping.
  write_text(path, "a,b,species\n3,4,setosa\n5,6,versicolor\n1,2,virginica\n");
  EXPECT_EQ(data::read_csv(path).classes, d.classes);
  // One non-number makes the whole column text: "10" and "9" are names, sorted as text.
  write_text(path, "a,y\n1,10\n2,9\n3,cat\n");
  const data::CsvData mixed = data::read_csv(path);
  EXPECT_EQ(mixed.classes, (std::vector<std::string>{"10", "9", "cat"}));
  EXPECT_EQ(mixed.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  // Numeric labels are unchanged and have no class names.
  write_text(path, "a,y\n1,2\n2,0\n");
  EXPECT_TRUE(data::read_csv(path).classes.empty());
  EXPECT_EQ(data::read_csv(path).labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
}

TEST(DataCsvLabels, GivenClassesImposeTheMappingAndRefuseUnknownLabels) {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("test.csv");
  write_text(path, "x,label\n1,dog\n2,cat\n");
  const std::vector<std::string> classes{"dog", "bird", "cat"};
  const data::CsvData d = data::read_csv(path, {.classes = classes});
  EXPECT_EQ(d.classes, classes);
  EXPECT_EQ(d.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  write_text(path, "x,label\n1,dog\n2,fish\n");
  EXPECT_THAT(error_of([&] { data::read_csv(path, {.classes = classes}); }),
              HasSubstr(path + ":3: label 'fish' (column 'label') is not a known class "
                               "(expected one of 'dog', 'bird', 'cat')"));
  write_text(path, "x,label\n1,dog\n2,\n");
  EXPECT_THAT(error_of([&] { data::read_csv(path); }),
              HasSubstr(path + ":3: field 2 '' is empty (expected a number or a class name"));
}

TEST(DataStandardizer, FitsMeanAndPopulationStdAndTransforms) {
  const Tensor x = tensor({1, 10, 3, 10, 5, 10}, {3, 2});
  const data::Standardizer s = data::Standardizer::fit(x);
  ASSERT_EQ(s.features(), 2u);
  EXPECT_DOUBLE_EQ(s.mean[0], 3.0);
  EXPECT_DOUBLE_EQ(s.mean[1], 10.0);
  EXPECT_NEAR(s.scale[0], std::sqrt(8.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.scale[1], 1.0);  // a constant column: scale 1, values 0
  const std::vector<float> t = s.transform(x).to_vector<float>();
  const float z = static_cast<float>(2.0 / std::sqrt(8.0 / 3.0));
  const std::vector<float> want{-z, 0, 0, 0, z, 0};
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], want[i], 1e-6) << i;
  EXPECT_THAT(error_of([&] {
                s.transform(tensor({1, 2, 3}, {1, 3}));
              }),
              HasSubstr("Standardizer::transform: inputs [1, 3] (expected [N, 2]"));
  EXPECT_THAT(error_of([&] {
                data::Standardizer::fit(tensor({1, 2, 3}));
              }),
              HasSubstr("Standardizer::fit: inputs [3] (expected [N, F] with N >= 1)"));
}

TEST(Defaults, SetDefaultDtypeChangesFactoriesAndReturnsThePrevious) {
  ASSERT_EQ(default_dtype(), DType::f32);
  EXPECT_EQ(set_default_dtype(DType::f64), DType::f32);
  EXPECT_EQ(default_dtype(), DType::f64);
  EXPECT_EQ(zeros({2}).dtype(), DType::f64);
  EXPECT_EQ(ones({2}).dtype(), DType::f64);
  EXPECT_EQ(full({2}, 0.5).dtype(), DType::f64);
  EXPECT_EQ(empty({2}).dtype(), DType::f64);
  EXPECT_EQ(arange(3).dtype(), DType::f64);
  EXPECT_EQ(linspace(0, 1, 3).dtype(), DType::f64);
  EXPECT_EQ(scalar_tensor(2.0).dtype(), DType::f64);
  EXPECT_EQ(tensor({1, 2}).dtype(), DType::f64);
  EXPECT_EQ(zeros({2}, {.dtype = DType::i32}).dtype(), DType::i32);        // a given dtype wins
  EXPECT_EQ(from_vector(std::vector<float>{1}, {1}).dtype(), DType::f32);  // T's dtype
  EXPECT_EQ(set_default_dtype(DType::bf16), DType::f64);
  EXPECT_EQ(ones({1}).dtype(), DType::bf16);
  EXPECT_THAT(error_of([] { set_default_dtype(DType::i64); }),
              HasSubstr("set_default_dtype: dtype i64 is not a floating dtype (expected f32, "
                        "f64, f16 or bf16)"));
  EXPECT_EQ(default_dtype(), DType::bf16);  // a refused dtype changes nothing
  set_default_dtype(DType::f32);
  EXPECT_EQ(zeros({2}).dtype(), DType::f32);
  EXPECT_EQ(arange(3).dtype(), DType::f32);
}

TEST(Defaults, SetDefaultDeviceReturnsThePrevious) {
  const Device before = default_device();
  EXPECT_EQ(set_default_device(Device::cpu()), before);
  EXPECT_EQ(set_default_device(before), Device::cpu());
  EXPECT_EQ(default_device(), before);
}
