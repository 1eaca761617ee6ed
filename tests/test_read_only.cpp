// tests/test_read_only.cpp — ReadOnlyGuard (include/ember/read_only.hpp): while it lives, every
// in-place change of a tensor it holds (or of a view of it) is refused with a clear error and
// changes nothing; other tensors and out-of-place ops are untouched; guards nest; and
// models::generate holds the model's parameters read-only (a callback that changes one is
// refused). The GPU products that load such weights early are FewRowsGemm.CudaReadOnly*.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.hpp"
#include "ember/models/generate.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/optim/sgd.hpp"
#include "error_of.hpp"
#include "lm_test_util.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;

double max_abs(const Tensor& t) { return max(abs(t.to(DType::f64))).item<double>(); }

TEST(ReadOnly, InPlaceChangesAreRefusedWhileTheGuardLives) {
  manual_seed(1);
  Tensor w = randn({4, 3}), other = randn({4, 3});
  const Tensor before = w.clone();
  {
    const ReadOnlyGuard guard({w});
    EXPECT_TRUE(is_read_only(w));
    EXPECT_TRUE(is_read_only(w.narrow(0, 1, 2))) << "a view shares the storage";
    EXPECT_FALSE(is_read_only(other));
    EXPECT_FALSE(is_read_only(w.clone()));
    for (const auto& [what, change] : std::vector<std::pair<std::string, std::function<void()>>>{
             {"add_", [&] { w.add_(1.0); }},
             {"fill_", [&] { w.fill_(0.0); }},
             {"copy_", [&] { w.copy_(other); }},
             {"a view's mul_", [&] { w.narrow(0, 1, 2).mul_(2.0); }},
             {"zero_", [&] { w.zero_(); }}}) {
      const std::string e = error_of(change);
      EXPECT_NE(e.find("in-place change of a tensor that a ReadOnlyGuard holds read-only (48 "
                       "bytes on cpu"),
                std::string::npos)
          << what << ": " << e;
    }
    EXPECT_EQ(max_abs(w - before), 0.0) << "nothing was written";
    EXPECT_NO_THROW(other.add_(1.0));
    EXPECT_EQ(max_abs((w + 1.0) - (before + 1.0)), 0.0) << "reads and new tensors as ever";
  }
  EXPECT_FALSE(is_read_only(w));
  EXPECT_NO_THROW(w.add_(1.0));
  EXPECT_EQ(max_abs(w - (before + 1.0)), 0.0);
}

TEST(ReadOnly, GuardsNestAndAnOptimizerStepIsRefusedBeforeItWrites) {
  Tensor w = parameter(ones({3}));
  w.set_grad(full({3}, 0.5));
  optim::SGD sgd({w}, {.lr = 1.0});
  {
    const ReadOnlyGuard outer({w});
    {
      const ReadOnlyGuard inner({w, Tensor()});  // an undefined tensor is passed over
      EXPECT_TRUE(is_read_only(w));
    }
    EXPECT_TRUE(is_read_only(w)) << "the outer guard still holds it";
    EXPECT_NE(error_of([&] { sgd.step(); }).find("ReadOnlyGuard"), std::string::npos);
    EXPECT_EQ(max_abs(w - ones({3})), 0.0) << "the step wrote nothing";
  }
  EXPECT_FALSE(is_read_only(w));
  sgd.step();
  EXPECT_EQ(max_abs(w - full({3}, 0.5)), 0.0);
}

TEST(ReadOnly, GenerateHoldsTheModelsParametersReadOnly) {
  nn::CausalLM model = models::from_pretrained(ember_test::lm_dir() + "/gpt2");
  Tensor wte = model->named_parameters().front().second;
  const Tensor before = wte.clone();
  bool checked = false;
  const std::string e = error_of([&] {
    models::generate(model, {ember_test::lm_prompt("gpt2", 0)},
                     {.max_new_tokens = 4, .on_token = [&](int64_t, int64_t) {
                        checked = is_read_only(wte);
                        NoGradGuard no_grad;
                        wte.add_(1.0);
                      }});
  });
  EXPECT_TRUE(checked);
  EXPECT_NE(e.find("in-place change of a tensor that a ReadOnlyGuard holds read-only"),
            std::string::npos)
      << e;
  EXPECT_EQ(max_abs(wte - before), 0.0);
  EXPECT_FALSE(is_read_only(wte)) << "released when generate ends, by an error too";
}

}  // namespace
