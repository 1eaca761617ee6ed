// tests/test_scheduler_lifetime.cpp — an LR scheduler whose optimizer was destroyed (issue 27
// item 4): every scheduler kind, stepped or asked for its optimizer afterwards, throws an
// ember::Error naming itself and changes none of its counters, instead of touching freed
// memory; while the optimizer lives the schedule is unchanged.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using test_util::error_of;

std::unique_ptr<optim::SGD> make_momentum_sgd() {
  Tensor w = zeros({2}).requires_grad_(true);
  return std::make_unique<optim::SGD>(std::vector<Tensor>{w},
                                      optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

struct Kind {
  std::string name;
  std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)> make;
  bool has_step_to = true;
};

std::vector<Kind> kinds() {
  using std::make_unique;
  using std::shared_ptr;
  return {
      {"StepLR", [](optim::Optimizer& o) { return make_unique<optim::StepLR>(o, 2, 0.5); }},
      {"MultiStepLR",
       [](optim::Optimizer& o) {
         return make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{1, 3}, 0.5);
       }},
      {"ExponentialLR",
       [](optim::Optimizer& o) { return make_unique<optim::ExponentialLR>(o, 0.9); }},
      {"CosineAnnealingLR",
       [](optim::Optimizer& o) { return make_unique<optim::CosineAnnealingLR>(o, 10); }},
      {"CosineDecayLR",
       [](optim::Optimizer& o) { return make_unique<optim::CosineDecayLR>(o, 10); }},
      {"CosineAnnealingWarmRestarts",
       [](optim::Optimizer& o) { return make_unique<optim::CosineAnnealingWarmRestarts>(o, 3); }},
      {"LinearLR", [](optim::Optimizer& o) { return make_unique<optim::LinearLR>(o); }},
      {"ConstantLR", [](optim::Optimizer& o) { return make_unique<optim::ConstantLR>(o); }},
      {"PolynomialLR", [](optim::Optimizer& o) { return make_unique<optim::PolynomialLR>(o); }},
      {"LambdaLR",
       [](optim::Optimizer& o) {
         return make_unique<optim::LambdaLR>(o, [](int64_t e) { return 1.0 / double(e + 1); });
       }},
      {"OneCycleLR",
       [](optim::Optimizer& o) {
         return make_unique<optim::OneCycleLR>(
             o, optim::OneCycleLROptions{.max_lr = {1.0}, .total_steps = 20});
       }},
      {"CyclicLR",
       [](optim::Optimizer& o) {
         return make_unique<optim::CyclicLR>(
             o, optim::CyclicLROptions{.base_lr = {0.01}, .max_lr = {0.1}, .step_size_up = 4});
       }},
      {"SequentialLR",
       [](optim::Optimizer& o) {
         auto warm = std::make_shared<optim::LinearLR>(o, 0.5, 1.0, 2);
         auto decay = std::make_shared<optim::ExponentialLR>(o, 0.9);
         return make_unique<optim::SequentialLR>(
             o, std::vector<shared_ptr<optim::LRScheduler>>{warm, decay}, std::vector<int64_t>{2});
       },
       /*has_step_to=*/false},
      {"ChainedScheduler",
       [](optim::Optimizer& o) {
         auto a = std::make_shared<optim::StepLR>(o, 2, 0.5);
         auto b = std::make_shared<optim::ExponentialLR>(o, 0.9);
         return make_unique<optim::ChainedScheduler>(
             std::vector<shared_ptr<optim::LRScheduler>>{a, b});
       },
       /*has_step_to=*/false},
  };
}

TEST(SchedulerLifetime, EveryKindRefusesToStepAfterItsOptimizerIsDestroyed) {
  for (const Kind& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    std::unique_ptr<optim::SGD> opt = make_momentum_sgd();
    std::unique_ptr<optim::LRScheduler> sched = kind.make(*opt);
    ASSERT_EQ(sched->type_name(), kind.name);
    sched->step();
    sched->step();
    // While the optimizer lives the scheduler drives it: its last lrs are the group's.
    ASSERT_EQ(sched->get_last_lr().size(), 1u);
    EXPECT_EQ(sched->get_last_lr()[0], opt->lr(0));
    const int64_t epoch = sched->last_epoch();
    const std::vector<double> last_lr = sched->get_last_lr();
    const std::string before = sched->to_string();

    opt.reset();
    const std::string expected =
        kind.name +
        ": its optimizer was destroyed (expected the optimizer to outlive the "
        "scheduler)";
    const std::string step_msg = error_of([&] { sched->step(); }, kind.name + ".step");
    EXPECT_NE(step_msg.find(expected), std::string::npos) << step_msg;
    if (kind.has_step_to) {
      const std::string to_msg = error_of([&] { sched->step_to(5.0); }, kind.name + ".step_to");
      EXPECT_NE(to_msg.find(expected), std::string::npos) << to_msg;
    }
    const std::string get_msg = error_of([&] { (void)sched->optimizer(); }, kind.name);
    EXPECT_NE(get_msg.find(expected), std::string::npos) << get_msg;
    // A refused step changes nothing, and what needs no optimizer still works.
    EXPECT_EQ(sched->last_epoch(), epoch);
    EXPECT_EQ(sched->get_last_lr(), last_lr);
    EXPECT_EQ(sched->to_string(), before);
    EXPECT_EQ(sched->state_dict()["type"], kind.name);
    sched.reset();  // destroying the scheduler afterwards is fine too
  }
}

TEST(SchedulerLifetime, SchedulerKeepsWorkingWhileItsOptimizerLives) {
  std::unique_ptr<optim::SGD> opt = make_momentum_sgd();
  optim::StepLR sched(*opt, 2, 0.5);
  for (int i = 0; i < 4; ++i) sched.step();
  EXPECT_DOUBLE_EQ(opt->lr(0), 0.025);  // 0.1 × 0.5² after epochs 2 and 4
  EXPECT_EQ(&sched.optimizer(), opt.get());
  // Another optimizer made at the same address later is not mistaken for the first one.
  opt.reset();
  std::unique_ptr<optim::SGD> other = make_momentum_sgd();
  const std::string msg = error_of([&] { sched.step(); });
  EXPECT_NE(msg.find("StepLR: its optimizer was destroyed"), std::string::npos) << msg;
  EXPECT_DOUBLE_EQ(other->lr(0), 0.1);
}

TEST(SchedulerLifetime, ReduceLROnPlateauRefusesAfterItsOptimizerIsDestroyed) {
  std::unique_ptr<optim::SGD> opt = make_momentum_sgd();
  optim::ReduceLROnPlateau sched(*opt, {.factor = 0.5, .patience = 0});
  sched.step(1.0);
  sched.step(2.0);  // worse: the lr halves
  EXPECT_DOUBLE_EQ(opt->lr(0), 0.05);
  opt.reset();
  const std::string msg = error_of([&] { sched.step(3.0); });
  EXPECT_NE(msg.find("ReduceLROnPlateau: its optimizer was destroyed (expected the optimizer to "
                     "outlive the scheduler)"),
            std::string::npos)
      << msg;
  const std::string get_msg = error_of([&] { (void)sched.optimizer(); });
  EXPECT_NE(get_msg.find("ReduceLROnPlateau: its optimizer was destroyed"), std::string::npos);
  EXPECT_EQ(sched.last_epoch(), 2);  // the refused step counted nothing
  EXPECT_EQ(sched.num_bad_epochs(), 0);
  EXPECT_EQ(sched.get_last_lr(), std::vector<double>{0.05});
}

}  // namespace
