// tests/test_catalogue.cpp — the one test driver for every op of the catalogue
// (include/ember/catalogue.hpp): each case below runs through the three tiers of STYLE §8.
//
//   MatchesPyTorch  tier 1: the case of tests/data/op_fixtures.json (tests/gen_fixtures.py):
//                   inputs with a stored gradient are made requires_grad_(), the output is
//                   compared with PyTorch's, then sum(out * w) is back-propagated and every
//                   input's .grad() compared.
//   Gradcheck       tier 2: the same inputs in f64 against central differences.
//   EveryDType      tier 3: every dtype the catalogue claims on the CPU, against the f64 run
//                   of the same values; a dtype it does not claim must be refused with an
//                   ember::Error before dispatch.
//   EveryDevice     tier 3: every dtype the catalogue claims on each available GPU, output and
//                   gradients against the CPU.
// A case names its op by its name's prefix (add_bcast_lead is Op::add). The coverage tests
// fail when a catalogue op has no case, a differentiable op has no case with gradients, or
// the table and the fixture file disagree. Random ops (the *_moments cases) compare the
// statistics of a large sample with their expectation, and run with the seed reset before
// every evaluation, so gradcheck and the device comparison see the same draws.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "error_of.hpp"
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
      return ember::addmm(f["input"], f["a"], f["b"], f.attr_double("beta"),
                          f.attr_double("alpha"));
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
      return ember::nansum(ember::log(f["x"]), f.attr_shape("dims"), f.attr_bool("keepdim"));
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
      t[name] = [](Fixture& f) {
        return ember::leaky_relu(f["x"], f.attr_double("negative_slope"));
      };
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
        return ember::batch_norm(f["x"], f["running_mean"], f["running_var"], f["weight"],
                                 f["bias"], f.attr_bool("training"), f.attr_double("momentum"),
                                 f.attr_double("eps"));
      };
    }

    // ---- decompositions and einsum
    t["inv"] = t["inv_batched"] = [](Fixture& f) { return ember::inv(f["a"]); };
    t["det"] = t["det_batched"] = [](Fixture& f) { return ember::det(f["a"]); };
    t["solve"] =
        t["solve_vector_broadcast"] = [](Fixture& f) { return ember::solve(f["a"], f["b"]); };
    t["cholesky"] = [](Fixture& f) {
      return ember::cholesky((f["a"] + f["a"].transpose(-2, -1)) * 0.5);
    };
    t["qr_q"] = [](Fixture& f) { return ember::qr(f["a"]).Q; };
    t["qr_r"] = [](Fixture& f) { return ember::qr(f["a"]).R; };
    t["svd_values"] = [](Fixture& f) { return ember::svd(f["a"]).S; };
    t["svd_u_projector"] = [](Fixture& f) {
      Tensor u = ember::svd(f["a"]).U;
      return ember::matmul(u, u.transpose(-2, -1));
    };
    t["svd_v_projector"] = [](Fixture& f) {
      Tensor vh = ember::svd(f["a"]).Vh;
      return ember::matmul(vh.transpose(-2, -1), vh);
    };
    for (const char* name : {"einsum_matmul", "einsum_attention", "einsum_trace", "einsum_diagonal",
                             "einsum_outer_implicit", "einsum_ellipsis", "einsum_sum_permute",
                             "einsum_chain", "einsum_bilinear"}) {
      t[name] = [](Fixture& f) {
        std::vector<Tensor> xs;
        for (int i = 0; f.has("x" + std::to_string(i)); ++i)
          xs.push_back(f["x" + std::to_string(i)]);
        return ember::einsum(f.attr_string("equation"), xs);
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
    t["conv2d_pad1"] = [](Fixture& f) {
      return ember::conv2d(f["x"], f["weight"], f["bias"], 1, 1);
    };
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
    // ---- sorting, selection and scans
    const auto flag = [](Fixture& f, const char* key) {
      return f.attrs.contains(key) && f.attr_bool(key);
    };
    t["sort_dim1"] = t["sort_desc_dim0"] = [flag](Fixture& f) {
      return ember::sort(f["x"], f.attr_int("dim"), flag(f, "descending")).values;
    };
    t["sort_indices_3d"] = [](Fixture& f) {
      return ember::sort(f["x"], f.attr_int("dim")).indices;
    };
    t["argsort_last"] = t["argsort_desc"] = [flag](Fixture& f) {
      return ember::argsort(f["x"], f.attr_int("dim"), flag(f, "descending"));
    };
    t["topk_k2"] = t["topk_smallest_dim0"] = [](Fixture& f) {
      return ember::topk(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("largest")).values;
    };
    t["topk_indices"] = [](Fixture& f) {
      return ember::topk(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("largest"))
          .indices;
    };
    t["kthvalue_k2"] = t["kthvalue_keepdim_dim0"] = [](Fixture& f) {
      return ember::kthvalue(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("keepdim"))
          .values;
    };
    t["kthvalue_indices"] = [](Fixture& f) {
      return ember::kthvalue(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("keepdim"))
          .indices;
    };
    t["median_all"] = [](Fixture& f) { return ember::median(f["x"]); };
    t["median_dim1"] = t["median_even_keepdim"] = [](Fixture& f) {
      return ember::median(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
    };
    t["median_indices"] = [](Fixture& f) {
      return ember::median(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
    };
    t["nanmedian_dim1"] = [](Fixture& f) {
      return ember::nanmedian(ember::log(f["x"]), f.attr_int("dim"), f.attr_bool("keepdim")).values;
    };
    t["nanmedian_all"] = [](Fixture& f) { return ember::nanmedian(ember::log(f["x"])); };
    t["max_with_indices_dim1"] = [](Fixture& f) {
      return ember::max(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
    };
    t["max_with_indices_indices"] = [](Fixture& f) {
      return ember::max(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
    };
    t["min_with_indices_dim0"] = [](Fixture& f) {
      return ember::min(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
    };
    t["min_with_indices_indices"] = [](Fixture& f) {
      return ember::min(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
    };
    t["cumsum_dim1"] =
        t["cumsum_dim0_3d"] = [](Fixture& f) { return ember::cumsum(f["x"], f.attr_int("dim")); };
    t["cumprod_dim1"] =
        t["cumprod_zeros"] = [](Fixture& f) { return ember::cumprod(f["x"], f.attr_int("dim")); };
    t["cummax_dim1"] = [](Fixture& f) { return ember::cummax(f["x"], f.attr_int("dim")).values; };
    t["cummax_indices"] = [](Fixture& f) {
      return ember::cummax(f["x"], f.attr_int("dim")).indices;
    };
    t["cummin_dim0"] = [](Fixture& f) { return ember::cummin(f["x"], f.attr_int("dim")).values; };
    t["cummin_indices"] = [](Fixture& f) {
      return ember::cummin(f["x"], f.attr_int("dim")).indices;
    };
    t["diff_dim1"] = [](Fixture& f) {
      return ember::diff(f["x"], f.attr_int("n"), f.attr_int("dim"));
    };
    t["diff_n2_prepend_append"] = [](Fixture& f) {
      return ember::diff(f["x"], f.attr_int("n"), f.attr_int("dim"), f["prepend"], f["append"]);
    };
    // ---- losses
    t["cross_entropy_weight"] = t["cross_entropy_weight_sum"] = [](Fixture& f) {
      return ember::cross_entropy(f["logits"], f["target"],
                                  {.reduction = reduction_of(f),
                                   .ignore_index = f.attr_int("ignore_index"),
                                   .label_smoothing = f.attr_double("label_smoothing"),
                                   .weight = f["weight"]});
    };
    t["nll_loss_weight"] = [](Fixture& f) {
      return ember::nll_loss(f["log_probs"], f["target"], reduction_of(f),
                             f.attr_int("ignore_index"), f["weight"]);
    };
    t["bce_with_logits_weight"] = [](Fixture& f) {
      return ember::bce_with_logits(f["logits"], f["target"], reduction_of(f), Tensor(),
                                    f["weight"]);
    };
    t["binary_cross_entropy"] = t["binary_cross_entropy_sum"] = [](Fixture& f) {
      return ember::binary_cross_entropy(f["input"], f["target"], reduction_of(f),
                                         optional_tensor(f, "weight"));
    };
    t["l1_loss"] = [](Fixture& f) {
      return ember::l1_loss(f["input"], f["target"], reduction_of(f));
    };
    t["smooth_l1_loss_beta"] = [](Fixture& f) {
      return ember::smooth_l1_loss(f["input"], f["target"], reduction_of(f), f.attr_double("beta"));
    };
    t["huber_loss_delta"] = [](Fixture& f) {
      return ember::huber_loss(f["input"], f["target"], reduction_of(f), f.attr_double("delta"));
    };
    t["kl_div_batchmean"] = t["kl_div_log_target"] = [](Fixture& f) {
      const Reduction r =
          f.attr_string("reduction") == "batchmean" ? Reduction::batchmean : reduction_of(f);
      return ember::kl_div(f["input"], f["target"], r, f.attr_bool("log_target"));
    };
    t["margin_ranking_loss"] = [](Fixture& f) {
      return ember::margin_ranking_loss(f["x1"], f["x2"], f["y"], f.attr_double("margin"),
                                        reduction_of(f));
    };
    t["triplet_margin_loss"] = t["triplet_margin_loss_swap"] = [](Fixture& f) {
      return ember::triplet_margin_loss(f["anchor"], f["positive"], f["negative"],
                                        f.attr_double("margin"), 2.0, 1e-6, f.attr_bool("swap"));
    };
    t["cosine_embedding_loss"] = [](Fixture& f) {
      return ember::cosine_embedding_loss(f["x1"], f["x2"], f["y"], f.attr_double("margin"),
                                          reduction_of(f));
    };
    t["poisson_nll_loss"] = t["poisson_nll_loss_full"] = [](Fixture& f) {
      return ember::poisson_nll_loss(f["input"], f["target"], f.attr_bool("log_input"),
                                     f.attr_bool("full"), 1e-8, reduction_of(f));
    };
    t["ctc_loss"] = t["ctc_loss_packed_sum"] = [](Fixture& f) {
      return ember::ctc_loss(ember::log_softmax(f["x"], 2), f["targets"], f["input_lengths"],
                             f["target_lengths"], f.attr_int("blank"), reduction_of(f),
                             f.attr_bool("zero_infinity"));
    };
    // ---- rearrangements and indexing
    t["flip_dims01"] =
        t["flip_last_3d"] = [](Fixture& f) { return ember::flip(f["x"], f.attr_shape("dims")); };
    t["roll_dims"] = t["roll_flat"] = [](Fixture& f) {
      return ember::roll(f["x"], f.attr_shape("shifts"), f.attr_shape("dims"));
    };
    t["repeat_lead"] = [](Fixture& f) { return ember::repeat(f["x"], f.attr_shape("repeats")); };
    t["tile_short"] = [](Fixture& f) { return ember::tile(f["x"], f.attr_shape("reps")); };
    t["repeat_interleave_dim1"] = [](Fixture& f) {
      return ember::repeat_interleave(f["x"], f.attr_int("repeats"), f.attr_int("dim"));
    };
    t["repeat_interleave_flat"] = [](Fixture& f) {
      return ember::repeat_interleave(f["x"], f.attr_int("repeats"));
    };
    t["repeat_interleave_counts"] = [](Fixture& f) {
      return ember::repeat_interleave(f["x"], f["repeats"], f.attr_int("dim"));
    };
    t["unbind_dim1"] = [](Fixture& f) {
      return ember::unbind(f["x"], f.attr_int("dim"))[static_cast<size_t>(f.attr_int("pick"))];
    };
    t["movedim_two"] = [](Fixture& f) {
      return ember::movedim(f["x"], f.attr_shape("source"), f.attr_shape("destination"));
    };
    t["tril_below"] = [](Fixture& f) { return ember::tril(f["x"], f.attr_int("diagonal")); };
    t["triu_batched"] = [](Fixture& f) { return ember::triu(f["x"], f.attr_int("diagonal")); };
    t["diag_vector_above"] = t["diag_vector_below"] =
        t["diag_matrix"] = [](Fixture& f) { return ember::diag(f["x"], f.attr_int("diagonal")); };
    t["meshgrid_ij"] = t["meshgrid_xy"] = [](Fixture& f) {
      return ember::stack(ember::meshgrid({f["a"], f["b"]}, f.attr_string("indexing")));
    };
    for (const char* name :
         {"pad_constant", "pad_crop", "pad_reflect", "pad_replicate", "pad_circular"}) {
      t[name] = [](Fixture& f) {
        return ember::pad(f["x"], f.attr_shape("pads"), f.attr_string("mode"),
                          f.attr_double("value"));
      };
    }
    t["unfold_dim1"] = t["unfold_dim0_overlap"] = [](Fixture& f) {
      return ember::unfold(f["x"], f.attr_int("dim"), f.attr_int("size"), f.attr_int("step"));
    };
    t["pixel_shuffle"] = [](Fixture& f) {
      return ember::pixel_shuffle(f["x"], f.attr_int("factor"));
    };
    t["pixel_unshuffle"] = [](Fixture& f) {
      return ember::pixel_unshuffle(f["x"], f.attr_int("factor"));
    };
    t["nonzero"] = [](Fixture& f) { return ember::nonzero(f["x"]); };
    t["masked_select"] = [](Fixture& f) { return ember::masked_select(f["x"], f["mask"]); };
    t["index_add"] = [](Fixture& f) {
      return ember::index_add(f["x"], f.attr_int("dim"), f["index"], f["source"],
                              f.attr_double("alpha"));
    };
    t["index_fill"] = [](Fixture& f) {
      return ember::index_fill(f["x"], f.attr_int("dim"), f["index"], f.attr_double("value"));
    };
    t["index_copy"] = [](Fixture& f) {
      return ember::index_copy(f["x"], f.attr_int("dim"), f["index"], f["source"]);
    };
    t["scatter"] = [](Fixture& f) {
      return ember::scatter(f["x"], f.attr_int("dim"), f["index"], f["src"]);
    };
    t["scatter_value"] = [](Fixture& f) {
      return ember::scatter(f["x"], f.attr_int("dim"), f["index"], f.attr_double("value"));
    };
    for (const char* name :
         {"scatter_reduce_sum", "scatter_reduce_prod", "scatter_reduce_mean_exclude_self",
          "scatter_reduce_amax", "scatter_reduce_amin_exclude_self"}) {
      t[name] = [](Fixture& f) {
        return ember::scatter_reduce(f["x"], f.attr_int("dim"), f["index"], f["src"],
                                     f.attr_string("reduce"), f.attr_bool("include_self"));
      };
    }
    t["embedding_bag_sum_offsets"] = [](Fixture& f) {
      return ember::embedding_bag(f["weight"], f["input"], f["offsets"], "sum",
                                  f["per_sample_weights"]);
    };
    t["embedding_bag_mean_padding"] = [](Fixture& f) {
      return ember::embedding_bag(f["weight"], f["input"], f["offsets"], "mean", Tensor(), true,
                                  f.attr_int("padding_idx"));
    };
    t["embedding_bag_max_2d"] = [](Fixture& f) {
      return ember::embedding_bag(f["weight"], f["input"], Tensor(), "max");
    };
    t["one_hot"] = t["one_hot_infer"] = [](Fixture& f) {
      return ember::one_hot(f["index"], f.attr_int("num_classes"));
    };
    // [fraction of zeros, mean(out) / mean(in)] of dropout over x repeated to 20000 values.
    t["dropout_moments"] = [](Fixture& f) {
      Tensor x = f["x"];
      Tensor big = x.reshape({1, x.numel()}).expand({100, x.numel()}).contiguous();
      Tensor y = ember::dropout(big, f.attr_double("p"));
      Tensor zeros = ember::mean(ember::eq(y, 0.0).to(x.dtype()));
      return ember::stack({zeros, ember::div(ember::mean(y), ember::mean(big))});
    };
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

// ---- what the tiers share

bool is_statistical(const std::string& name) { return ends_with(name, "_moments"); }

// The catalogue op a case exercises: the longest op name that is the case's name or a prefix
// of it followed by '_' (cmp_eq is eq; rsub/rdiv with a scalar are sub/div). Op::count: none.
ember::Op op_of_case(const std::string& case_name) {
  std::string name = case_name;
  if (starts_with(name, "cmp_")) name = name.substr(4);
  if (starts_with(name, "rsub_")) name = "sub";
  if (starts_with(name, "rdiv_")) name = "div";
  ember::Op best = ember::Op::count;
  size_t best_len = 0;
  for (const ember::OpInfo& info : ember::catalogue()) {
    const std::string op = info.name;
    if ((name == op || starts_with(name, op + "_")) && op.size() > best_len) {
      best = info.op;
      best_len = op.size();
    }
  }
  return best;
}

constexpr uint64_t kCaseSeed = 20261201;

// Runs the case on a fresh copy of its fixture with the seed reset (random ops draw the same
// numbers every time), `inputs` replacing the fixture's input tensors in file order.
Tensor run_case(const std::string& name, const std::vector<std::string>& keys,
                const std::vector<Tensor>& inputs) {
  Fixture f = ember_test::load_fixture(name);
  for (size_t i = 0; i < keys.size(); ++i) f[keys[i]] = inputs[i];
  ember::manual_seed(kCaseSeed);
  return op_table().at(name)(f);
}

// The input tensors of a case (fixture order) and which of them carry gradients.
struct CaseInputs {
  std::vector<std::string> keys;
  std::vector<Tensor> values;
  std::vector<bool> differentiable;
};

CaseInputs inputs_of(const std::string& name) {
  Fixture f = ember_test::load_fixture(name);
  CaseInputs in;
  for (const std::string& key : f.order) {
    if (is_result(key)) continue;
    in.keys.push_back(key);
    in.values.push_back(f[key]);
    const bool floating = ember::is_floating(f[key].dtype());
    in.differentiable.push_back(
        f.has("grad_" + key) ||
        (is_statistical(name) && floating && ember::op_info(op_of_case(name)).differentiable));
  }
  return in;
}

// A float fixture input as `dtype`, with values that dtype can hold: floats as they are
// (rounded to the dtype), integers as round(3x) (|.| for u8), bool as x > 0. Index and bool
// inputs keep their dtype. Lands on `device`.
Tensor as_dtype(const Tensor& x, ember::DType dtype, ember::Device device) {
  using ember::DType;
  // detach(): a fresh leaf every time, never an alias of the fixture's tensor that a run
  // marked requires_grad.
  if (!ember::is_floating(x.dtype())) return x.detach().to(device);
  if (ember::is_floating(dtype)) return x.detach().to(dtype).to(device);
  std::vector<double> v = ember_test::values_f64(x);
  for (double& e : v) {
    if (dtype == DType::boolean)
      e = e > 0.0 ? 1.0 : 0.0;
    else
      e = dtype == DType::u8 ? std::round(std::abs(3.0 * e)) : std::round(3.0 * e);
  }
  return ember::from_vector<double>(v, x.shape()).to(dtype).to(device);
}

// A case whose inputs are all integer or bool (one_hot's class indices) has nothing else to
// sweep: its inputs themselves are cast to each dtype.
bool all_integral(const CaseInputs& in) {
  for (const Tensor& t : in.values)
    if (ember::is_floating(t.dtype())) return false;
  return !in.values.empty();
}

std::vector<Tensor> inputs_as(const CaseInputs& in, ember::DType dtype, ember::Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : in.values)
    out.push_back(all_integral(in) ? t.detach().to(dtype).to(device) : as_dtype(t, dtype, device));
  return out;
}

// The reference of a run in `dtype`: the same values (as_dtype's), float inputs held in f64.
std::vector<Tensor> reference_inputs(const CaseInputs& in, ember::DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in.values) {
    Tensor v = all_integral(in) ? t.detach().to(dtype) : as_dtype(t, dtype, ember::Device::cpu());
    out.push_back(ember::is_floating(t.dtype()) ? v.to(ember::DType::f64) : v);
  }
  return out;
}

// What a run in `dtype` is compared with: the f64 run of the same values; for random ops,
// which draw other numbers in each dtype, the expectation stored in the fixture.
Tensor reference_of(const std::string& name, const CaseInputs& in, ember::DType dtype) {
  if (is_statistical(name)) return ember_test::load_fixture(name)["out"];
  return run_case(name, in.keys, reference_inputs(in, dtype));
}

// Tolerance of a run in `dtype` against the f64 run of the same values (check_close's rtol
// and atol, atol scaled by max(1, max|want|)).
std::pair<double, double> tolerance_of(ember::DType dtype, const std::string& name) {
  using ember::DType;
  // Random ops against their expectation: the fixture's widest statistical tolerance.
  if (is_statistical(name) && ember::is_floating(dtype)) return {0.0, 2e-2};
  switch (dtype) {
    case DType::f64: return {1e-10, 1e-10};
    case DType::f32: return {2e-4, 2e-5};
    case DType::f16: return {4e-3, 4e-3};
    case DType::bf16: return {2e-2, 2e-2};
    default: return {0.0, 0.0};
  }
}

// got against want cast to got's dtype (a run in i64 of masked_fill(x, -1.5) writes -1, as
// PyTorch), exact for integer and bool results.
::testing::AssertionResult check_run(const Tensor& got, const Tensor& want, ember::DType dtype,
                                     const std::string& name, const std::string& what) {
  const auto [rtol, atol] = tolerance_of(dtype, name);
  Tensor w = want.to(ember::Device::cpu()).to(got.dtype());
  if (!ember::is_floating(got.dtype()))
    return ember_test::check_close(got.to(ember::Device::cpu()), w, 0.0, 0.0, what);
  return ember_test::check_close(got.to(ember::Device::cpu()).to(ember::DType::f64),
                                 w.to(ember::DType::f64), rtol, atol, what);
}

std::vector<ember::DType> all_dtypes() {
  std::vector<ember::DType> out;
  for (int i = 0; i < ember::kNumDTypes; ++i) out.push_back(static_cast<ember::DType>(i));
  return out;
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

// Tier 2: the gradients of the differentiable inputs against f64 central differences.
TEST_P(OpFixture, Gradcheck) {
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count) << name << ": no catalogue op";
  CaseInputs in = inputs_of(name);
  std::vector<Tensor> x;
  bool any = false;
  for (size_t i = 0; i < in.values.size(); ++i) {
    Tensor t = in.values[i].detach().clone();
    if (in.differentiable[i]) {
      t = t.to(ember::DType::f64).requires_grad_();
      any = true;
    }
    x.push_back(t);
  }
  if (!any)  // Catalogue.EveryOpHasCasesForEveryTier makes sure another case checks the op
    GTEST_SKIP() << name << ": no differentiable input (a non-differentiable result)";
  const auto keys = in.keys;
  ember::GradcheckResult r =
      ember::gradcheck([&](const std::vector<Tensor>& v) { return run_case(name, keys, v); }, x,
                       {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3});
  EXPECT_TRUE(r.ok) << name << ": " << r.message;
}

// Tier 3 on the CPU: every claimed dtype against the f64 run of the same values; the first
// unclaimed dtype is refused before dispatch with an ember::Error (never an internal one).
TEST_P(OpFixture, EveryDType) {
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count);
  const ember::Device cpu = ember::Device::cpu();
  CaseInputs in = inputs_of(name);
  bool refused = false;
  for (ember::DType dtype : all_dtypes()) {
    const std::string what = name + " in " + std::string(ember::dtype_name(dtype));
    if (ember::supports(op, dtype, cpu)) {
      Tensor got = run_case(name, in.keys, inputs_as(in, dtype, cpu));
      EXPECT_TRUE(check_run(got, reference_of(name, in, dtype), dtype, name,
                            what + " (claimed by the catalogue)"));
    } else if (!refused) {
      refused = true;
      const std::string msg = ember::test_util::error_of(
          [&] { run_case(name, in.keys, inputs_as(in, dtype, cpu)); }, what);
      EXPECT_NE(msg.find("unsupported dtype"), std::string::npos) << what << ": " << msg;
      EXPECT_EQ(msg.find("internal error"), std::string::npos) << what << ": " << msg;
    }
  }
}

// Tier 3 on every GPU: output and gradients of every claimed dtype against the CPU.
TEST_P(OpFixture, EveryDevice) {
  if (!ember::cuda_available())
    GTEST_SKIP() << "no CUDA device: the device tier runs on a machine with a GPU";
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count);
  const ember::Device cpu = ember::Device::cpu(), gpu = ember::Device::cuda();
  CaseInputs in = inputs_of(name);
  for (ember::DType dtype : all_dtypes()) {
    if (!ember::supports(op, dtype, gpu)) continue;
    const std::string what = name + " on cuda in " + std::string(ember::dtype_name(dtype));
    std::vector<Tensor> xc = inputs_as(in, dtype, cpu), xg = inputs_as(in, dtype, gpu);
    const bool grads =
        ember::is_floating(dtype) && dtype != ember::DType::f16 && dtype != ember::DType::bf16;
    for (size_t i = 0; i < xc.size(); ++i)
      if (grads && in.differentiable[i]) {
        xc[i].requires_grad_();
        xg[i].requires_grad_();
      }
    Tensor oc = ember::supports(op, dtype, cpu) ? run_case(name, in.keys, xc)
                                                : reference_of(name, in, dtype);
    Tensor og = run_case(name, in.keys, xg);
    ASSERT_EQ(og.device(), gpu) << what << ": the result left the device";
    EXPECT_TRUE(check_run(og, oc, dtype, name, what));
    if (!grads || !og.requires_grad() || !oc.requires_grad()) continue;
    Tensor w = ember::randn(oc.shape(), {.dtype = oc.dtype()});
    (oc * w).sum().backward();
    (og * w.to(gpu)).sum().backward();
    for (size_t i = 0; i < xc.size(); ++i) {
      if (in.differentiable[i]) {
        EXPECT_TRUE(check_run(xg[i].grad(), xc[i].grad(), dtype, name,
                              what + " grad of '" + in.keys[i] + "'"));
      }
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

// Every catalogue op has a case; every differentiable op has a case whose gradients are
// checked (tiers 1 and 2); every case names a catalogue op.
TEST(Catalogue, EveryOpHasCasesForEveryTier) {
  std::map<ember::Op, int> cases, with_grads;
  for (const auto& [name, fn] : op_table()) {
    const ember::Op op = op_of_case(name);
    EXPECT_NE(op, ember::Op::count) << "case '" << name << "' names no catalogue op";
    if (op == ember::Op::count) continue;
    ++cases[op];
    const CaseInputs in = inputs_of(name);
    for (bool d : in.differentiable) with_grads[op] += d ? 1 : 0;
  }
  for (const ember::OpInfo& info : ember::catalogue()) {
    EXPECT_GT(cases[info.op], 0) << "catalogue op '" << info.name
                                 << "' has no case in tests/test_catalogue.cpp";
    if (info.differentiable) {
      EXPECT_GT(with_grads[info.op], 0)
          << "differentiable op '" << info.name << "' has no case with gradients";
    }
  }
}

// The catalogue's own rows: names are unique and found again, claims are sane.
TEST(Catalogue, RowsAreConsistent) {
  std::set<std::string> names;
  for (const ember::OpInfo& info : ember::catalogue()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name " << info.name;
    EXPECT_EQ(ember::op_by_name(info.name), info.op);
    EXPECT_STREQ(ember::op_name(info.op), info.name);
    EXPECT_NE(info.cpu, ember::kNoDTypes) << info.name << " claims no CPU dtype";
    EXPECT_TRUE(ember::supports(info.op, ember::DType::f32, ember::Device::cpu()) ||
                !info.cpu.contains(ember::DType::f32));
  }
  EXPECT_EQ(ember::op_by_name("no_such_op"), ember::Op::count);
  EXPECT_EQ(ember::catalogue().size(), static_cast<size_t>(ember::Op::count));
  EXPECT_EQ(ember::kFloat.to_string(), "f32, f64");
  EXPECT_EQ(ember::kNoDTypes.to_string(), "none");
#if !defined(EMBER_WITH_CUDA)
  EXPECT_FALSE(ember::supports(ember::Op::add, ember::DType::f32, ember::Device::cuda()));
#endif
}

// The driver's comparison must be able to fail: a dtype that computes the wrong values, and
// an op that is not refused, are both caught.
TEST(Catalogue, DriverDetectsWrongRuns) {
  Tensor want = ember::from_vector<double>({1.0, 2.0, -1.5}, {3});
  EXPECT_FALSE(check_run(ember::from_vector<float>({1.0f, 2.0f, -1.4f}, {3}), want,
                         ember::DType::f32, "x", "f32 run"));
  EXPECT_TRUE(check_run(ember::from_vector<float>({1.0f, 2.0f, -1.5f}, {3}), want,
                        ember::DType::f32, "x", "f32 run"));
  // i64 runs compare exactly against the reference cast to i64 (-1.5 -> -1).
  EXPECT_TRUE(check_run(ember::from_vector<int64_t>({1, 2, -1}, {3}), want, ember::DType::i64, "x",
                        "i64 run"));
  EXPECT_FALSE(check_run(ember::from_vector<int64_t>({1, 2, -2}, {3}), want, ember::DType::i64, "x",
                         "i64 run"));
  EXPECT_EQ(op_of_case("log_softmax_dim0"), ember::Op::log_softmax);
  EXPECT_EQ(op_of_case("cmp_ge"), ember::Op::ge);
  EXPECT_EQ(op_of_case("max_pool2d_with_indices_indices"), ember::Op::max_pool2d_with_indices);
  EXPECT_EQ(op_of_case("bogus"), ember::Op::count);
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
