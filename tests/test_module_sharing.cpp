// tests/test_module_sharing.cpp — module trees that reuse a module or a parameter, and trees
// that would contain themselves (issue 27 items 3 and 17). PyTorch deduplicates shared
// parameters by identity (the first name wins) and a cycle can never be built. Each test
// failed (or crashed) before its fix.
#include <gtest/gtest.h>

#include <string>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;

bool close_all(const Tensor& a, const Tensor& b, double rtol = 1e-6, double atol = 1e-6) {
  const Tensor x = a.to(DType::f64), y = b.to(DType::f64);
  if (x.shape() != y.shape()) return false;
  return abs(x - y).max().item<double>() <= atol + rtol * abs(y).max().item<double>();
}

// ---- item 3: a container that would contain itself ----

TEST(ModuleSharing, AContainerCannotContainItself) {
  nn::Sequential seq{nn::Linear(2, 2)};
  const std::string m = error_of([&] { seq->push_back(seq); });
  EXPECT_NE(m.find("cycle"), std::string::npos) << m;
  EXPECT_NE(m.find("Sequential"), std::string::npos) << m;
  // Refused before anything changed: the container still works.
  EXPECT_EQ(seq->size(), 1u);
  EXPECT_EQ(seq->parameters().size(), 2u);
  EXPECT_EQ(seq(randn({1, 2})).shape(), Shape({1, 2}));
}

TEST(ModuleSharing, ACycleThroughAChildIsRefusedNamingBothModules) {
  nn::Sequential outer{nn::Linear(2, 2)};
  nn::ModuleList inner;
  outer->push_back(inner);
  const std::string m = error_of([&] { inner->push_back(outer); });
  EXPECT_NE(m.find("cycle"), std::string::npos) << m;
  EXPECT_NE(m.find("ModuleList"), std::string::npos) << m;
  EXPECT_NE(m.find("Sequential"), std::string::npos) << m;
  // Use, parameters, to, state_dict and save all still work on the tree.
  EXPECT_EQ(outer->parameters().size(), 2u);
  outer->to(DType::f64);
  EXPECT_EQ(outer->state_dict().size(), 2u);
  ember_test::ScratchDir dir;
  io::save_model(outer, dir.file("m.safetensors"));
  // A deeper cycle: a grandchild adding the root.
  nn::Sequential leaf{nn::Linear(2, 2)};
  nn::Sequential mid{leaf};
  nn::Sequential root{mid};
  EXPECT_NE(error_of([&] { leaf->push_back(root); }).find("cycle"), std::string::npos);
}

// ---- item 17: shared submodules and shared parameters ----

TEST(ModuleSharing, ASharedModuleIsListedOnceAndTrainsWithEveryOptimizer) {
  nn::Linear shared(3, 3);
  nn::Sequential net{shared, nn::ReLU(), shared};
  const auto named = net->named_parameters();
  ASSERT_EQ(named.size(), 2u);  // PyTorch: 0.weight, 0.bias (the first name wins)
  EXPECT_EQ(named[0].first, "0.weight");
  EXPECT_EQ(named[1].first, "0.bias");
  EXPECT_EQ(net->parameters().size(), 2u);
  EXPECT_EQ(net->parameter_count(), 12);
  EXPECT_EQ(net->named_modules().size(), 3u);  // "", "0", "1" (PyTorch skips the second use)
  // Every optimizer takes the list (before the fix each refused the duplicate).
  optim::SGD sgd(net->parameters(), {.lr = 0.1});
  optim::Adam adam(net->parameters(), {.lr = 0.1});
  optim::AdamW adamw(net->parameters(), {.lr = 0.1});
  const Tensor x = randn({4, 3});
  const Tensor before = shared->weight().clone();
  net(x).sum().backward();
  // One gradient, the sum of both uses; one step.
  const Tensor g = shared->weight().grad().clone();
  sgd.step();
  EXPECT_TRUE(close_all(shared->weight(), before - 0.1 * g, 1e-6, 1e-6));
}

TEST(ModuleSharing, ASharedParameterIsSavedOnceAndLoadsUnderEitherName) {
  nn::Linear a(3, 3), b(3, 3);
  nn::Sequential net{a, b};
  // Two modules holding one parameter: b's weight is a's (one TensorImpl).
  b->tie("weight", a->weight());
  ASSERT_TRUE(b->weight().is_same(a->weight()));
  EXPECT_EQ(net->parameters().size(), 3u);  // 0.weight, 0.bias, 1.bias
  const nn::StateDict sd = net->state_dict();
  EXPECT_EQ(sd.size(), 4u);  // PyTorch's state_dict keeps both names
  // A dict holding only one of the names loads strictly: the other is the same tensor.
  nn::StateDict one;
  for (auto& [n, t] : sd)
    if (n != "1.weight") one.emplace_back(n, t.clone() + 1.0);
  net->load_state_dict(one);
  EXPECT_TRUE(close_all(b->weight(), one[0].second));
  // Saved once, loaded back tied.
  ember_test::ScratchDir dir;
  io::save_model(net, dir.file("tied.safetensors"));
  nn::Module back = io::load_model(dir.file("tied.safetensors"));
  const auto params = back->named_parameters();
  EXPECT_TRUE(close_all(back->state_dict()[0].second, a->weight()));
  // to() moves the shared tensor once: both names still refer to one tensor.
  net->to(DType::f64);
  EXPECT_TRUE(b->weight().is_same(a->weight()));
  EXPECT_EQ(a->weight().dtype(), DType::f64);
  (void)params;
}

}  // namespace
