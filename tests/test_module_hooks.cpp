// tests/test_module_hooks.cpp — forward hooks and pre-hooks on modules (PyTorch's
// register_forward_hook / register_forward_pre_hook): what they see and replace, their order,
// removal, where they fire (handles, containers, a layer's own children; not ->forward), the
// fused Linear+ReLU of Sequential, and errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/transformer.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

using namespace ember;
using ember::test_util::error_of;
using ember_test::expect_close;

namespace {

nn::ForwardHook record_to(std::vector<std::string>& log, std::string name) {
  return [&log, name](nn::ModuleImpl&, const Tensor&, const Tensor&) {
    log.push_back(name);
    return std::optional<Tensor>();
  };
}

}  // namespace

TEST(ModuleHooks, PreHookReplacesTheInputAndHookTheOutput) {
  manual_seed(1);
  nn::Linear fc(3, 2);
  const Tensor x = randn({4, 3});
  const Tensor plain = fc(x).detach();
  Tensor seen_in, seen_out;
  nn::ModuleHookHandle pre = fc->register_forward_pre_hook(
      [](nn::ModuleImpl& m, const Tensor& in) -> std::optional<Tensor> {
        EXPECT_EQ(m.type_name(), "Linear");
        return in * 2.0;
      });
  nn::ModuleHookHandle post = fc->register_forward_hook(
      [&](nn::ModuleImpl&, const Tensor& in, const Tensor& out) -> std::optional<Tensor> {
        seen_in = in;
        seen_out = out;
        return out + 1.0;
      });
  EXPECT_TRUE(fc->has_forward_hooks());
  const Tensor y = fc(x);
  expect_close(seen_in, x * 2.0, 0, 0, "the hook sees the pre-hook's input");
  expect_close(seen_out, linear(x * 2.0, fc->weight(), fc->bias()), 1e-6, 1e-6, "forward output");
  expect_close(y, seen_out + 1.0, 0, 0, "the hook's replacement");
  // gradients flow through what the hooks did
  y.sum().backward();
  expect_close(fc->bias().grad(), full({2}, 4.0), 0, 0, "bias grad through the hooks");

  pre.remove();
  post.remove();
  post.remove();  // again: nothing
  EXPECT_FALSE(fc->has_forward_hooks());
  expect_close(fc(x), plain, 0, 0, "after removal");
}

TEST(ModuleHooks, RunInOrderPrependFirstAndStayWhenTheHandleIsDropped) {
  nn::ReLU relu;
  std::vector<std::string> log;
  relu->register_forward_hook(record_to(log, "a"));  // handle dropped: the hook stays
  nn::ModuleHookHandle b = relu->register_forward_hook(record_to(log, "b"));
  relu->register_forward_hook(record_to(log, "first"), /*prepend=*/true);
  relu(ones({2}));
  EXPECT_EQ(log, (std::vector<std::string>{"first", "a", "b"}));
  b.remove();
  log.clear();
  relu(ones({2}));
  EXPECT_EQ(log, (std::vector<std::string>{"first", "a"}));
}

TEST(ModuleHooks, FireInsideContainersAndLayersButNotOnForwardItself) {
  manual_seed(2);
  // Sequential's Linear + ReLU normally run fused: with a hook on the Linear, each runs on its
  // own and the hook sees the pre-activation output.
  nn::Linear fc(4, 3);
  nn::Sequential net({nn::Module(fc), nn::Module(nn::ReLU()), nn::Module(nn::Linear(3, 2))});
  const Tensor x = randn({5, 4});
  const Tensor fused = net(x).detach();
  Tensor pre_activation;
  fc->register_forward_hook([&](nn::ModuleImpl&, const Tensor&, const Tensor& y) {
    pre_activation = y.detach();
    return std::optional<Tensor>();
  });
  expect_close(net(x), fused, 1e-6, 1e-6, "unfused Sequential with a hook");
  ASSERT_TRUE(pre_activation.defined());
  expect_close(pre_activation, linear(x, fc->weight(), fc->bias()), 1e-6, 1e-6,
               "the Linear's own output");
  EXPECT_LT(min(pre_activation).item<float>(), 0.0f) << "a pre-activation with negatives";

  // A layer's own children: TransformerEncoderLayer's linear1 and MultiheadAttention's
  // out_proj.
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions{
      .d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  std::vector<std::string> log;
  for (auto& [name, m] : layer->named_modules())
    if (name == "linear1" || name == "self_attn.out_proj" || name == "norm2")
      m->register_forward_hook(record_to(log, name));
  layer(randn({2, 3, 8}));
  EXPECT_EQ(log, (std::vector<std::string>{"self_attn.out_proj", "linear1", "norm2"}));

  // ->forward(x) is the bare forward, as PyTorch's module.forward: no hooks.
  pre_activation = Tensor();
  fc->forward(x);
  EXPECT_FALSE(pre_activation.defined());
}

TEST(ModuleHooks, HookErrorsPropagateAndEmptyHooksAreRefused) {
  nn::Linear fc(2, 2);
  fc->register_forward_pre_hook([](nn::ModuleImpl&, const Tensor&) -> std::optional<Tensor> {
    detail::throw_error("my hook: refused");
  });
  EXPECT_NE(error_of([&] { fc(ones({1, 2})); }).find("my hook: refused"), std::string::npos);
  EXPECT_NE(error_of([&] {
              fc->register_forward_hook(nullptr);
            }).find("Linear.register_forward_hook: the hook is empty"),
            std::string::npos);
}
