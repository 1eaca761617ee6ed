// ember/ops_nn.hpp — issue 32's nn functional ops (torch.nn.functional's names and semantics):
// the margin and likelihood losses ember lacked, cosine similarity and pairwise distances, the
// 3-D, unpooling and power-average pools, channel shuffle, local response normalisation and
// affine sampling grids. Every op here is a composite of ember's primitives, so its gradient
// comes from theirs; the catalogue rows are in include/ember/catalogue.hpp (group "nn").
//
//   Tensor l = multi_margin_loss(scores, labels);                 // scores [N, C], labels [N]
//   Tensor s = cosine_similarity(a, b, 1);                        // [N, D] x2 -> [N]
//   auto [y, idx] = max_pool3d_with_indices(x, 2);                // x [N, C, D, H, W]
//   Tensor back = max_unpool3d(y, idx, 2);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ops.hpp"
#include "ember/tensor.hpp"

namespace ember {

// ---- losses (src/ops/loss_margin.cpp); reduction none / mean / sum as PyTorch ----

/// Multi-class multi-label hinge loss: input [N, C] (or [C]), target the same shape (i64): the
/// class indices of each row, ended by the first -1. Per row Σ_j Σ_{i not a target}
/// max(0, 1 - (x[y_j] - x[i])) / C.   multilabel_margin_loss(x, labels)
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              Reduction reduction = Reduction::mean);
/// One-against-all logistic loss: per row -Σ_c w_c·(t_c·logσ(x_c) + (1 - t_c)·logσ(-x_c)) / C;
/// target (0/1 floats) of the input's shape [N, C], weight [C] optional.
///   multilabel_soft_margin_loss(x, t)
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const Tensor& weight = Tensor(),
                                   Reduction reduction = Reduction::mean);
/// Multi-class hinge loss: per row Σ_{i != y} w_y·max(0, margin - x[y] + x[i])^p / C, p 1 or
/// 2; input [N, C] (or [C]), target [N] (i64), weight [C] optional.  multi_margin_loss(x, y, 2)
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1,
                         double margin = 1.0, const Tensor& weight = Tensor(),
                         Reduction reduction = Reduction::mean);
/// x where target is 1, max(0, margin - x) where it is -1 (PyTorch's where-form: other target
/// values get both terms).  hinge_embedding_loss(distances, y, 1.0)
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::mean);
/// Two-class logistic loss log(1 + exp(-y·x)), y = ±1 (computed as softplus(-y·x)).
///   soft_margin_loss(x, y)
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        Reduction reduction = Reduction::mean);
/// Gaussian negative log-likelihood 0.5·(log(max(var, eps)) + (input - target)² /
/// max(var, eps)) (+ 0.5·log(2π) when full). var has the input's shape, or it without the last
/// dim, or with a last dim of 1 (one variance per row); var must be >= 0. The clamp passes the
/// gradient through unchanged, as PyTorch's.   gaussian_nll_loss(mu, y, var)
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         bool full = false, double eps = 1e-6,
                         Reduction reduction = Reduction::mean);
/// A distance between two batches of rows (triplet_margin_with_distance_loss).
using DistanceFunction = std::function<Tensor(const Tensor&, const Tensor&)>;
/// max(margin + d(a, p) - d(a, n), 0) with any distance d (default pairwise_distance); swap
/// uses min(d(a, n), d(p, n)). margin must be > 0.
///   triplet_margin_with_distance_loss(a, p, n, [](auto& x, auto& y) {
///     return 1.0 - cosine_similarity(x, y); });
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         const DistanceFunction& distance_function = nullptr,
                                         double margin = 1.0, bool swap = false,
                                         Reduction reduction = Reduction::mean);

// ---- distances (src/ops/loss_margin.cpp) ----

/// x1·x2 / (max(‖x1‖, eps)·max(‖x2‖, eps)) along `dim` (torch 2.x's form: each side divided
/// by its clamped norm); x1 and x2 broadcast.  cosine_similarity(a, b, -1)
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
/// ‖x1 - x2 + eps‖_p over the last dim (broadcasting), as F.pairwise_distance.
///   pairwise_distance(a, b)   // [N, D] x2 -> [N]
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);
/// The p-norm distances between the rows of input [N, M], pairs i < j in row-major order:
/// N·(N - 1)/2 values, as torch.pdist (p >= 0).  pdist(points)
Tensor pdist(const Tensor& input, double p = 2.0);

// ---- pools (src/ops/pool3d.cpp): NC + spatial dims, or unbatched without N ----

/// Max over each window of x [N, C, D, H, W] (padding counts as -inf), as F.max_pool3d;
/// stride defaults to the kernel; padding at most half the kernel.  max_pool3d(x, 2)
Tensor max_pool3d(const Tensor& x, Size3d kernel, std::optional<Size3d> stride = std::nullopt,
                  Size3d padding = 0, Size3d dilation = 1, bool ceil_mode = false);
/// max_pool3d and each window's argmax (i64, d·H·W + h·W + w within the volume, as PyTorch).
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, Size3d kernel,
                                                  std::optional<Size3d> stride = std::nullopt,
                                                  Size3d padding = 0, Size3d dilation = 1,
                                                  bool ceil_mode = false);
/// Mean over each window as F.avg_pool3d; count_include_pad counts the zero padding in the
/// divisor, divisor_override replaces it.  avg_pool3d(x, 3, 2, 1, false, false)
Tensor avg_pool3d(const Tensor& x, Size3d kernel, std::optional<Size3d> stride = std::nullopt,
                  Size3d padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/// Adaptive 3-D pools (cell i covers [floor(i·in/out), ceil((i+1)·in/out)) along each dim).
///   adaptive_avg_pool3d(x, 1)   // global average
Tensor adaptive_avg_pool3d(const Tensor& x, Size3d output_size);
Tensor adaptive_max_pool3d(const Tensor& x, Size3d output_size);
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, Size3d output_size);
/// The partial inverses of the max pools: each value of x written at its index (from the
/// *_with_indices pools) in a zero output whose spatial size is output_size, or by default
/// (in - 1)·stride - 2·padding + kernel per dim.  max_unpool2d(y, idx, 2)
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, int64_t kernel,
                    std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                    std::optional<int64_t> output_size = std::nullopt);
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, Size2d kernel,
                    std::optional<Size2d> stride = std::nullopt, Size2d padding = 0,
                    std::optional<Size2d> output_size = std::nullopt);
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, Size3d kernel,
                    std::optional<Size3d> stride = std::nullopt, Size3d padding = 0,
                    std::optional<Size3d> output_size = std::nullopt);
/// Power-average pools (Σ_window x^p)^(1/p) as F.lp_pool1d/2d/3d (no padding; a ceil_mode
/// window cut short by the edge is scaled to the full kernel, as PyTorch's avg_pool form).
///   lp_pool2d(x, 2.0, 3)
Tensor lp_pool1d(const Tensor& x, double norm_type, int64_t kernel,
                 std::optional<int64_t> stride = std::nullopt, bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, Size2d kernel,
                 std::optional<Size2d> stride = std::nullopt, bool ceil_mode = false);
Tensor lp_pool3d(const Tensor& x, double norm_type, Size3d kernel,
                 std::optional<Size3d> stride = std::nullopt, bool ceil_mode = false);

/// Fractional max pooling (Graham, 2014) as F.fractional_max_pool2d / 3d: each plane's windows
/// of `kernel` start at pseudo-random, increasing offsets that cover the input in exactly
/// output_size steps (or input·output_ratio, rounded down). The offsets come from
/// random_samples ([N, C, 2] / [N, C, 3] in [0, 1), PyTorch's _random_samples: per plane,
/// width first for 2-D, depth first for 3-D), or are drawn from ember's generator when it is
/// undefined. Returns the values and their indices (as max_pool2d/3d's).
///   auto [y, idx] = fractional_max_pool2d(x, 2, Size2d(5, 5));
struct FractionalMaxPoolOptions {
  std::optional<std::vector<int64_t>> output_size = std::nullopt;  // 2 or 3 sizes
  std::optional<std::vector<double>> output_ratio = std::nullopt;  // each in (0, 1)
  Tensor random_samples = Tensor();
};
std::pair<Tensor, Tensor> fractional_max_pool2d(const Tensor& x, Size2d kernel,
                                                const FractionalMaxPoolOptions& options);
std::pair<Tensor, Tensor> fractional_max_pool3d(const Tensor& x, Size3d kernel,
                                                const FractionalMaxPoolOptions& options);

/// Transposed 3-D convolution as F.conv_transpose3d: x [N, C, D, H, W] (or [C, D, H, W]),
/// weight [C, O/groups, kd, kh, kw], bias [O]; out [N, O, (D - 1)·stride - 2·pad +
/// dilation·(kd - 1) + output_padding + 1, ...]. A composite: one conv_transpose2d per kernel
/// depth.  conv_transpose3d(x, w, b, 2)   // doubles D, H, W for a 2x2x2 kernel
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        Size3d stride = 1, Size3d padding = 0, Size3d output_padding = 0,
                        int64_t groups = 1, Size3d dilation = 1);

// ---- channels and grids (src/ops/grid.cpp) ----

/// [N, C, *] with C = g·k channels -> channel c·... regrouped as ShuffleNet's shuffle: the
/// channels of group i interleave with those of the others.  channel_shuffle(x, 2)
Tensor channel_shuffle(const Tensor& x, int64_t groups);
/// x / (k + alpha/size · Σ x² over `size` neighbouring channels)^beta, as
/// F.local_response_norm (input [N, C, *], at least 3-D).  local_response_norm(x, 5)
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);
/// The sampling grid of an affine transform as F.affine_grid: theta [N, 2, 3] and size
/// {N, C, H, W} give [N, H, W, 2] (x, y in [-1, 1]); theta [N, 3, 4] and {N, C, D, H, W} give
/// [N, D, H, W, 3].  affine_grid(theta, {1, 3, 8, 8}, false)
Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners = false);
/// Samples input [N, C, H, W] (or [N, C, D, H, W]) at grid [N, H_out, W_out, 2] (or [N, D_out,
/// H_out, W_out, 3]; x, y[, z] in [-1, 1], x along W) as F.grid_sample: mode "bilinear",
/// "nearest" or "bicubic" (4-D input), padding_mode "zeros", "border" or "reflection".
/// Gradients reach the input and (bilinear, bicubic) the grid.
///   grid_sample(img, affine_grid(theta, img.shape()), "bilinear")
Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode = "bilinear",
                   const std::string& padding_mode = "zeros", bool align_corners = false);

}  // namespace ember
