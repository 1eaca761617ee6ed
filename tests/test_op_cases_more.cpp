// tests/test_op_cases_more.cpp — the op test driver's cases for issue 16's vocabulary
// (see tests/op_cases.hpp).
#include <optional>
#include <string>
#include <vector>

#include "op_cases.hpp"

namespace ember_test {

using ember::Reduction;
using ember::Shape;
using ember::Tensor;

void add_vocabulary_cases(OpTable& t) {
  // ---- decompositions and einsum
  t["inv"] = t["inv_batched"] = [](Fixture& f) { return ember::inv(f["a"]); };
  t["det"] = t["det_batched"] = t["det_singular"] = [](Fixture& f) { return ember::det(f["a"]); };
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
      for (int i = 0; f.has("x" + std::to_string(i)); ++i) xs.push_back(f["x" + std::to_string(i)]);
      return ember::einsum(f.attr_string("equation"), xs);
    };
  }
  // ---- sorting, selection and scans
  const auto flag = [](Fixture& f, const char* key) {
    return f.attrs.contains(key) && f.attr_bool(key);
  };
  t["sort_dim1"] = t["sort_desc_dim0"] = [flag](Fixture& f) {
    return ember::sort(f["x"], f.attr_int("dim"), flag(f, "descending")).values;
  };
  t["sort_indices_3d"] = [](Fixture& f) { return ember::sort(f["x"], f.attr_int("dim")).indices; };
  t["argsort_last"] = t["argsort_desc"] = [flag](Fixture& f) {
    return ember::argsort(f["x"], f.attr_int("dim"), flag(f, "descending"));
  };
  t["topk_k2"] = t["topk_smallest_dim0"] = [](Fixture& f) {
    return ember::topk(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("largest")).values;
  };
  t["topk_indices"] = [](Fixture& f) {
    return ember::topk(f["x"], f.attr_int("k"), f.attr_int("dim"), f.attr_bool("largest")).indices;
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
  t["cummax_indices"] = [](Fixture& f) { return ember::cummax(f["x"], f.attr_int("dim")).indices; };
  t["cummin_dim0"] = [](Fixture& f) { return ember::cummin(f["x"], f.attr_int("dim")).values; };
  t["cummin_indices"] = [](Fixture& f) { return ember::cummin(f["x"], f.attr_int("dim")).indices; };
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
    return ember::nll_loss(f["log_probs"], f["target"], reduction_of(f), f.attr_int("ignore_index"),
                           f["weight"]);
  };
  t["bce_with_logits_weight"] = [](Fixture& f) {
    return ember::bce_with_logits(f["logits"], f["target"], reduction_of(f), Tensor(), f["weight"]);
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
  // ---- the fused LSTM recurrence
  t["lstm_recurrence"] = t["lstm_recurrence_reverse"] = t["lstm_recurrence_masked"] =
      t["lstm_recurrence_masked_reverse"] = [](Fixture& f) {
        return ember::lstm_recurrence(f["gx"], f["h0"], f["c0"], f["w_hh"],
                                      optional_tensor(f, "mask"), f.attr_bool("reverse"));
      };
  // ---- attention (the op's own cases: tests/test_sdpa.cpp)
  t["scaled_dot_product_attention"] = [](Fixture& f) {
    return ember::scaled_dot_product_attention(f["q"], f["k"], f["v"], {.attn_mask = f["mask"]});
  };
  t["attention_with_kv_cache"] = [](Fixture& f) {
    ember::Device device = ember::Device::cpu();  // any input's: the driver empties each in turn
    for (const char* key : {"q", "k_cache", "v_cache", "k", "v", "mask"})
      if (f[key].defined()) device = f[key].device();
    const Tensor lengths =
        ember::from_vector(f.attr("seqlens").get<std::vector<int64_t>>(), {2}, {.device = device});
    return ember::attention_with_kv_cache(f["q"], f["k_cache"], f["v_cache"], f["k"], f["v"],
                                          lengths, {.key_padding_mask = f["mask"]});
  };
  t["rms_norm_weight"] = t["rms_norm_plain_2dims"] = [](Fixture& f) {
    const std::optional<double> eps =
        f.attrs.contains("eps") ? std::optional<double>(f.attr_double("eps")) : std::nullopt;
    return ember::rms_norm(f["x"], f.attr_shape("normalized_shape"), optional_tensor(f, "weight"),
                           eps);
  };
  t["rotary_embedding"] = t["rotary_embedding_interleaved"] = [](Fixture& f) {
    const bool interleaved = f.attrs.contains("interleaved") && f.attr_bool("interleaved");
    return ember::rotary_embedding(f["x"], f["cos"], f["sin"], interleaved);
  };
  t["rotary_embedding_strided"] = [](Fixture& f) {  // a head-transposed view, read in place
    const Tensor x = f["x"];  // left undefined for the errors tier: rotary_embedding refuses it
    return ember::rotary_embedding(x.defined() ? x.transpose(1, 2) : x, f["cos"], f["sin"]);
  };
  t["scaled_dot_product_attention_causal"] = [](Fixture& f) {
    return ember::scaled_dot_product_attention(f["q"], f["k"], f["v"], {.is_causal = true});
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
  // ---- convolution, pooling and upsampling (issue 16, second part)
  t["conv1d_pad_stride"] = [](Fixture& f) {
    return ember::conv1d(f["x"], f["weight"], f["bias"], 2, 1);
  };
  t["conv1d_groups_dilation"] = [](Fixture& f) {
    return ember::conv1d(f["x"], f["weight"], Tensor(), 1, 0, 2, 2);
  };
  t["conv1d_same"] = [](Fixture& f) {
    return ember::conv1d(f["x"], f["weight"], f["bias"], 1, ember::ConvPadding::same);
  };
  t["conv3d_pad_stride"] = [](Fixture& f) {
    return ember::conv3d(f["x"], f["weight"], f["bias"], {1, 2, 2}, {1, 1, 0});
  };
  t["conv3d_groups_dilation"] = [](Fixture& f) {
    return ember::conv3d(f["x"], f["weight"], Tensor(), 1, 0, {2, 1, 1}, 2);
  };
  t["conv3d_same"] = [](Fixture& f) {
    return ember::conv3d(f["x"], f["weight"], Tensor(), 1, ember::ConvPadding::same);
  };
  t["conv_transpose2d_stride2"] = [](Fixture& f) {
    return ember::conv_transpose2d(f["x"], f["weight"], f["bias"], 2, 1, 1);
  };
  t["conv_transpose2d_groups_dilation"] = [](Fixture& f) {
    return ember::conv_transpose2d(f["x"], f["weight"], Tensor(), {1, 2}, 0, 1, 2, 2);
  };
  t["conv_transpose1d_stride"] = [](Fixture& f) {
    return ember::conv_transpose1d(f["x"], f["weight"], f["bias"], 2, 1, 1);
  };
  t["conv_transpose1d_groups_dilation"] = [](Fixture& f) {
    return ember::conv_transpose1d(f["x"], f["weight"], Tensor(), 1, 0, 0, 2, 2);
  };
  t["max_pool1d"] = [](Fixture& f) { return ember::max_pool1d(f["x"], 3, 2, 1); };
  t["max_pool1d_dilation_ceil"] = [](Fixture& f) {
    return ember::max_pool1d(f["x"], 2, 3, 0, 2, true);
  };
  t["max_pool1d_indices"] = [](Fixture& f) {
    return ember::max_pool1d_with_indices(f["x"], 3, 2, 1).second;
  };
  t["avg_pool1d"] = [](Fixture& f) { return ember::avg_pool1d(f["x"], 3, 2, 1); };
  t["avg_pool1d_exclude_pad_ceil"] = [](Fixture& f) {
    return ember::avg_pool1d(f["x"], 3, 2, 1, true, false);
  };
  t["adaptive_avg_pool1d"] = [](Fixture& f) { return ember::adaptive_avg_pool1d(f["x"], 4); };
  t["adaptive_avg_pool2d"] = [](Fixture& f) { return ember::adaptive_avg_pool2d(f["x"], {3, 2}); };
  t["adaptive_avg_pool2d_global"] = [](Fixture& f) {
    return ember::adaptive_avg_pool2d(f["x"], 1);
  };
  t["adaptive_avg_pool2d_grow"] = [](Fixture& f) {
    return ember::adaptive_avg_pool2d(f["x"], {5, 6});
  };
  t["adaptive_max_pool1d"] = [](Fixture& f) { return ember::adaptive_max_pool1d(f["x"], 4); };
  t["adaptive_max_pool1d_indices"] = [](Fixture& f) {
    return ember::adaptive_max_pool1d_with_indices(f["x"], 4).second;
  };
  t["adaptive_max_pool2d"] = [](Fixture& f) { return ember::adaptive_max_pool2d(f["x"], {3, 2}); };
  t["adaptive_max_pool2d_indices"] = [](Fixture& f) {
    return ember::adaptive_max_pool2d_with_indices(f["x"], {3, 2}).second;
  };
  t["adaptive_max_pool2d_grow"] = [](Fixture& f) {
    return ember::adaptive_max_pool2d(f["x"], {5, 6});
  };
  for (const char* name :
       {"interpolate_nearest_scale", "interpolate_nearest_size", "interpolate_nearest_exact",
        "interpolate_nearest_1d", "interpolate_nearest_same_size_scale", "interpolate_bilinear",
        "interpolate_bilinear_align", "interpolate_bilinear_scale", "interpolate_bilinear_down",
        "interpolate_linear", "interpolate_trilinear"}) {
    t[name] = [](Fixture& f) {
      ember::InterpolateOptions o;
      if (f.attrs.contains("size")) o.size = f.attr_shape("size");
      if (f.attrs.contains("scale_factor"))
        o.scale_factor = f.attr("scale_factor").get<std::vector<double>>();
      o.mode = f.attr_string("mode");
      if (f.attrs.contains("align_corners")) o.align_corners = f.attr_bool("align_corners");
      return ember::interpolate(f["x"], o);
    };
  }
  t["im2col"] = [](Fixture& f) { return ember::im2col(f["x"], {2, 3}, 1, 1, {1, 2}); };
  t["im2col_dilation"] = [](Fixture& f) { return ember::im2col(f["x"], 2, 2, 0, 2); };
  t["col2im"] = [](Fixture& f) { return ember::col2im(f["x"], {4, 5}, {2, 3}, 1, 1, {1, 2}); };
  t["col2im_dilation"] = [](Fixture& f) { return ember::col2im(f["x"], {5, 5}, 2, 2, 0, 2); };

  // ---- type promotion (the *_mix_* cases: operands of different dtypes, stored in their
  // dtypes) and integer or bool inputs (*_int, *_bool)
  for (const char* name : {"add_mix_f32_f64", "add_mix_i32_0d_i64", "add_mix_u8_i32",
                           "add_mix_i32_i64", "add_mix_bool_f32", "add_mix_f16_bf16"})
    t[name] = [](Fixture& f) { return ember::add(f["a"], f["b"]); };
  t["sub_mix_0d_f64"] = [](Fixture& f) { return ember::sub(f["a"], f["b"]); };
  for (const char* name : {"mul_mix_i32_f32", "mul_mix_i32_0d_f64"})
    t[name] = [](Fixture& f) { return ember::mul(f["a"], f["b"]); };
  for (const char* name : {"div_mix_i32_i64", "div_mix_i64_f64"})
    t[name] = [](Fixture& f) { return ember::div(f["a"], f["b"]); };
  t["pow_mix_f32_i64"] = [](Fixture& f) { return ember::pow(f["a"], f["b"]); };
  t["maximum_mix_i32_f32"] = [](Fixture& f) { return ember::maximum(f["a"], f["b"]); };
  t["minimum_mix_f32_f64"] = [](Fixture& f) { return ember::minimum(f["a"], f["b"]); };
  t["atan2_mix_f32_f64"] = [](Fixture& f) { return ember::atan2(f["a"], f["b"]); };
  t["fmod_mix_i64_f32"] = [](Fixture& f) { return ember::fmod(f["a"], f["b"]); };
  t["remainder_mix_f32_0d_f64"] = [](Fixture& f) { return ember::remainder(f["a"], f["b"]); };
  t["cmp_eq_mix_i32_f32"] = [](Fixture& f) { return ember::eq(f["a"], f["b"]); };
  t["cmp_lt_mix_i32_f32"] = [](Fixture& f) { return ember::lt(f["a"], f["b"]); };
  t["cmp_ge_mix_i64_0d_f64"] = [](Fixture& f) { return ember::ge(f["a"], f["b"]); };
  t["cmp_ne_mix_bool_i32"] = [](Fixture& f) { return ember::ne(f["a"], f["b"]); };
  t["logical_and_mix_f32_i64"] = [](Fixture& f) { return ember::logical_and(f["a"], f["b"]); };
  t["logical_or_mix_bool_f64"] = [](Fixture& f) { return ember::logical_or(f["a"], f["b"]); };
  t["logical_xor_mix_u8_f32"] = [](Fixture& f) { return ember::logical_xor(f["a"], f["b"]); };
  for (const char* name : {"where_mix_i32_f32", "where_mix_f32_f64"})
    t[name] = [](Fixture& f) { return ember::where(f["cond"], f["a"], f["b"]); };
  for (const char* name : {"clamp_mix_tensor_bounds", "clamp_int_tensor_bounds"})
    t[name] = [](Fixture& f) { return ember::clamp(f["x"], f["lo"], f["hi"]); };
  t["addcmul_mix"] = [](Fixture& f) {
    return ember::addcmul(f["x"], f["t1"], f["t2"], f.attr_double("value"));
  };
  t["addcdiv_mix"] = [](Fixture& f) {
    return ember::addcdiv(f["x"], f["t1"], f["t2"], f.attr_double("value"));
  };
  t["abs_int"] = [](Fixture& f) { return ember::abs(f["x"]); };
  t["sign_int"] = [](Fixture& f) { return ember::sign(f["x"]); };
  for (const char* name : {"clamp_int", "clamp_int_frac"})
    t[name] = [](Fixture& f) {
      return ember::clamp(f["x"], f.attr_double("lo"), f.attr_double("hi"));
    };
  t["clamp_min_int"] = [](Fixture& f) { return ember::clamp_min(f["x"], f.attr_double("min")); };
  t["clamp_max_int"] = [](Fixture& f) { return ember::clamp_max(f["x"], f.attr_double("max")); };
  t["max_int_dims"] = [](Fixture& f) {
    return ember::amax(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  t["min_int_dim1_keepdim"] = [](Fixture& f) {
    return ember::amin(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  t["max_int_all"] = [](Fixture& f) { return ember::max(f["x"]); };
  t["argmax_int"] = [](Fixture& f) {
    return ember::argmax(f["x"], f.attr_int("dim"), f.attr_bool("keepdim"));
  };
  t["argmin_int"] = [](Fixture& f) {
    return ember::argmin(f["x"], f.attr_int("dim"), f.attr_bool("keepdim"));
  };
  t["max_with_indices_int"] = [](Fixture& f) {
    return ember::max(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
  };
  t["max_with_indices_int_indices"] = [](Fixture& f) {
    return ember::max(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
  };
  t["min_with_indices_int"] = [](Fixture& f) {
    return ember::min(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).values;
  };
  t["min_with_indices_int_indices"] = [](Fixture& f) {
    return ember::min(f["x"], f.attr_int("dim"), f.attr_bool("keepdim")).indices;
  };
  t["isnan_int"] = [](Fixture& f) { return ember::isnan(f["x"]); };
  t["isinf_int"] = [](Fixture& f) { return ember::isinf(f["x"]); };
  for (const char* name : {"isfinite_int", "isfinite_bool"})
    t[name] = [](Fixture& f) { return ember::isfinite(f["x"]); };
  t["sum_int32"] = [](Fixture& f) { return ember::sum(f["x"]); };
  t["sum_bool_dim1"] = [](Fixture& f) {
    return ember::sum(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  t["nansum_int"] = [](Fixture& f) {
    return ember::nansum(f["x"], f.attr_shape("dims"), f.attr_bool("keepdim"));
  };
  for (const char* name : {"cumsum_int", "cumsum_bool"})
    t[name] = [](Fixture& f) { return ember::cumsum(f["x"], f.attr_int("dim")); };
}

}  // namespace ember_test
