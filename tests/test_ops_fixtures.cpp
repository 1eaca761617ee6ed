// tests/test_ops_fixtures.cpp — tier 1 of STYLE §8: every op against PyTorch.
//
// Each case of tests/data/op_fixtures.json (written by tests/gen_fixtures.py) is run here:
// inputs that have a stored gradient are made requires_grad_(), the op's output is compared
// with PyTorch's, then sum(out * w) is back-propagated and every input's .grad() compared.
// The table below maps each case name to the ember call; a test checks that the table and
// the fixture file name the same cases, so no fixture goes unused.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

using ember::Reduction;
using ember::Shape;
using ember::Tensor;
using ember_test::Fixture;

using OpFn = std::function<Tensor(Fixture&)>;

Reduction reduction_of(const Fixture& f) {
  const std::string r = f.attr_string("reduction");
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  throw std::runtime_error("unknown reduction " + r);
}

Tensor optional_tensor(Fixture& f, const std::string& key) {
  return f.has(key) ? f[key] : Tensor();
}

// Binary broadcast suffixes used by gen_fixtures.py.
const std::vector<std::string> kBinarySuffixes = {"", "_bcast_col_row", "_bcast_trailing",
                                                  "_bcast_lead", "_bcast_mid"};

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    // ---- linear algebra
    for (const char* name :
         {"matmul_2d", "matmul_1d_2d", "matmul_2d_1d", "matmul_1d_1d", "matmul_batched_2d",
          "matmul_2d_batched", "matmul_batched", "matmul_batch_broadcast"}) {
      t[name] = [](Fixture& f) { return ember::matmul(f["a"], f["b"]); };
    }
    t["linear_bias_3d"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"], f["bias"]); };
    t["linear_nobias"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"]); };
    t["linear_nobias_3d"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"]); };

    // ---- binary elementwise: functions for the same-shape case, operators when broadcasting
    for (const std::string& s : kBinarySuffixes) {
      const bool plain = s.empty();
      t["add" + s] = [plain](Fixture& f) {
        return plain ? ember::add(f["a"], f["b"]) : f["a"] + f["b"];
      };
      t["sub" + s] = [plain](Fixture& f) {
        return plain ? ember::sub(f["a"], f["b"]) : f["a"] - f["b"];
      };
      t["mul" + s] = [plain](Fixture& f) {
        return plain ? ember::mul(f["a"], f["b"]) : f["a"] * f["b"];
      };
      t["div" + s] = [plain](Fixture& f) {
        return plain ? ember::div(f["a"], f["b"]) : f["a"] / f["b"];
      };
    }
    for (const std::string s : {"", "_bcast_col_row", "_bcast_trailing"}) {
      t["maximum" + s] = [](Fixture& f) { return ember::maximum(f["a"], f["b"]); };
      t["minimum" + s] = [](Fixture& f) { return ember::minimum(f["a"], f["b"]); };
    }
    t["pow_tensor"] = [](Fixture& f) { return ember::pow(f["a"], f["b"]); };
    t["pow_tensor_bcast"] = [](Fixture& f) { return ember::pow(f["a"], f["b"]); };

    // ---- with a scalar
    t["add_scalar"] = [](Fixture& f) { return ember::add(f["x"], f.attr_double("s")); };
    t["mul_scalar"] = [](Fixture& f) { return ember::mul(f["x"], f.attr_double("s")); };
    t["rsub_scalar"] = [](Fixture& f) { return f.attr_double("s") - f["x"]; };
    t["rdiv_scalar"] = [](Fixture& f) { return f.attr_double("s") / f["x"]; };
    t["scale"] = [](Fixture& f) { return ember::scale(f["x"], f.attr_double("s")); };
    for (const char* name : {"pow_scalar_3", "pow_scalar_2", "pow_scalar_half", "pow_scalar_neg"}) {
      t[name] = [](Fixture& f) { return ember::pow(f["x"], f.attr_double("p")); };
    }
    t["clamp"] = [](Fixture& f) {
      return ember::clamp(f["x"], f.attr_double("lo"), f.attr_double("hi"));
    };

    // ---- unary
    t["neg"] = [](Fixture& f) { return ember::neg(f["x"]); };
    t["abs"] = [](Fixture& f) { return ember::abs(f["x"]); };
    t["sqrt"] = [](Fixture& f) { return ember::sqrt(f["x"]); };
    t["rsqrt"] = [](Fixture& f) { return ember::rsqrt(f["x"]); };
    t["square"] = [](Fixture& f) { return ember::square(f["x"]); };
    t["exp"] = [](Fixture& f) { return ember::exp(f["x"]); };
    t["log"] = [](Fixture& f) { return ember::log(f["x"]); };
    t["relu"] = [](Fixture& f) { return ember::relu(f["x"]); };
    t["sigmoid"] = [](Fixture& f) { return ember::sigmoid(f["x"]); };
    t["tanh"] = [](Fixture& f) { return ember::tanh(f["x"]); };
    t["gelu_erf"] = [](Fixture& f) { return ember::gelu(f["x"], f.attr_string("approximate")); };
    t["gelu_tanh"] = [](Fixture& f) { return ember::gelu(f["x"], f.attr_string("approximate")); };
    t["silu"] = [](Fixture& f) { return ember::silu(f["x"]); };
    t["sign"] = [](Fixture& f) { return ember::sign(f["x"]); };

    // ---- comparisons
    t["cmp_eq"] = [](Fixture& f) { return ember::eq(f["a"], f["b"]); };
    t["cmp_ne"] = [](Fixture& f) { return ember::ne(f["a"], f["b"]); };
    t["cmp_lt"] = [](Fixture& f) { return ember::lt(f["a"], f["b"]); };
    t["cmp_le"] = [](Fixture& f) { return ember::le(f["a"], f["b"]); };
    t["cmp_gt"] = [](Fixture& f) { return ember::gt(f["a"], f["b"]); };
    t["cmp_ge"] = [](Fixture& f) { return ember::ge(f["a"], f["b"]); };

    // ---- softmax family
    for (const std::string s : {"softmax_dim0", "softmax_last", "softmax_3d_dim1"}) {
      t[s] = [](Fixture& f) { return ember::softmax(f["x"], f.attr_int("dim")); };
      t["log_" + s] = [](Fixture& f) { return ember::log_softmax(f["x"], f.attr_int("dim")); };
    }

    // ---- reductions
    t["sum_all"] = [](Fixture& f) { return ember::sum(f["x"]); };
    t["mean_all"] = [](Fixture& f) { return ember::mean(f["x"]); };
    t["max_all"] = [](Fixture& f) { return ember::max(f["x"]); };
    t["min_all"] = [](Fixture& f) { return ember::min(f["x"]); };
    for (const char* name : {"sum_dim1", "sum_dims_keepdim", "sum_neg_dim"}) {
      t[name] = [](Fixture& f) {
        return ember::sum(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
      };
    }
    for (const char* name : {"mean_dim1", "mean_dims_keepdim"}) {
      t[name] = [](Fixture& f) {
        return ember::mean(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
      };
    }
    for (const char* name : {"max_dim1", "max_dim0_keepdim"}) {
      t[name] = [](Fixture& f) {
        return ember::max(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
      };
    }
    for (const char* name : {"min_dim1", "min_dims_keepdim"}) {
      t[name] = [](Fixture& f) {
        return ember::min(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
      };
    }
    t["var_all"] = [](Fixture& f) { return ember::var(f["x"], f.attr_int("correction")); };
    for (const char* name : {"var_dim1", "var_dims_c0_keepdim", "var_dim0_c1_keepdim"}) {
      t[name] = [](Fixture& f) {
        return ember::var(f["x"], f.attr_shape("dims"), f.attr_int("correction"),
                          f.attr_bool("keepdim"));
      };
    }
    for (const char* name : {"argmax_dim1", "argmax_dim0_keepdim", "argmax_3d_neg"}) {
      t[name] = [](Fixture& f) {
        return ember::argmax(f["x"], f.attr_int("dim"), f.attr_bool("keepdim"));
      };
    }
    for (const char* name : {"argmin_dim1", "argmin_dim0_keepdim", "argmin_3d_neg"}) {
      t[name] = [](Fixture& f) {
        return ember::argmin(f["x"], f.attr_int("dim"), f.attr_bool("keepdim"));
      };
    }

    // ---- shape
    t["reshape"] = [](Fixture& f) { return ember::reshape(f["x"], f.attr_shape("shape")); };
    t["reshape_infer"] = [](Fixture& f) { return ember::reshape(f["x"], f.attr_shape("shape")); };
    t["transpose"] = [](Fixture& f) {
      return ember::transpose(f["x"], f.attr_int("d0"), f.attr_int("d1"));
    };
    t["transpose_2d"] = [](Fixture& f) { return f["x"].t(); };
    t["permute"] = [](Fixture& f) { return ember::permute(f["x"], f.attr_shape("dims")); };
    for (const char* name : {"slice_step", "slice_neg_start", "slice_step3"}) {
      t[name] = [](Fixture& f) {
        return ember::slice(f["x"], f.attr_int("dim"), f.attr_int("start"), f.attr_int("end"),
                            f.attr_int("step"));
      };
    }
    t["expand"] = [](Fixture& f) { return ember::expand(f["x"], f.attr_shape("shape")); };
    t["flatten"] = [](Fixture& f) {
      return ember::flatten(f["x"], f.attr_int("start"), f.attr_int("end"));
    };
    t["squeeze"] = [](Fixture& f) { return ember::squeeze(f["x"], f.attr_int("dim")); };
    t["unsqueeze"] = [](Fixture& f) { return ember::unsqueeze(f["x"], f.attr_int("dim")); };
    t["sum_to"] = [](Fixture& f) { return ember::sum_to(f["x"], f.attr_shape("shape")); };
    for (const char* name : {"cat_dim0", "cat_dim1"}) {
      t[name] = [](Fixture& f) { return ember::cat({f["a"], f["b"], f["c"]}, f.attr_int("dim")); };
    }
    for (const char* name : {"stack_dim0", "stack_dim1"}) {
      t[name] = [](Fixture& f) {
        return ember::stack({f["a"], f["b"], f["c"]}, f.attr_int("dim"));
      };
    }
    t["stack_last"] = [](Fixture& f) { return ember::stack({f["a"], f["b"]}, f.attr_int("dim")); };

    // ---- indexing
    for (const char* name : {"index_select_dim0_repeats", "index_select_dim1_repeats"}) {
      t[name] = [](Fixture& f) {
        return ember::index_select(f["x"], f.attr_int("dim"), f["index"]);
      };
    }
    for (const char* name : {"gather_dim1", "gather_dim0"}) {
      t[name] = [](Fixture& f) { return ember::gather(f["x"], f.attr_int("dim"), f["index"]); };
    }
    t["scatter_add_dim1"] = [](Fixture& f) {
      return ember::scatter_add(f["x"], f.attr_int("dim"), f["index"], f["src"]);
    };
    t["embedding"] = [](Fixture& f) { return ember::embedding(f["weight"], f["index"]); };
    t["where"] = [](Fixture& f) { return ember::where(f["cond"], f["a"], f["b"]); };
    t["where_bcast"] = [](Fixture& f) { return ember::where(f["cond"], f["a"], f["b"]); };
    t["masked_fill"] = [](Fixture& f) {
      return ember::masked_fill(f["x"], f["mask"], f.attr_double("value"));
    };
    t["masked_fill_bcast"] = [](Fixture& f) {
      return ember::masked_fill(f["x"], f["mask"], f.attr_double("value"));
    };

    // ---- normalisation
    for (const char* name : {"layer_norm_affine", "layer_norm_plain_2dims"}) {
      t[name] = [](Fixture& f) {
        return ember::layer_norm(f["x"], f.attr_shape("normalized_shape"),
                                 optional_tensor(f, "weight"), optional_tensor(f, "bias"),
                                 f.attr_double("eps"));
      };
    }
    for (const char* name : {"batch_norm_train_2d", "batch_norm_train_3d", "batch_norm_eval"}) {
      t[name] = [](Fixture& f) {
        return ember::batch_norm(f["x"], f["running_mean"], f["running_var"], f["weight"],
                                 f["bias"], f.attr_bool("training"), f.attr_double("momentum"),
                                 f.attr_double("eps"));
      };
    }

    // ---- losses
    for (const char* name : {"mse_loss_mean", "mse_loss_sum", "mse_loss_none"}) {
      t[name] = [](Fixture& f) {
        return ember::mse_loss(f["input"], f["target"], reduction_of(f));
      };
    }
    for (const char* name : {"cross_entropy_probs", "cross_entropy_probs_onehot"}) {
      t[name] = [](Fixture& f) {
        return ember::cross_entropy_probs(f["probs"], f["target"], reduction_of(f));
      };
    }
    for (const char* name :
         {"cross_entropy", "cross_entropy_sum", "cross_entropy_none", "cross_entropy_ignore_index",
          "cross_entropy_label_smoothing", "cross_entropy_smoothing_ignore",
          "cross_entropy_smoothing_sum", "cross_entropy_spatial"}) {
      t[name] = [](Fixture& f) {
        ember::CrossEntropyOptions o;
        o.reduction = reduction_of(f);
        o.ignore_index = f.attr_int("ignore_index");
        o.label_smoothing = f.attr_double("label_smoothing");
        return ember::cross_entropy(f["logits"], f["target"], o);
      };
    }
    for (const char* name :
         {"nll_loss", "nll_loss_sum", "nll_loss_none", "nll_loss_ignore_index"}) {
      t[name] = [](Fixture& f) {
        return ember::nll_loss(f["log_probs"], f["target"], reduction_of(f),
                               f.attr_int("ignore_index"));
      };
    }
    for (const char* name : {"bce_with_logits", "bce_with_logits_sum", "bce_with_logits_none",
                             "bce_with_logits_pos_weight", "bce_with_logits_pos_weight_none"}) {
      t[name] = [](Fixture& f) {
        return ember::bce_with_logits(f["logits"], f["target"], reduction_of(f),
                                      optional_tensor(f, "pos_weight"));
      };
    }
    return t;
  }();
  return table;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tensor names in a case that are results rather than inputs.
bool is_result(const std::string& key) {
  return key == "out" || key == "w" || starts_with(key, "grad_") || ends_with(key, "_after");
}

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : op_table()) names.push_back(name);
  return names;
}

class OpFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OpFixture, MatchesPyTorch) {
  const std::string name = GetParam();
  Fixture f = ember_test::load_fixture(name);
  Fixture pristine = ember_test::load_fixture(name);
  const double rtol = f.rtol(), atol = f.atol();

  std::vector<std::string> inputs, differentiable;
  for (const std::string& key : f.order) {
    if (is_result(key)) continue;
    inputs.push_back(key);
    if (f.has("grad_" + key)) {
      f[key].requires_grad_();
      differentiable.push_back(key);
    }
  }

  Tensor out = op_table().at(name)(f);
  ASSERT_TRUE(out.defined()) << name << ": the op returned an undefined tensor";
  ember_test::expect_close(out, f["out"], rtol, atol, name + " output");
  EXPECT_EQ(out.requires_grad(), !differentiable.empty())
      << name << ": the output's requires_grad does not follow its inputs'";

  // In-place effects: only the *_after tensors (batch-norm running stats) may change.
  for (const std::string& key : inputs) {
    const std::string after = key + "_after";
    if (f.has(after)) {
      ember_test::expect_close(f[key], f[after], rtol, atol, name + " " + key + " after the call");
    } else {
      ember_test::expect_equal(f[key].detach(), pristine[key],
                               name + ": input '" + key + "' was modified by the op");
    }
  }

  if (differentiable.empty()) {
    EXPECT_FALSE(f.has("w")) << name << ": fixture has a weight but no differentiable input";
    return;
  }
  Tensor loss = (out * f["w"]).sum();
  loss.backward();
  for (const std::string& key : differentiable) {
    ember_test::expect_close(f[key].grad(), f["grad_" + key], rtol, atol,
                             name + " grad of '" + key + "'");
  }
  // Inputs without a stored gradient (targets, indices, masks, running stats) get none.
  for (const std::string& key : inputs) {
    if (!f.has("grad_" + key)) {
      EXPECT_FALSE(f[key].grad().defined())
          << name << ": non-differentiable input '" << key << "' received a gradient";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpFixture, ::testing::ValuesIn(table_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Every fixture in the file is exercised above, and every table entry has a fixture.
TEST(OpFixtureFile, TableCoversEveryCase) {
  const std::vector<std::string> in_file = ember_test::fixture_names();
  const std::set<std::string> file_set(in_file.begin(), in_file.end());
  EXPECT_GE(in_file.size(), 100u) << "op_fixtures.json looks truncated";
  for (const std::string& name : in_file) {
    EXPECT_TRUE(op_table().count(name)) << "fixture '" << name << "' has no entry in op_table()";
  }
  for (const auto& [name, fn] : op_table()) {
    EXPECT_TRUE(file_set.count(name)) << "op_table() entry '" << name << "' has no fixture";
  }
}

// The comparison itself must be able to fail: a perturbed value, a wrong shape and a wrong
// dtype are each reported.
TEST(OpFixtureFile, ComparisonDetectsMismatch) {
  Fixture f = ember_test::load_fixture("add");
  Tensor want = f["out"];
  std::vector<float> v = want.to_vector<float>();
  v[5] += 1e-3f;
  Tensor bumped = ember::from_vector<float>(v, want.shape());
  ::testing::AssertionResult r = ember_test::check_close(bumped, want, 1e-5, 1e-6, "add output");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("[1, 1]"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("add output"), std::string::npos) << r.message();
  EXPECT_FALSE(ember_test::check_close(want.reshape({4, 3}), want, 1e-5, 1e-6, "reshaped"));
  EXPECT_FALSE(ember_test::check_close(want.to(ember::DType::f64), want, 1e-5, 1e-6, "f64"));
  EXPECT_TRUE(ember_test::check_close(want.clone(), want, 1e-5, 1e-6, "clone"));
}

}  // namespace
