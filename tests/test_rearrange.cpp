// tests/test_rearrange.cpp — what the op fixtures do not show about the rearrangement and
// indexing ops: one-argument where, empty and 0-d inputs, integer dtypes kept, and the errors
// (each names the op, what came and what was expected).
#include <gtest/gtest.h>

#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::ints;

TEST(Rearrange, OneArgumentWhereGivesACoordinateTensorPerDim) {
  Tensor c = from_vector<bool>({false, true, false, true, true, false}, {2, 3});
  std::vector<Tensor> w = where(c);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(ints(w[0]), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(ints(w[1]), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(nonzero(zeros({2, 0})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(scalar_tensor(3.0)).shape(), (Shape{1, 0}));
  EXPECT_EQ(masked_select(randn({3}), from_vector<bool>({false, false, false}, {3})).numel(), 0);
}

TEST(Rearrange, IntegerTensorsKeepTheirDtype) {
  Tensor x = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(flip(x, {1}).dtype(), DType::i32);
  EXPECT_EQ(ints(flip(x, {1})), (std::vector<int64_t>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(ints(roll(x, {-1}, {1})), (std::vector<int64_t>{2, 3, 1, 5, 6, 4}));
  EXPECT_EQ(ints(tril(x)), (std::vector<int64_t>{1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(ints(pad(x, {1, 0}, "constant", 9)), (std::vector<int64_t>{9, 1, 2, 3, 9, 4, 5, 6}));
  EXPECT_EQ(repeat(x, {1, 1}).data_ptr() == x.data_ptr(), false);  // repeat always copies
}

// PyTorch leaves index_copy's repeated indices to whichever copy lands last; ember makes the
// last one win on every device (it used to add the duplicates up), and the overwritten source
// rows get no gradient.
TEST(Rearrange, IndexCopyWithRepeatedIndicesKeepsTheLastSourceRow) {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_available()) devices.push_back(Device::cuda(0));
  for (Device dev : devices) {
    SCOPED_TRACE(dev.str());
    const Tensor x = zeros({4, 2}, {.device = dev});
    const Tensor index = from_vector<int64_t>({2, 0, 2, 2, 0}, {5}).to(dev);
    Tensor source = from_vector<float>({1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, {5, 2}).to(dev);
    source.requires_grad_(true);
    const Tensor y = index_copy(x, 0, index, source);
    EXPECT_EQ(y.to(Device::cpu()).to_vector<float>(), (std::vector<float>{5, 5, 0, 0, 4, 4, 0, 0}));
    (y * from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}).to(dev)).sum().backward();
    EXPECT_EQ(source.grad().to(Device::cpu()).to_vector<float>(),
              (std::vector<float>{0, 0, 0, 0, 0, 0, 5, 6, 1, 2}));
  }
}

TEST(Rearrange, BadArgumentsAreNamed) {
  Tensor x = randn({2, 3});
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string e = test_util::error_of([&] { pad(x, {1}); });
  EXPECT_TRUE(has(e, "pad: pads [1] for input shape [2, 3]")) << e;
  e = test_util::error_of([&] { pad(x, {3, 0}, "reflect"); });
  EXPECT_TRUE(has(e, "expected pads <= 2: size - 1")) << e;
  e = test_util::error_of([&] { pad(x, {1, 1}, "wrap"); });
  EXPECT_TRUE(has(e, "pad: mode 'wrap'")) << e;
  e = test_util::error_of([&] { roll(x, {1, 2}, {0}); });
  EXPECT_TRUE(has(e, "roll: 2 shifts for 1 dims")) << e;
  e = test_util::error_of([&] { repeat(x, {2}); });
  EXPECT_TRUE(has(e, "repeat: 1 repeats [2] for a 2-d input")) << e;
  e = test_util::error_of([&] { flip(x, {0, -2}); });
  EXPECT_TRUE(has(e, "flip: dim -2 is listed twice")) << e;
  e = test_util::error_of([&] { movedim(x, {0}, {0, 1}); });
  EXPECT_TRUE(has(e, "movedim: source [0] and destination [0, 1]")) << e;
  e = test_util::error_of([&] { tril(randn({3})); });
  EXPECT_TRUE(has(e, "tril: input shape [3] (expected at least 2 dims")) << e;
  e = test_util::error_of([&] { unfold(x, 1, 4, 1); });
  EXPECT_TRUE(has(e, "unfold: size 4 for dim 1 of size 3")) << e;
  e = test_util::error_of([&] { pixel_shuffle(randn({1, 3, 2, 2}), 2); });
  EXPECT_TRUE(has(e, "pixel_shuffle: input shape [1, 3, 2, 2]")) << e;
  e = test_util::error_of([&] { one_hot(from_vector<int64_t>({0, 5}, {2}), 3); });
  EXPECT_TRUE(has(e, "one_hot: class index 5 is out of range for 3 classes")) << e;
  e = test_util::error_of([&] { one_hot(from_vector<int64_t>({-1}, {1})); });
  EXPECT_TRUE(has(e, "one_hot: class index -1 is negative")) << e;
  e = test_util::error_of([&] { one_hot(x); });
  EXPECT_TRUE(has(e, "one_hot: unsupported dtype f32")) << e;
  e = test_util::error_of([&] { masked_select(x, x); });
  EXPECT_TRUE(has(e, "masked_select: mask dtype f32 (expected bool)")) << e;
  e = test_util::error_of([&] { index_add(x, 0, from_vector<int64_t>({0}, {1}), randn({2, 3})); });
  EXPECT_TRUE(has(e, "index_add: source shape [2, 3] for input shape [2, 3] and 1 indices")) << e;
  e = test_util::error_of([&] { index_fill(x, 0, from_vector<int64_t>({2}, {1}), 1.0); });
  EXPECT_TRUE(has(e, "index 2")) << e;
  e = test_util::error_of([&] { meshgrid({}); });
  EXPECT_TRUE(has(e, "meshgrid: no tensors")) << e;
  e = test_util::error_of([&] { repeat_interleave(x, from_vector<int64_t>({1, 2}, {2}), 1); });
  EXPECT_TRUE(has(e, "repeat_interleave: repeats shape [2] for dim 1 of size 3")) << e;
}

}  // namespace
