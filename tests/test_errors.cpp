// tests/test_errors.cpp — bad input is refused with an ember::Error whose message names the
// op and says what came and what was expected (STYLE §6). Nothing may crash, and the library
// keeps working after an error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::i64;
using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(Errors, MatmulShapeMismatch) {
  Tensor a = randn({2, 3}), b = randn({4, 5});
  EXPECT_THROW(matmul(a, b), Error);
  const std::string msg = error_of([&] { matmul(a, b); });
  EXPECT_THAT(msg, HasSubstr("matmul"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[4, 5]"));
}

TEST(Errors, MatmulBatchDimsDoNotBroadcast) {
  Tensor a = randn({2, 3, 4}), b = randn({3, 4, 5});
  EXPECT_THROW(matmul(a, b), Error);
  const std::string msg = error_of([&] { matmul(a, b); });
  EXPECT_THAT(msg, HasSubstr("matmul"));
  EXPECT_THAT(msg, HasSubstr("[2, 3, 4]"));
  EXPECT_THAT(msg, HasSubstr("[3, 4, 5]"));
}

TEST(Errors, AddNotBroadcastable) {
  Tensor a = randn({2, 3}), b = randn({4, 5});
  EXPECT_THROW(add(a, b), Error);
  const std::string msg = error_of([&] { add(a, b); });
  EXPECT_THAT(msg, HasSubstr("add"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[4, 5]"));
  // The operator form reports the same op.
  const std::string msg2 = error_of([&] { (void)(randn({3}) + randn({4})); });
  EXPECT_THAT(msg2, HasSubstr("add"));
  EXPECT_THAT(msg2, HasSubstr("[3]"));
  EXPECT_THAT(msg2, HasSubstr("[4]"));
}

TEST(Errors, MulNotBroadcastableNamesMul) {
  const std::string msg = error_of([] { mul(randn({2, 3, 4}), randn({3, 3})); });
  EXPECT_THAT(msg, HasSubstr("mul"));
  EXPECT_THAT(msg, HasSubstr("[2, 3, 4]"));
  EXPECT_THAT(msg, HasSubstr("[3, 3]"));
}

// Binary elementwise ops promote as torch.result_type (tests/test_promotion.cpp); a promoted
// dtype the op does not compute, and the products, which do not promote, are refused.
TEST(Errors, DtypeMismatchIsPromotedOrRefused) {
  Tensor a = randn({3});
  Tensor b = randn({3}, {.dtype = DType::f64});
  EXPECT_EQ(add(a, b).dtype(), DType::f64);
  const std::string msg = error_of([&] { pow(a.to(DType::i32), b.to(DType::i64)); });
  EXPECT_THAT(msg, HasSubstr("pow"));
  EXPECT_THAT(msg, HasSubstr("unsupported dtype i64"));
  EXPECT_THROW(matmul(randn({2, 2}), randn({2, 2}, {.dtype = DType::f64})), Error);
}

TEST(Errors, IndexSelectOutOfRange) {
  Tensor x = randn({4, 3});
  Tensor idx = i64({0, 7});
  EXPECT_THROW(index_select(x, 0, idx), Error);
  const std::string msg = error_of([&] { index_select(x, 0, idx); });
  EXPECT_THAT(msg, HasSubstr("index_select"));
  EXPECT_THAT(msg, HasSubstr("7"));
  EXPECT_THAT(msg, HasSubstr("4"));
  const std::string neg = error_of([&] { index_select(x, 0, i64({-5})); });
  EXPECT_THAT(neg, HasSubstr("-5"));
}

TEST(Errors, GatherAndEmbeddingOutOfRange) {
  const std::string g = error_of([] {
    gather(randn({2, 3}), 1, from_vector<int64_t>({0, 3, 1, 1}, {2, 2}));
  });
  EXPECT_THAT(g, HasSubstr("gather"));
  EXPECT_THAT(g, HasSubstr("3"));
  const std::string e = error_of([] { embedding(randn({5, 2}), i64({1, 9})); });
  EXPECT_THAT(e, HasSubstr("9"));
  EXPECT_THAT(e, HasSubstr("5"));
}

TEST(Errors, ReshapeElementCount) {
  Tensor x = randn({2, 3});
  EXPECT_THROW(x.reshape({4, 2}), Error);
  const std::string msg = error_of([&] { x.reshape({4, 2}); });
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[4, 2]"));
  EXPECT_THROW(reshape(x, {-1, 4}), Error);  // 6 is not a multiple of 4
  EXPECT_THROW(x.reshape({-1, -1}), Error);  // only one -1 may be inferred
  EXPECT_THROW(x.view({5}), Error);
}

TEST(Errors, ViewOfIncompatibleStrides) {
  Tensor x = randn({3, 4}).t();  // not contiguous
  EXPECT_THROW(x.view({12}), Error);
  EXPECT_NO_THROW(x.reshape({12}));  // reshape copies instead
}

TEST(Errors, RankOverTheLimit) {
  EXPECT_THROW(Shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
  const std::string msg = error_of([] { Shape s({2, 1, 1, 1, 1, 1, 1, 1, 2}); });
  EXPECT_THAT(msg, HasSubstr("8"));
  EXPECT_THAT(msg, HasSubstr("9"));
  Tensor x = zeros({1, 1, 1, 1, 1, 1, 1, 1});  // rank 8 is allowed
  EXPECT_EQ(x.dim(), 8);
  EXPECT_THROW(x.unsqueeze(0), Error);
  EXPECT_THROW(zeros(Shape(std::vector<int64_t>(9, 1))), Error);
}

TEST(Errors, DimOutOfRange) {
  const std::string msg = error_of([] { softmax(randn({2, 3}), 2); });
  EXPECT_THAT(msg, HasSubstr("softmax"));
  EXPECT_THAT(msg, HasSubstr("2"));
  EXPECT_THROW(sum(randn({2, 3}), {-3}), Error);
  EXPECT_THROW(randn({2, 3}).transpose(0, 5), Error);
}

TEST(Errors, BackwardWithoutRequiresGrad) {
  Tensor y = randn({3}).sum();
  EXPECT_THROW(y.backward(), Error);
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("grad"));
}

TEST(Errors, NonScalarBackwardNeedsAGradient) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), Error);
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("scalar"));
  // The graph was not consumed by the failed call: a proper gradient still works.
  EXPECT_NO_THROW(y.backward(ones({3})));
}

TEST(Errors, BackwardGradientShapeMismatch) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor y = x * 2.0;
  const std::string msg = error_of([&] { y.backward(ones({4})); });
  EXPECT_THAT(msg, HasSubstr("[3]"));
  EXPECT_THAT(msg, HasSubstr("[4]"));
}

TEST(Errors, SecondBackwardThroughFreedGraph) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor y = (x * x).sum();
  y.backward();
  EXPECT_THROW(y.backward(), Error);
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("retain_graph"));
}

TEST(Errors, InPlaceChangeToSavedTensor) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor a = x * 2.0;  // non-leaf
  Tensor b = a * a;    // saves a for backward
  {
    NoGradGuard guard;
    a.mul_(2.0);
  }
  EXPECT_THROW(b.sum().backward(), Error);
  const std::string msg = error_of([&] { b.sum().backward(); });
  EXPECT_THAT(msg, AnyOf(HasSubstr("modified"), HasSubstr("version")));
}

TEST(Errors, InPlaceChangeToSavedLeaf) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor y = (x.log() * 0.0 + x.exp()).sum();  // log and exp both depend on x
  {
    NoGradGuard guard;
    x.add_(1.0);
  }
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, AnyOf(HasSubstr("modified"), HasSubstr("version")));
}

// The scalar in-place forms check the catalogue like every op (issue 14: one dtype check):
// integers keep their dtype with an integral scalar, as PyTorch, and what cannot be stored
// in place, or has no kernel, is refused by name (bool arithmetic reached a kernel assert).
TEST(Errors, InPlaceScalarFormsFollowTheCatalogue) {
  Tensor i = from_vector<int64_t>({1, -2, 3}, {3});
  i.add_(2.0);
  i.mul_(3.0);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 15}));
  EXPECT_THAT(error_of([&] { i.mul_(0.5); }),
              HasSubstr("mul_: the result with 0.5 is a float, which the i64 tensor cannot hold "
                        "in place"));
  Tensor flags = from_vector<bool>({true, false}, {2});
  EXPECT_THAT(error_of([&] { flags.add_(1.0); }), HasSubstr("add: unsupported dtype bool on cpu"));
  EXPECT_THAT(error_of([&] { flags.mul_(flags); }), HasSubstr("mul: unsupported dtype bool"));
  EXPECT_THAT(error_of([&] { flags.clamp_(0.0, 1.0); }),
              HasSubstr("clamp: unsupported dtype bool"));
  EXPECT_THAT(error_of([&] { i.clamp_(0.5, 1.0); }),
              HasSubstr("clamp_: the result with 0.5 is a float"));
  i.clamp_(0.0, 10.0);  // integral bounds keep the integer dtype, as PyTorch
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 10}));
  Tensor f = from_vector<float>({-1, 0.5, 3}, {3});
  EXPECT_THAT(error_of([&] { f.clamp_(2.0, 1.0); }),
              HasSubstr("clamp_: lower bound 2 is above upper bound 1"));
  f.clamp_(0.0, 1.0);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 0.5, 1}));
}

TEST(Errors, InPlaceOnParameterWhileRecording) {
  Tensor p = parameter(randn({3}));
  ASSERT_TRUE(p.requires_grad());
  EXPECT_THROW(p.add_(1.0), Error);
  const std::string msg = error_of([&] { p.mul_(2.0); });
  EXPECT_THAT(msg, HasSubstr("grad"));
  // Under NoGradGuard the same update is allowed and writes the same buffer.
  const std::vector<float> before = p.to_vector<float>();
  void* ptr = p.data_ptr();
  {
    NoGradGuard guard;
    EXPECT_NO_THROW(p.add_(1.0));
  }
  const std::vector<float> after = p.to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_FLOAT_EQ(after[i], before[i] + 1.0f);
  EXPECT_EQ(p.data_ptr(), ptr);
}

TEST(Errors, RequiresGradOnIntegerOrNonLeaf) {
  EXPECT_THROW(i64({1, 2}).requires_grad_(), Error);
  Tensor x = randn({2}, {.requires_grad = true});
  Tensor y = x * 2.0;
  EXPECT_THROW(y.requires_grad_(), Error);
}

TEST(Errors, CrossEntropyLabelOutOfRange) {
  Tensor logits = randn({2, 3});
  Tensor labels = i64({0, 5});
  EXPECT_THROW(cross_entropy(logits, labels), Error);
  const std::string msg = error_of([&] { cross_entropy(logits, labels); });
  EXPECT_THAT(msg, HasSubstr("cross_entropy"));
  EXPECT_THAT(msg, HasSubstr("5"));
  EXPECT_THAT(msg, HasSubstr("3"));
  // A negative label that is not the ignore_index is out of range too.
  EXPECT_THROW(cross_entropy(logits, i64({0, -1})), Error);
  EXPECT_THROW(nll_loss(log_softmax(logits, 1), i64({3, 0})), Error);
}

TEST(Errors, CrossEntropyTargetShape) {
  const std::string msg = error_of([] { cross_entropy(randn({4, 3}), i64({0, 1, 2})); });
  EXPECT_THAT(msg, HasSubstr("cross_entropy"));
  EXPECT_THAT(msg, HasSubstr("[4, 3]"));
  EXPECT_THAT(msg, HasSubstr("[3]"));
}

TEST(Errors, CatShapeMismatch) {
  const std::string msg = error_of([] { cat({randn({2, 3}), randn({2, 4})}, 0); });
  EXPECT_THAT(msg, HasSubstr("cat"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[2, 4]"));
  EXPECT_THROW(stack({randn({2, 3}), randn({3, 2})}, 0), Error);
  EXPECT_THROW(cat({}, 0), Error);
}

TEST(Errors, LinearAndLayerNormShapes) {
  const std::string msg = error_of([] { linear(randn({3, 4}), randn({5, 6})); });
  EXPECT_THAT(msg, HasSubstr("linear"));
  EXPECT_THAT(msg, HasSubstr("[3, 4]"));
  EXPECT_THAT(msg, HasSubstr("[5, 6]"));
  EXPECT_THROW(layer_norm(randn({3, 4}), {5}), Error);
}

TEST(Errors, ExpandIncompatible) {
  const std::string msg = error_of([] { randn({3, 2}).expand({3, 4}); });
  EXPECT_THAT(msg, HasSubstr("[3, 2]"));
  EXPECT_THAT(msg, HasSubstr("[3, 4]"));
}

TEST(Errors, AssignShapeChange) {
  Tensor p = parameter(zeros({2, 3}));
  NoGradGuard guard;
  const std::string msg = error_of([&] { p.assign_(ones({3, 2})); });
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[3, 2]"));
  EXPECT_EQ(p.shape(), Shape({2, 3}));
}

TEST(Errors, ItemOfManyElements) {
  EXPECT_THROW(randn({3}).item<float>(), Error);
  EXPECT_THROW(randn({3}).data<double>(), Error);  // dtype mismatch
}

TEST(Errors, LibraryKeepsWorkingAfterErrors) {
  for (int i = 0; i < 3; ++i) EXPECT_THROW(matmul(randn({2, 3}), randn({4, 5})), Error);
  {
    // An exception inside a NoGradGuard scope still restores grad mode.
    try {
      NoGradGuard guard;
      matmul(randn({2, 3}), randn({4, 5}));
    } catch (const Error&) {
    }
  }
  EXPECT_TRUE(grad_mode_enabled());
  Tensor x = randn({2, 3}, {.requires_grad = true});
  matmul(x, ones({3, 2})).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  for (float g : x.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, 2.0f);
}

}  // namespace
