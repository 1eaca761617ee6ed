// tests/test_op_cases_nn.cpp — the op test driver's cases for issue 32's nn functional ops and
// losses (see tests/op_cases.hpp); their PyTorch references are tests/fixture_cases_nn.py, written
// to tests/data/op_fixtures_nn.json by `/usr/bin/python3 tests/gen_fixtures.py nn`.
#include "ember/ops_nn.hpp"
#include "op_cases.hpp"

namespace ember_test {

using ember::Size2d;
using ember::Size3d;
using ember::Tensor;

void add_nn_cases(OpTable& t) {
  // ---- losses
  t["multilabel_margin_loss"] = t["multilabel_margin_loss_1d_none"] = [](Fixture& f) {
    return ember::multilabel_margin_loss(f["input"], f["target"], reduction_of(f));
  };
  t["multilabel_soft_margin_loss"] = t["multilabel_soft_margin_loss_weight"] = [](Fixture& f) {
    return ember::multilabel_soft_margin_loss(f["input"], f["target"], optional_tensor(f, "weight"),
                                              reduction_of(f));
  };
  t["multi_margin_loss"] = t["multi_margin_loss_p2_weight"] = [](Fixture& f) {
    return ember::multi_margin_loss(f["input"], f["target"], f.attr_int("p"),
                                    f.attr_double("margin"), optional_tensor(f, "weight"),
                                    reduction_of(f));
  };
  t["hinge_embedding_loss"] = t["hinge_embedding_loss_none"] = [](Fixture& f) {
    return ember::hinge_embedding_loss(f["input"], f["target"], f.attr_double("margin"),
                                       reduction_of(f));
  };
  t["soft_margin_loss"] = t["soft_margin_loss_sum"] = [](Fixture& f) {
    return ember::soft_margin_loss(f["input"], f["target"], reduction_of(f));
  };
  t["gaussian_nll_loss"] = t["gaussian_nll_loss_full_row_var"] =
      t["gaussian_nll_loss_last_dim_one"] = [](Fixture& f) {
        return ember::gaussian_nll_loss(f["input"], f["target"], f["var"], f.attr_bool("full"),
                                        1e-6, reduction_of(f));
      };
  t["triplet_margin_with_distance_loss"] =
      t["triplet_margin_with_distance_loss_cosine_swap"] = [](Fixture& f) {
        ember::DistanceFunction d = nullptr;
        if (f.attr_bool("cosine"))
          d = [](const Tensor& a, const Tensor& b) { return 1.0 - ember::cosine_similarity(a, b); };
        return ember::triplet_margin_with_distance_loss(f["anchor"], f["positive"], f["negative"],
                                                        d, f.attr_double("margin"),
                                                        f.attr_bool("swap"), reduction_of(f));
      };
  // ---- distances
  t["cosine_similarity"] = t["cosine_similarity_bcast_last"] = [](Fixture& f) {
    return ember::cosine_similarity(f["a"], f["b"], f.attr_int("dim"));
  };
  t["pairwise_distance"] = t["pairwise_distance_p1_keepdim"] =
      t["pairwise_distance_p3"] = [](Fixture& f) {
        return ember::pairwise_distance(f["a"], f["b"], f.attr_double("p"), 1e-6,
                                        f.attr_bool("keepdim"));
      };
  t["pdist"] = t["pdist_p1"] = [](Fixture& f) { return ember::pdist(f["x"], f.attr_double("p")); };
  // ---- pools
  t["max_pool3d"] = [](Fixture& f) { return ember::max_pool3d(f["x"], 3, Size3d(2), 1); };
  t["max_pool3d_dilation_ceil"] = [](Fixture& f) {
    return ember::max_pool3d(f["x"], 2, Size3d(2), 0, Size3d(1, 2, 1), true);
  };
  t["max_pool3d_unbatched"] = [](Fixture& f) { return ember::max_pool3d(f["x"], Size3d(2, 2, 1)); };
  t["max_pool3d_indices"] = [](Fixture& f) {
    return ember::max_pool3d_with_indices(f["x"], 3, Size3d(2), 1).second;
  };
  t["avg_pool3d"] = [](Fixture& f) { return ember::avg_pool3d(f["x"], 3, Size3d(2), 1); };
  t["avg_pool3d_exclude_pad_ceil"] = [](Fixture& f) {
    return ember::avg_pool3d(f["x"], 3, Size3d(2), 1, true, false);
  };
  t["avg_pool3d_divisor"] = [](Fixture& f) {
    return ember::avg_pool3d(f["x"], 2, std::nullopt, 0, false, true, 5);
  };
  t["adaptive_avg_pool3d"] = [](Fixture& f) {
    return ember::adaptive_avg_pool3d(f["x"], Size3d(3, 2, 3));
  };
  t["adaptive_avg_pool3d_global"] = [](Fixture& f) {
    return ember::adaptive_avg_pool3d(f["x"], 1);
  };
  t["adaptive_max_pool3d"] = [](Fixture& f) {
    return ember::adaptive_max_pool3d(f["x"], Size3d(3, 2, 3));
  };
  t["adaptive_max_pool3d_indices"] = [](Fixture& f) {
    return ember::adaptive_max_pool3d_with_indices(f["x"], Size3d(3, 2, 3)).second;
  };
  t["max_unpool1d"] = [](Fixture& f) { return ember::max_unpool1d(f["x"], f["indices"], 2); };
  t["max_unpool2d_output_size"] = [](Fixture& f) {
    return ember::max_unpool2d(f["x"], f["indices"], 2, std::nullopt, 0, Size2d(5, 7));
  };
  t["max_unpool3d"] = [](Fixture& f) {
    return ember::max_unpool3d(f["x"], f["indices"], 3, Size3d(3), 1, Size3d(4, 4, 5));
  };
  t["lp_pool1d"] = [](Fixture& f) { return ember::lp_pool1d(f["x"], 2.0, 3, 2); };
  t["lp_pool2d_ceil"] = [](Fixture& f) {
    return ember::lp_pool2d(f["x"], 3.0, Size2d(2, 3), Size2d(2), true);
  };
  t["lp_pool3d"] = [](Fixture& f) { return ember::lp_pool3d(f["x"], 1.5, 2, Size3d(2), true); };
  t["fractional_max_pool2d"] = [](Fixture& f) {
    return ember::fractional_max_pool2d(
               f["x"], Size2d(2, 3),
               {.output_size = std::vector<int64_t>{4, 3}, .random_samples = f["samples"]})
        .first;
  };
  t["fractional_max_pool2d_ratio_indices"] = [](Fixture& f) {
    return ember::fractional_max_pool2d(
               f["x"], 2,
               {.output_ratio = std::vector<double>{0.5, 0.6}, .random_samples = f["samples"]})
        .second;
  };
  t["fractional_max_pool3d"] = [](Fixture& f) {
    return ember::fractional_max_pool3d(
               f["x"], Size3d(2, 3, 2),
               {.output_size = std::vector<int64_t>{3, 2, 2}, .random_samples = f["samples"]})
        .first;
  };
  t["conv_transpose3d"] = [](Fixture& f) {
    return ember::conv_transpose3d(f["x"], f["weight"], f["bias"], 2, 1, 1);
  };
  t["conv_transpose3d_groups_dilation"] = [](Fixture& f) {
    return ember::conv_transpose3d(f["x"], f["weight"], Tensor(), Size3d(1, 2, 1), Size3d(0, 1, 0),
                                   0, 2, Size3d(2, 1, 1));
  };
  t["conv_transpose3d_unbatched"] = [](Fixture& f) {
    return ember::conv_transpose3d(f["x"], f["weight"], Tensor(), Size3d(2, 1, 1));
  };
  t["interpolate_bicubic"] = [](Fixture& f) {
    return ember::interpolate(f["x"], {.size = {7, 3}, .mode = "bicubic", .align_corners = false});
  };
  t["interpolate_bicubic_align"] = [](Fixture& f) {
    return ember::interpolate(f["x"], {.size = {5, 6}, .mode = "bicubic", .align_corners = true});
  };
  t["interpolate_bicubic_scale"] = [](Fixture& f) {
    return ember::interpolate(f["x"], {.scale_factor = {1.5, 2.25}, .mode = "bicubic"});
  };
  // ---- channels and grids
  t["channel_shuffle"] = t["channel_shuffle_4d"] = [](Fixture& f) {
    return ember::channel_shuffle(f["x"], f.attr_int("groups"));
  };
  t["local_response_norm"] = t["local_response_norm_4d"] = [](Fixture& f) {
    return ember::local_response_norm(f["x"], f.attr_int("size"), f.attr_double("alpha"),
                                      f.attr_double("beta"), f.attr_double("k"));
  };
  t["grid_sample"] = t["grid_sample_border_align"] = t["grid_sample_reflection"] =
      t["grid_sample_reflection_align"] = t["grid_sample_3d"] = t["grid_sample_nearest"] =
          t["grid_sample_bicubic"] = t["grid_sample_bicubic_border_align"] =
              t["grid_sample_bicubic_reflection"] = [](Fixture& f) {
                return ember::grid_sample(f["input"], f["grid"], f.attr_string("mode"),
                                          f.attr_string("padding_mode"),
                                          f.attr_bool("align_corners"));
              };
  t["affine_grid"] = t["affine_grid_3d_align"] = [](Fixture& f) {
    return ember::affine_grid(f["theta"], f.attr_shape("size"), f.attr_bool("align_corners"));
  };
}

}  // namespace ember_test
