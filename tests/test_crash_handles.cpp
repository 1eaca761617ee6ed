// tests/test_crash_handles.cpp — empty handles (issue 15, items 2 and 3): every member of an
// undefined Tensor and of an empty or moved-from module handle throws ember::Error saying the
// handle is empty; nothing dereferences null.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ::testing::HasSubstr;

struct MemberCase {
  const char* name;
  std::function<void(Tensor&)> call;
};

// Every Tensor member that reads the handle (tensor.hpp), in declaration order.
std::vector<MemberCase> tensor_members() {
  Tensor x = ones({2, 2});
  return {
      {"shape", [](Tensor& t) { (void)t.shape(); }},
      {"strides", [](Tensor& t) { (void)t.strides(); }},
      {"dim", [](Tensor& t) { (void)t.dim(); }},
      {"size", [](Tensor& t) { (void)t.size(0); }},
      {"stride", [](Tensor& t) { (void)t.stride(0); }},
      {"numel", [](Tensor& t) { (void)t.numel(); }},
      {"offset", [](Tensor& t) { (void)t.offset(); }},
      {"dtype", [](Tensor& t) { (void)t.dtype(); }},
      {"device", [](Tensor& t) { (void)t.device(); }},
      {"is_contiguous", [](Tensor& t) { (void)t.is_contiguous(); }},
      {"data_ptr", [](Tensor& t) { (void)t.data_ptr(); }},
      {"data", [](Tensor& t) { (void)t.data<float>(); }},
      {"storage", [](Tensor& t) { (void)t.storage(); }},
      {"version", [](Tensor& t) { (void)t.version(); }},
      {"view", [](Tensor& t) { (void)t.view({1}); }},
      {"reshape", [](Tensor& t) { (void)t.reshape({1}); }},
      {"transpose", [](Tensor& t) { (void)t.transpose(0, 1); }},
      {"t", [](Tensor& t) { (void)t.t(); }},
      {"permute", [](Tensor& t) { (void)t.permute({0}); }},
      {"slice", [](Tensor& t) { (void)t.slice(0, 0, 1); }},
      {"narrow", [](Tensor& t) { (void)t.narrow(0, 0, 1); }},
      {"select", [](Tensor& t) { (void)t.select(0, 0); }},
      {"expand", [](Tensor& t) { (void)t.expand({2}); }},
      {"broadcast_to", [](Tensor& t) { (void)t.broadcast_to({2}); }},
      {"squeeze()", [](Tensor& t) { (void)t.squeeze(); }},
      {"squeeze(dim)", [](Tensor& t) { (void)t.squeeze(0); }},
      {"unsqueeze", [](Tensor& t) { (void)t.unsqueeze(0); }},
      {"flatten", [](Tensor& t) { (void)t.flatten(); }},
      {"contiguous", [](Tensor& t) { (void)t.contiguous(); }},
      {"to(dtype)", [](Tensor& t) { (void)t.to(DType::f64); }},
      {"to(device)", [](Tensor& t) { (void)t.to(Device::cpu()); }},
      {"clone", [](Tensor& t) { (void)t.clone(); }},
      {"to_vector", [](Tensor& t) { (void)t.to_vector<float>(); }},
      {"item", [](Tensor& t) { (void)t.item<float>(); }},
      {"requires_grad_", [](Tensor& t) { t.requires_grad_(); }},
      {"grad", [](Tensor& t) { (void)t.grad(); }},
      {"set_grad", [x](Tensor& t) { t.set_grad(x); }},
      {"zero_grad", [](Tensor& t) { t.zero_grad(); }},
      {"is_leaf", [](Tensor& t) { (void)t.is_leaf(); }},
      {"grad_fn", [](Tensor& t) { (void)t.grad_fn(); }},
      {"backward", [](Tensor& t) { t.backward(); }},
      {"detach", [](Tensor& t) { (void)t.detach(); }},
      {"copy_", [x](Tensor& t) { t.copy_(x); }},
      {"assign_", [x](Tensor& t) { t.assign_(x); }},
      {"fill_", [](Tensor& t) { t.fill_(1.0); }},
      {"zero_", [](Tensor& t) { t.zero_(); }},
      {"add_(tensor)", [x](Tensor& t) { t.add_(x); }},
      {"add_(tensor, alpha)", [x](Tensor& t) { t.add_(x, 2.0); }},
      {"sub_", [x](Tensor& t) { t.sub_(x); }},
      {"mul_(tensor)", [x](Tensor& t) { t.mul_(x); }},
      {"mul_(scalar)", [](Tensor& t) { t.mul_(2.0); }},
      {"add_(scalar)", [](Tensor& t) { t.add_(2.0); }},
      {"div_", [x](Tensor& t) { t.div_(x); }},
      {"clamp_", [](Tensor& t) { t.clamp_(0.0, 1.0); }},
      {"sum()", [](Tensor& t) { (void)t.sum(); }},
      {"sum(dims)", [](Tensor& t) { (void)t.sum({0}); }},
      {"mean()", [](Tensor& t) { (void)t.mean(); }},
      {"mean(dims)", [](Tensor& t) { (void)t.mean({0}); }},
      {"max", [](Tensor& t) { (void)t.max(); }},
      {"min", [](Tensor& t) { (void)t.min(); }},
      {"argmax", [](Tensor& t) { (void)t.argmax(0); }},
      {"matmul", [x](Tensor& t) { (void)t.matmul(x); }},
      {"exp", [](Tensor& t) { (void)t.exp(); }},
      {"log", [](Tensor& t) { (void)t.log(); }},
      {"relu", [](Tensor& t) { (void)t.relu(); }},
      {"sigmoid", [](Tensor& t) { (void)t.sigmoid(); }},
      {"tanh", [](Tensor& t) { (void)t.tanh(); }},
      {"sqrt", [](Tensor& t) { (void)t.sqrt(); }},
      {"abs", [](Tensor& t) { (void)t.abs(); }},
      {"pow", [](Tensor& t) { (void)t.pow(2.0); }},
      {"softmax", [](Tensor& t) { (void)t.softmax(0); }},
      {"log_softmax", [](Tensor& t) { (void)t.log_softmax(0); }},
      {"operator+", [x](Tensor& t) { (void)(t + x); }},
      {"operator* scalar", [](Tensor& t) { (void)(t * 2.0); }},
      {"unary minus", [](Tensor& t) { (void)(-t); }},
      {"zeros_like", [](Tensor& t) { (void)zeros_like(t); }},
      {"parameter", [](Tensor& t) { (void)parameter(t); }},
  };
}

// The message says the handle is empty (or the op names the undefined input).
void expect_empty_message(const std::string& msg, const std::string& what) {
  EXPECT_TRUE(msg.find("empty") != std::string::npos || msg.find("undefined") != std::string::npos)
      << what << ": " << msg;
}

TEST(EmptyHandles, EveryTensorMemberOnAnUndefinedTensorThrows) {
  for (const MemberCase& c : tensor_members()) {
    Tensor t;  // default-constructed
    expect_empty_message(error_of([&] { c.call(t); }, c.name), c.name);
  }
}

TEST(EmptyHandles, EveryTensorMemberOnAMovedFromTensorThrows) {
  for (const MemberCase& c : tensor_members()) {
    Tensor source = ones({2, 2});
    Tensor taken = std::move(source);
    expect_empty_message(error_of([&] { c.call(source); }, c.name),
                         c.name);  // NOLINT: moved-from on purpose
    EXPECT_EQ(taken.numel(), 4);
  }
}

TEST(EmptyHandles, TheMessageNamesTheMemberAndTheFix) {
  Tensor t;
  const std::string msg = error_of([&] { (void)t.shape(); }, "shape");
  EXPECT_THAT(msg, HasSubstr("Tensor::shape"));
  EXPECT_THAT(msg, HasSubstr("handle is empty"));
  EXPECT_THAT(error_of([&] { (void)t.dtype(); }, "dtype"), HasSubstr("Tensor::dtype"));
  EXPECT_THAT(error_of([&] { (void)t.size(0); }, "size"), HasSubstr("Tensor::size"));
}

TEST(EmptyHandles, TheQueriesThatAnswerForAnEmptyHandle) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_FALSE(t.requires_grad());  // as PyTorch's undefined tensor
  EXPECT_FALSE(t.defined());
  std::ostringstream out;
  out << t;
  EXPECT_EQ(out.str(), "Tensor(undefined)");
  EXPECT_EQ(t.to_string(), "Tensor(undefined)");
}

TEST(EmptyHandles, OpsNameAnUndefinedInput) {
  Tensor t, x = ones({2}), xr = ones({2}, {.requires_grad = true});
  for (const auto& [name, fn] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"add", [&] { (void)add(t, x); }},
           {"matmul", [&] { (void)matmul(x, t); }},
           {"cat",
            [&] {
              (void)cat({x, t});
            }},
           {"where", [&] { (void)where(t, x, x); }},
           {"sum_to", [&] { (void)sum_to(t, {1}); }},
           {"index_select", [&] { (void)index_select(x, 0, t); }},
           {"grad", [&] { (void)grad({t}, {xr}); }},
           {"backward", [&] { t.backward(); }},
       }) {
    expect_empty_message(error_of(fn, name), name);
  }
}

TEST(EmptyHandles, ModuleHandlesThatAreEmptyThrow) {
  const Tensor x = ones({1, 2});
  nn::Module m;  // type-erased, default-constructed
  std::string msg = error_of([&] { (void)m(x); }, "Module()");
  EXPECT_THAT(msg, HasSubstr("nn::Module"));
  EXPECT_THAT(msg, HasSubstr("handle is empty"));
  expect_empty_message(error_of([&] { (void)m->parameters(); }, "Module->"), "Module->");
  expect_empty_message(error_of([&] { (void)(*m).type_name(); }, "*Module"), "*Module");
  EXPECT_FALSE(m.defined());
}

TEST(EmptyHandles, MovedFromTypedHandlesThrowNamingTheirType) {
  const Tensor x = ones({1, 2});
  nn::Linear a(2, 3);
  nn::Linear b = std::move(a);
  std::string msg = error_of([&] { (void)a(x); }, "Linear()");  // NOLINT: moved-from on purpose
  EXPECT_THAT(msg, HasSubstr("nn::Linear"));
  EXPECT_THAT(msg, HasSubstr("handle is empty"));
  expect_empty_message(error_of([&] { (void)a->weight(); }, "Linear->"), "Linear->");
  expect_empty_message(error_of([&] { a->train(); }, "Linear->train"), "Linear->train");
  expect_empty_message(error_of([&] { (void)nn::Module(a)(x); }, "Module(Linear)"),
                       "Module(Linear)");
  EXPECT_FALSE(a.defined());
  EXPECT_EQ(b(x).shape(), Shape({1, 3}));  // the handle it moved to works

  nn::Sequential s({nn::Linear(2, 2), nn::ReLU()});
  nn::Sequential s2 = std::move(s);
  expect_empty_message(error_of([&] { (void)s(x); }, "Sequential()"), "Sequential()");  // NOLINT
  expect_empty_message(error_of([&] { (void)s->size(); }, "Sequential->"), "Sequential->");
  EXPECT_EQ(s2(x).shape(), Shape({1, 2}));

  nn::Conv2d c(1, 1, 3);
  nn::Conv2d c2 = std::move(c);
  expect_empty_message(error_of(
                           [&] {
                             (void)c(ones({1, 1, 3, 3}));
                           },
                           "Conv2d()"),
                       "Conv2d()");  // NOLINT
}

TEST(EmptyHandles, AnOptimizerOrLossGivenAnUndefinedTensorIsAnError) {
  EXPECT_THROW(optim::SGD({Tensor()}), Error);
  EXPECT_THROW((void)mse_loss(Tensor(), ones({1})), Error);
  EXPECT_THROW((void)cross_entropy(ones({1, 2}), Tensor()), Error);
}

}  // namespace
