// tests/test_nn_utils.cpp — torch.nn.utils' parameters_to_vector and vector_to_parameters.
#include <gtest/gtest.h>

#include <numeric>

#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/utils.hpp"
#include "error_of.hpp"

using namespace ember;
using ember::test_util::error_of;

namespace {
std::vector<float> values_of(const Tensor& t) { return t.contiguous().to_vector<float>(); }
}  // namespace

TEST(NnUtils, ParametersToVectorConcatenatesInOrderAndBack) {
  manual_seed(3);
  nn::Linear a(3, 2), b(2, 4);
  std::vector<Tensor> params = a->parameters();
  for (const Tensor& p : b->parameters()) params.push_back(p);
  const Tensor flat = nn::utils::parameters_to_vector(params);
  ASSERT_EQ(flat.shape(), Shape({3 * 2 + 2 + 2 * 4 + 4}));
  std::vector<float> expected;
  for (const Tensor& p : params)
    for (float v : values_of(p)) expected.push_back(v);
  EXPECT_EQ(values_of(flat), expected);

  std::vector<float> next(expected.size());
  std::iota(next.begin(), next.end(), 1.0f);
  nn::utils::vector_to_parameters(from_vector(next, Shape{static_cast<int64_t>(next.size())}),
                                  params);
  size_t at = 0;
  for (const Tensor& p : params) {
    const std::vector<float> got = values_of(p);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], next[at + i]);
    at += got.size();
  }
  EXPECT_EQ(a->weight().shape(), Shape({2, 3}));  // shapes kept
  EXPECT_FALSE(a->weight().grad().defined());     // no autograd record
}

TEST(NnUtils, ParametersToVectorIsDifferentiable) {
  manual_seed(4);
  nn::Linear a(3, 2);
  const std::vector<Tensor> params = a->parameters();
  const Tensor flat = nn::utils::parameters_to_vector(params);
  std::vector<float> w(static_cast<size_t>(flat.numel()));
  std::iota(w.begin(), w.end(), 0.5f);
  sum(flat * from_vector(w, flat.shape())).backward();
  size_t at = 0;
  for (const Tensor& p : params) {
    const std::vector<float> g = values_of(p.grad());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], w[at + i]);
    at += g.size();
  }
  EXPECT_EQ(at, w.size());
}

TEST(NnUtils, BadInputIsRefusedByName) {
  nn::Linear a(3, 2);
  const std::vector<Tensor> params = a->parameters();
  EXPECT_NE(error_of([] { nn::utils::parameters_to_vector({}); }).find("parameter list is empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn::utils::parameters_to_vector({params[0], Tensor()});
            }).find("parameter 1 is an empty handle"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn::utils::parameters_to_vector({params[0], zeros({2}, {.dtype = DType::f64})});
            }).find("parameter 1 is f64 but parameter 0 is f32"),
            std::string::npos);
  const std::string e = error_of([&] { nn::utils::vector_to_parameters(zeros({7}), params); });
  EXPECT_NE(e.find("vec has 7 elements but the parameters hold 8"), std::string::npos) << e;
  EXPECT_NE(error_of([&] {
              nn::utils::vector_to_parameters(zeros({2, 4}), params);
            }).find("vec must be 1-D"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn::utils::vector_to_parameters(Tensor(), params);
            }).find("vec is an empty handle"),
            std::string::npos);
}
