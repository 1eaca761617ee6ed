// tests/test_op_cases_shape.cpp — the op test driver's cases for issue 32's shape, indexing,
// reductions and scans (see tests/op_cases.hpp); their PyTorch references are
// tests/fixture_cases_shape.py, written to tests/data/op_fixtures_shape.json by
// `/usr/bin/python3 tests/gen_fixtures.py shape`. Ops with several results are checked
// through one tensor: pieces joined in reverse order (a wrong boundary shows) or stacked.
#include <optional>
#include <string>
#include <vector>

#include "ember/ops_shape.hpp"
#include "op_cases.hpp"

namespace ember_test {

using ember::Shape;
using ember::Tensor;

namespace {

Tensor joined_reversed(std::vector<Tensor> parts, int64_t dim) {
  std::vector<Tensor> rev(parts.rbegin(), parts.rend());
  return ember::cat(rev, dim);
}

std::vector<int64_t> int_list(const Fixture& f, const std::string& key) {
  return f.attr(key).get<std::vector<int64_t>>();
}

std::optional<int64_t> optional_dim(const Fixture& f) {
  return f.attrs.contains("dim") ? std::optional<int64_t>(f.attr_int("dim")) : std::nullopt;
}

void add_shape_joins(OpTable& t) {
  t["rot90_k1"] = t["rot90_k2"] = t["rot90_neg_dims12"] = [](Fixture& f) {
    return ember::rot90(f["x"], f.attr_int("k"), f.attr_shape("dims"));
  };
  t["atleast_1d_0d"] = [](Fixture& f) { return ember::atleast_1d(f["x"]); };
  t["atleast_2d_1d"] = [](Fixture& f) { return ember::atleast_2d(f["x"]); };
  t["atleast_3d_1d"] = t["atleast_3d_2d"] = [](Fixture& f) { return ember::atleast_3d(f["x"]); };
  t["hstack_1d"] = t["hstack_2d"] = [](Fixture& f) { return ember::hstack({f["a"], f["b"]}); };
  t["vstack_1d"] = t["vstack_mixed"] = [](Fixture& f) { return ember::vstack({f["a"], f["b"]}); };
  t["dstack"] = [](Fixture& f) { return ember::dstack({f["a"], f["b"]}); };
  t["column_stack"] = [](Fixture& f) { return ember::column_stack({f["a"], f["b"]}); };
  t["tensor_split_sections"] = [](Fixture& f) {
    const int64_t dim = f.attr_int("dim");
    return joined_reversed(ember::tensor_split(f["x"], f.attr_int("sections"), dim), dim);
  };
  t["tensor_split_indices"] = [](Fixture& f) {
    const int64_t dim = f.attr_int("dim");
    return joined_reversed(ember::tensor_split(f["x"], int_list(f, "indices"), dim), dim);
  };
  t["hsplit_sections"] = [](Fixture& f) {
    return joined_reversed(ember::hsplit(f["x"], f.attr_int("sections")), 1);
  };
  t["hsplit_1d_indices"] = [](Fixture& f) {
    const Tensor& x = f["x"];
    std::vector<Tensor> parts = ember::hsplit(x, int_list(f, "indices"));
    return joined_reversed(parts, x.dim() == 1 ? 0 : 1);  // hsplit's dim
  };
  t["vsplit_indices"] = [](Fixture& f) {
    return joined_reversed(ember::vsplit(f["x"], int_list(f, "indices")), 0);
  };
  t["dsplit_sections"] = [](Fixture& f) {
    return joined_reversed(ember::dsplit(f["x"], f.attr_int("sections")), 2);
  };
  t["unflatten"] = [](Fixture& f) {
    return ember::unflatten(f["x"], f.attr_int("dim"), f.attr_shape("sizes"));
  };
  t["narrow_copy"] = [](Fixture& f) {
    return ember::narrow_copy(f["x"], f.attr_int("dim"), f.attr_int("start"), f.attr_int("length"));
  };
  t["broadcast_to"] = [](Fixture& f) { return ember::broadcast_to(f["x"], f.attr_shape("shape")); };
  t["broadcast_tensors"] = [](Fixture& f) {
    std::vector<Tensor> r = ember::broadcast_tensors({f["a"], f["b"]});
    return ember::stack({r[0], r[1].to(r[0].dtype())});  // the driver mixes dtypes too
  };
  t["as_strided"] = t["as_strided_overlap"] = [](Fixture& f) {
    std::optional<int64_t> offset;
    if (f.attrs.contains("offset")) offset = f.attr_int("offset");
    return ember::as_strided(f["x"], f.attr_shape("size"), f.attr_shape("stride"), offset);
  };
  t["diagonal_offset1"] = t["diagonal_3d_neg"] = [](Fixture& f) {
    return ember::diagonal(f["x"], f.attr_int("offset"), f.attr_int("dim1"), f.attr_int("dim2"));
  };
  t["diag_embed"] = t["diag_embed_offset_dims"] = [](Fixture& f) {
    return ember::diag_embed(f["x"], f.attr_int("offset"), f.attr_int("dim1"), f.attr_int("dim2"));
  };
  t["diagflat"] = [](Fixture& f) { return ember::diagflat(f["x"], f.attr_int("offset")); };
  t["trace"] = [](Fixture& f) { return ember::trace(f["x"]); };
  t["block_diag"] = [](Fixture& f) { return ember::block_diag({f["a"], f["b"], f["c"]}); };
  t["cartesian_prod"] = [](Fixture& f) { return ember::cartesian_prod({f["a"], f["b"]}); };
  t["combinations_r2"] = t["combinations_r3_replacement"] = [](Fixture& f) {
    return ember::combinations(f["x"], f.attr_int("r"), f.attr_bool("with_replacement"));
  };
}

void add_statistics(OpTable& t) {
  t["logcumsumexp_dim1"] = t["logcumsumexp_large"] = [](Fixture& f) {
    return ember::logcumsumexp(f["x"], f.attr_int("dim"));
  };
  t["mode_dim1"] = t["mode_ties_values"] = [](Fixture& f) {
    return ember::mode(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
  };
  t["mode_indices_keepdim"] = [](Fixture& f) {
    return ember::mode(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
  };
  t["aminmax_min"] = [](Fixture& f) { return ember::aminmax(f["x"]).min; };
  t["aminmax_dim1_max"] = [](Fixture& f) {
    return ember::aminmax(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).max;
  };
  t["var_mean_dim1"] = [](Fixture& f) {
    auto [v, m] = ember::var_mean(f["x"], f.attr_shape("dims"), f.attr_int("correction"),
                                  f.attr_bool("keepdim"));
    return ember::stack({v, m});
  };
  t["std_mean_all_c0"] = [](Fixture& f) {
    auto [s, m] = ember::std_mean(f["x"], {}, f.attr_int("correction"));
    return ember::stack({s, m});
  };
  for (const char* name : {"quantile_linear", "quantile_lower", "quantile_higher",
                           "quantile_nearest", "quantile_midpoint"}) {
    t[name] = [](Fixture& f) {
      return ember::quantile(f["x"], f.attr_double("q"), f.attr_int("dim"), f.attr_bool("keepdim"),
                             f.attr_string("interpolation"));
    };
  }
  t["quantile_all_keepdim"] = [](Fixture& f) {
    return ember::quantile(f["x"], f.attr_double("q"), std::nullopt, f.attr_bool("keepdim"));
  };
  t["quantile_qvec_dim0"] = [](Fixture& f) {
    const auto qs = f.attr("qs").get<std::vector<double>>();
    const Tensor& x = f["x"];  // q in x's dtype (an undefined x: the op's error, not ours)
    Tensor q = ember::from_vector<double>(qs, Shape{static_cast<int64_t>(qs.size())})
                   .to(x.defined() ? x.dtype() : ember::DType::f32);
    return ember::quantile(f["x"], q, f.attr_int("dim"), f.attr_bool("keepdim"));
  };
  t["nanquantile_dim1"] = t["nanquantile_nearest"] = [](Fixture& f) {
    return ember::nanquantile(f["x"], f.attr_double("q"), f.attr_int("dim"), f.attr_bool("keepdim"),
                              f.attr_string("interpolation"));
  };
  t["histc"] = t["histc_own_range"] = [](Fixture& f) {
    return ember::histc(f["x"], f.attr_int("bins"), f.attr_double("min"), f.attr_double("max"));
  };
  t["bincount"] = t["bincount_minlength"] = [](Fixture& f) {
    return ember::bincount(f["x"], Tensor(), f.attr_int("minlength"));
  };
  t["unique_values"] = t["unique_dim0_values"] = [](Fixture& f) {
    return ember::unique(f["x"], optional_dim(f)).values;
  };
  t["unique_inverse"] = t["unique_dim1_inverse"] = [](Fixture& f) {
    return ember::unique(f["x"], optional_dim(f)).inverse;
  };
  t["unique_counts"] = [](Fixture& f) { return ember::unique(f["x"]).counts; };
  t["unique_consecutive_values"] = [](Fixture& f) {
    return ember::unique_consecutive(f["x"]).values;
  };
  t["unique_consecutive_counts"] = [](Fixture& f) {
    return ember::unique_consecutive(f["x"]).counts;
  };
  t["unique_consecutive_dim0_inverse"] = [](Fixture& f) {
    return ember::unique_consecutive(f["x"], optional_dim(f)).inverse;
  };
  t["searchsorted_left"] = t["searchsorted_right_2d"] = t["searchsorted_sorter"] = [](Fixture& f) {
    return ember::searchsorted(
        f["sorted"], f["values"],
        {.right = f.attr_bool("right"), .sorter = f.has("sorter") ? f["sorter"] : Tensor()});
  };
  t["bucketize"] = t["bucketize_right"] = [](Fixture& f) {
    return ember::bucketize(f["x"], f["boundaries"], false, f.attr_bool("right"));
  };
  t["trapezoid_dx"] = [](Fixture& f) {
    return ember::trapezoid(f["x"], f.attr_double("dx"), f.attr_int("dim"));
  };
  t["trapezoid_x"] = [](Fixture& f) { return ember::trapezoid(f["y"], f["x"], f.attr_int("dim")); };
  t["cumulative_trapezoid_dx"] = [](Fixture& f) {
    return ember::cumulative_trapezoid(f["x"], f.attr_double("dx"), f.attr_int("dim"));
  };
  t["cumulative_trapezoid_x"] = [](Fixture& f) {
    return ember::cumulative_trapezoid(f["y"], f["x"], f.attr_int("dim"));
  };
}

void add_indexing(OpTable& t) {
  t["take"] = [](Fixture& f) { return ember::take(f["x"], f["index"]); };
  t["take_along_dim_dim1"] = t["take_along_dim_bcast"] = t["take_along_dim_flat"] = [](Fixture& f) {
    return ember::take_along_dim(f["x"], f["indices"], optional_dim(f));
  };
  t["put"] = t["put_accumulate"] = [](Fixture& f) {
    return ember::put(f["x"], f["index"], f["source"], f.attr_bool("accumulate"));
  };
  t["masked_scatter"] = t["masked_scatter_bcast"] = [](Fixture& f) {
    return ember::masked_scatter(f["x"], f["mask"], f["source"]);
  };
  for (const char* name :
       {"index_reduce_prod_self", "index_reduce_mean_noself", "index_reduce_mean_self",
        "index_reduce_amax_self", "index_reduce_amin_noself"}) {
    t[name] = [](Fixture& f) {
      return ember::index_reduce(f["x"], f.attr_int("dim"), f["index"], f["source"],
                                 f.attr_string("reduce"), f.attr_bool("include_self"));
    };
  }
}

}  // namespace

void add_shape_cases(OpTable& t) {
  add_shape_joins(t);
  add_statistics(t);
  add_indexing(t);
}

}  // namespace ember_test
