// tests/test_op_cases_core.cpp — the op test driver's cases for the ops ember had before
// issue 16 (see tests/op_cases.hpp).
#include <limits>
#include <string>
#include <vector>

#include "op_cases.hpp"

namespace ember_test {

using ember::Reduction;
using ember::Shape;
using ember::Tensor;

namespace {
// Binary broadcast suffixes used by gen_fixtures.py.
const std::vector<std::string> kBinarySuffixes = {"", "_bcast_col_row", "_bcast_trailing",
                                                  "_bcast_lead", "_bcast_mid"};

}  // namespace

void add_core_cases(OpTable& t) {
  // ---- linear algebra
  for (const char* name :
       {"matmul_2d", "matmul_1d_2d", "matmul_2d_1d", "matmul_1d_1d", "matmul_batched_2d",
        "matmul_2d_batched", "matmul_batched", "matmul_batch_broadcast", "matmul_batched_1d",
        "matmul_1d_batched", "matmul_lead_broadcast"}) {
    t[name] = [](Fixture& f) { return ember::matmul(f["a"], f["b"]); };
  }
  t["linear_bias_3d"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"], f["bias"]); };
  t["linear_nobias"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"]); };
  t["linear_1d"] = [](Fixture& f) { return ember::linear(f["x"], f["weight"], f["bias"]); };
  t["mm"] = [](Fixture& f) { return ember::mm(f["a"], f["b"]); };
  t["bmm"] = [](Fixture& f) { return ember::bmm(f["a"], f["b"]); };
  t["dot"] = [](Fixture& f) { return ember::dot(f["a"], f["b"]); };
  t["outer"] = [](Fixture& f) { return ember::outer(f["a"], f["b"]); };
  t["addmm"] = [](Fixture& f) {
    return ember::addmm(f["input"], f["a"], f["b"], f.attr_double("beta"), f.attr_double("alpha"));
  };
  t["baddbmm"] = [](Fixture& f) {
    return ember::baddbmm(f["input"], f["a"], f["b"], f.attr_double("beta"),
                          f.attr_double("alpha"));
  };
  for (const char* name : {"std_dim1", "std_all_c0"}) {
    t[name] = [](Fixture& f) {
      return ember::std(f["x"], f.attr_shape("dims"), f.attr_int("correction"),
                        f.attr_bool("keepdim"));
    };
  }
  for (const char* name : {"logsumexp_dim1", "logsumexp_keepdim", "logsumexp_large"}) {
    t[name] = [](Fixture& f) {
      return ember::logsumexp(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
    };
  }
  for (const char* name : {"norm_2", "norm_1_dim1", "norm_inf", "norm_3_keepdim"}) {
    t[name] = [](Fixture& f) {
      const double p =
          f.attr("p").is_string() ? std::numeric_limits<double>::infinity() : f.attr_double("p");
      return ember::norm(f["x"], p, f.attr_shape("dims"), f.attr_bool("keepdim"));
    };
  }
  t["nansum_dim1"] = [](Fixture& f) {
    return ember::nansum(f["x"] + f["a"] / f["b"], f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  t["nanmean_all"] = [](Fixture& f) {
    return ember::nanmean(ember::log(f["x"]), f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  for (const char* name : {"count_nonzero_dim1", "count_nonzero_all"}) {
    t[name] = [](Fixture& f) { return ember::count_nonzero(f["x"], f.attr_shape("dims")); };
  }
  for (const char* name : {"any_dim1", "any_all_keepdim"}) {
    t[name] = [](Fixture& f) {
      return ember::any(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
    };
  }
  for (const char* name : {"all_dim1", "all_all"}) {
    t[name] = [](Fixture& f) {
      return ember::all(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
    };
  }
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
  for (const char* name : {"leaky_relu", "leaky_relu_slope"}) {
    t[name] = [](Fixture& f) { return ember::leaky_relu(f["x"], f.attr_double("negative_slope")); };
  }
  for (const char* name : {"elu", "elu_alpha"}) {
    t[name] = [](Fixture& f) { return ember::elu(f["x"], f.attr_double("alpha")); };
  }
  for (const char* name : {"hardtanh", "hardtanh_range"}) {
    t[name] = [](Fixture& f) {
      return ember::hardtanh(f["x"], f.attr_double("min_val"), f.attr_double("max_val"));
    };
  }
  for (const char* name : {"prelu", "prelu_channels"}) {
    t[name] = [](Fixture& f) { return ember::prelu(f["x"], f["weight"]); };
  }
  for (const char* name : {"glu", "glu_dim0"}) {
    t[name] = [](Fixture& f) { return ember::glu(f["x"], f.attr_int("dim")); };
  }
  using UnaryFn = Tensor (*)(const Tensor&);
  const std::pair<const char*, UnaryFn> math[] = {{"selu", ember::selu},
                                                  {"mish", ember::mish},
                                                  {"hardswish", ember::hardswish},
                                                  {"hardsigmoid", ember::hardsigmoid},
                                                  {"logsigmoid", ember::logsigmoid},
                                                  {"sin", ember::sin},
                                                  {"cos", ember::cos},
                                                  {"tan", ember::tan},
                                                  {"asin", ember::asin},
                                                  {"acos", ember::acos},
                                                  {"atan", ember::atan},
                                                  {"sinh", ember::sinh},
                                                  {"cosh", ember::cosh},
                                                  {"floor", ember::floor},
                                                  {"ceil", ember::ceil},
                                                  {"round", ember::round},
                                                  {"round_half_to_even", ember::round},
                                                  {"trunc", ember::trunc},
                                                  {"frac", ember::frac},
                                                  {"log1p", ember::log1p},
                                                  {"log1p_tiny", ember::log1p},
                                                  {"expm1", ember::expm1},
                                                  {"expm1_tiny", ember::expm1},
                                                  {"log2", ember::log2},
                                                  {"log10", ember::log10},
                                                  {"exp2", ember::exp2},
                                                  {"reciprocal", ember::reciprocal},
                                                  {"erf", ember::erf},
                                                  {"erfc", ember::erfc},
                                                  {"erfinv", ember::erfinv}};
  for (const auto& [name, fn] : math) t[name] = [fn](Fixture& f) { return fn(f["x"]); };
  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, BinaryFn> binary_math[] = {
      {"atan2", ember::atan2},
      {"atan2_bcast", ember::atan2},
      {"fmod", ember::fmod},
      {"remainder", ember::remainder},
      {"logical_and", ember::logical_and},
      {"logical_and_bcast", ember::logical_and},
      {"logical_or", ember::logical_or},
      {"logical_or_bcast", ember::logical_or},
      {"logical_xor", ember::logical_xor},
      {"logical_xor_bcast", ember::logical_xor}};
  for (const auto& [name, fn] : binary_math)
    t[name] = [fn](Fixture& f) { return fn(f["a"], f["b"]); };
  t["fmod_scalar"] = [](Fixture& f) { return ember::fmod(f["x"], f.attr_double("other")); };
  t["remainder_scalar"] = [](Fixture& f) {
    return ember::remainder(f["x"], f.attr_double("other"));
  };
  t["clamp_min"] = [](Fixture& f) { return ember::clamp_min(f["x"], f.attr_double("min")); };
  t["clamp_max"] = [](Fixture& f) { return ember::clamp_max(f["x"], f.attr_double("max")); };
  t["clamp_only_max"] = [](Fixture& f) {
    return ember::clamp(f["x"], std::nullopt, f.attr_double("max"));
  };
  t["clamp_tensor_bounds"] = [](Fixture& f) { return ember::clamp(f["x"], f["lo"], f["hi"]); };
  t["isnan"] = [](Fixture& f) { return ember::isnan(f["a"] / f["b"]); };
  t["isinf"] = [](Fixture& f) { return ember::isinf(f["a"] / f["b"]); };
  t["isfinite"] = [](Fixture& f) { return ember::isfinite(f["a"] / f["b"]); };
  t["nan_to_num_nonfinite"] = [](Fixture& f) {
    return ember::nan_to_num(f["a"] / f["b"], f.attr_double("nan"), f.attr_double("posinf"),
                             f.attr_double("neginf"));
  };
  t["nan_to_num"] = [](Fixture& f) { return ember::nan_to_num(f["x"]); };
  t["lerp"] = [](Fixture& f) { return ember::lerp(f["start"], f["end"], f["weight"]); };
  t["lerp_scalar"] = [](Fixture& f) {
    return ember::lerp(f["start"], f["end"], f.attr_double("weight"));
  };
  t["addcmul"] = [](Fixture& f) {
    return ember::addcmul(f["x"], f["t1"], f["t2"], f.attr_double("value"));
  };
  t["addcdiv"] = [](Fixture& f) {
    return ember::addcdiv(f["x"], f["t1"], f["t2"], f.attr_double("value"));
  };
  t["log"] = [](Fixture& f) { return ember::log(f["x"]); };
  t["relu"] = [](Fixture& f) { return ember::relu(f["x"]); };
  t["sigmoid"] = [](Fixture& f) { return ember::sigmoid(f["x"]); };
  t["tanh"] = [](Fixture& f) { return ember::tanh(f["x"]); };
  t["gelu_erf"] = [](Fixture& f) { return ember::gelu(f["x"], f.attr_string("approximate")); };
  t["gelu_tanh"] = [](Fixture& f) { return ember::gelu(f["x"], f.attr_string("approximate")); };
  t["silu"] = [](Fixture& f) { return ember::silu(f["x"]); };
  t["softplus"] = [](Fixture& f) { return ember::softplus(f["x"]); };
  t["softplus_beta2_threshold3"] = [](Fixture& f) {
    return ember::softplus(f["x"], f.attr_double("beta"), f.attr_double("threshold"));
  };
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
  t["transpose_2d"] = [](Fixture& f) { return ember::transpose(f["x"], 0, 1); };
  t["t_matrix"] = [](Fixture& f) { return f["x"].t(); };
  t["narrow"] = [](Fixture& f) {
    return f["x"].narrow(f.attr_int("dim"), f.attr_int("start"), f.attr_int("length"));
  };
  t["select"] = [](Fixture& f) { return f["x"].select(f.attr_int("dim"), f.attr_int("index")); };
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
  t["sum_to_leading"] = [](Fixture& f) { return ember::sum_to(f["x"], f.attr_shape("shape")); };
  t["squeeze_all"] = [](Fixture& f) { return f["x"].squeeze(); };
  t["unsqueeze_neg"] = [](Fixture& f) { return f["x"].unsqueeze(f.attr_int("dim")); };
  t["flatten_all"] = [](Fixture& f) { return f["x"].flatten(); };
  t["expand_new_leading"] = [](Fixture& f) { return f["x"].expand(f.attr_shape("shape")); };
  t["reshape_of_transpose"] = [](Fixture& f) { return f["x"].transpose(0, 1).reshape({12}); };
  t["cat_same_input_twice"] = [](Fixture& f) { return ember::cat({f["x"], f["x"]}, 0); };
  t["split_sizes"] = [](Fixture& f) {
    std::vector<Tensor> p = ember::split(f["x"], std::vector<int64_t>{1, 3, 2}, 0);
    return ember::cat({p[1], p[2], p[0]}, 0);
  };
  for (const char* name : {"cat_dim0", "cat_dim1"}) {
    t[name] = [](Fixture& f) { return ember::cat({f["a"], f["b"], f["c"]}, f.attr_int("dim")); };
  }
  for (const char* name : {"stack_dim0", "stack_dim1"}) {
    t[name] = [](Fixture& f) { return ember::stack({f["a"], f["b"], f["c"]}, f.attr_int("dim")); };
  }
  t["stack_last"] = [](Fixture& f) { return ember::stack({f["a"], f["b"]}, f.attr_int("dim")); };

  // ---- indexing
  for (const char* name : {"index_select_dim0_repeats", "index_select_dim1_repeats"}) {
    t[name] = [](Fixture& f) { return ember::index_select(f["x"], f.attr_int("dim"), f["index"]); };
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
  for (const char* name :
       {"layer_norm_affine", "layer_norm_weight_only", "layer_norm_plain_2dims"}) {
    t[name] = [](Fixture& f) {
      return ember::layer_norm(f["x"], f.attr_shape("normalized_shape"),
                               optional_tensor(f, "weight"), optional_tensor(f, "bias"),
                               f.attr_double("eps"));
    };
  }
  for (const char* name :
       {"batch_norm_train_2d", "batch_norm_train_3d", "batch_norm_train_4d", "batch_norm_eval"}) {
    t[name] = [](Fixture& f) {
      return ember::batch_norm(f["x"], f["running_mean"], f["running_var"], f["weight"], f["bias"],
                               f.attr_bool("training"), f.attr_double("momentum"),
                               f.attr_double("eps"));
    };
  }

  // ---- losses
  for (const char* name : {"mse_loss_mean", "mse_loss_sum", "mse_loss_none"}) {
    t[name] = [](Fixture& f) { return ember::mse_loss(f["input"], f["target"], reduction_of(f)); };
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
  for (const char* name : {"nll_loss", "nll_loss_sum", "nll_loss_none", "nll_loss_ignore_index"}) {
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

  // ---- catalogue ops added with the driver
  t["prod_all"] = [](Fixture& f) { return ember::prod(f["x"]); };
  t["prod_dim1"] = [](Fixture& f) { return ember::prod(f["x"], {f.attr_int("dim")}); };
  for (const char* name : {"logical_not", "logical_not_float"})
    t[name] = [](Fixture& f) { return ember::logical_not(f["x"]); };
  t["clone"] = [](Fixture& f) { return f["x"].clone(); };
  t["contiguous"] = [](Fixture& f) { return f["x"].t().contiguous(); };
  t["to"] = [](Fixture& f) { return f["x"].to(ember::DType::f64).to(f["x"].dtype()); };
  t["view"] = [](Fixture& f) { return f["x"].view({2, 6}); };
  t["split"] = [](Fixture& f) { return ember::split(f["x"], 2, 1)[1]; };
  t["chunk"] = [](Fixture& f) { return ember::chunk(f["x"], 3, 0)[2]; };
  t["conv2d_pad1"] = [](Fixture& f) { return ember::conv2d(f["x"], f["weight"], f["bias"], 1, 1); };
  t["conv2d_groups_stride2"] = [](Fixture& f) {
    return ember::conv2d(f["x"], f["weight"], Tensor(), 2, 0, 1, 2);
  };
  t["max_pool2d"] = [](Fixture& f) { return ember::max_pool2d(f["x"], 2); };
  t["max_pool2d_with_indices"] = [](Fixture& f) {
    return ember::max_pool2d_with_indices(f["x"], 3, 2, 1).first;
  };
  t["max_pool2d_with_indices_indices"] = [](Fixture& f) {
    return ember::max_pool2d_with_indices(f["x"], 3, 2, 1).second;
  };
  t["avg_pool2d"] = [](Fixture& f) { return ember::avg_pool2d(f["x"], 3, 2, 1); };
  // [mean, variance] of 100000 draws in like's dtype and device.
  t["rand_moments"] = [](Fixture& f) {
    Tensor r = ember::rand({100000}, {.dtype = f["like"].dtype(), .device = f["like"].device()});
    Tensor r64 = r.to(ember::DType::f64);
    return ember::stack({ember::mean(r64), ember::var(r64, 0)}).to(f["like"].dtype());
  };
  t["randn_moments"] = [](Fixture& f) {
    Tensor r = ember::randn({100000}, {.dtype = f["like"].dtype(), .device = f["like"].device()});
    Tensor r64 = r.to(ember::DType::f64);
    return ember::stack({ember::mean(r64), ember::var(r64, 0)}).to(f["like"].dtype());
  };
  // [fraction of zeros, mean(out) / mean(in)] of dropout over x repeated to 20000 values.
  t["dropout_moments"] = [](Fixture& f) {
    Tensor x = f["x"];
    Tensor big = x.reshape({1, x.numel()}).expand({100, x.numel()}).contiguous();
    Tensor y = ember::dropout(big, f.attr_double("p"));
    Tensor zeros = ember::mean(ember::eq(y, 0.0).to(x.dtype()));
    return ember::stack({zeros, ember::div(ember::mean(y), ember::mean(big))});
  };
}

}  // namespace ember_test
