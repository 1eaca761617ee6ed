// src/ops/grid.cpp — issue 32's channel and sampling-grid ops (include/ember/ops_nn.hpp):
// channel_shuffle, local_response_norm, affine_grid and grid_sample (Note [grid_sample as
// gathers]), composites of ember's primitives.
#include <array>
#include <string>
#include <vector>

#include "ember/ops_nn.hpp"
#include "ops/common.hpp"

namespace ember {

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  const ops::UserOp user(Op::channel_shuffle, {&x});
  ops::check_supported(Op::channel_shuffle, x);
  EMBER_CHECK(x.dim() >= 3, "channel_shuffle: input shape ", x.shape().to_string(),
              " (expected at least 3 dims: [N, C, *])");
  EMBER_CHECK(groups >= 1, "channel_shuffle: groups ", groups, " (expected groups >= 1)");
  const int64_t c = x.shape()[1];
  EMBER_CHECK(c % groups == 0, "channel_shuffle: ", c, " channels do not split into ", groups,
              " groups (expected channels divisible by groups)");
  // [N, g, C/g, *] -> [N, C/g, g, *] -> [N, C, *].
  Shape split;
  split.push_back(x.shape()[0]);
  split.push_back(groups);
  split.push_back(c / groups);
  for (int d = 2; d < x.dim(); ++d) split.push_back(x.shape()[d]);
  return x.reshape(split).transpose(1, 2).contiguous().reshape(x.shape());
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  const ops::UserOp user(Op::local_response_norm, {&x});
  ops::check_supported(Op::local_response_norm, x);
  EMBER_CHECK(x.dim() >= 3, "local_response_norm: input shape ", x.shape().to_string(),
              " (expected at least 3 dims: [N, C, *])");
  EMBER_CHECK(size >= 1, "local_response_norm: size ", size, " (expected size >= 1)");
  if (x.numel() == 0) return x.clone();
  // The mean of x² over channels [c - size/2, c + (size-1)/2], zero beyond the edges (the
  // divisor is always `size`, as PyTorch's avg_pool form).
  Tensor sq = movedim(x * x, 1, -1);
  sq = pad(sq, {size / 2, (size - 1) / 2});
  Tensor mean = movedim(sum(unfold(sq, -1, size, 1), {-1}) / static_cast<double>(size), -1, 1);
  return x / pow(mean * alpha + k, beta);
}

namespace {

// PyTorch's base coordinates: n points evenly over [-1, 1] (align_corners), or the centres of
// n equal cells of [-1, 1]; one point is 0.
std::vector<double> base_coords(int64_t n, bool align_corners) {
  std::vector<double> v(static_cast<size_t>(n), 0.0);
  if (n <= 1) return v;
  for (int64_t i = 0; i < n; ++i) {
    const double t = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    v[static_cast<size_t>(i)] = align_corners ? t : t * static_cast<double>(n - 1) / n;
  }
  return v;
}

}  // namespace

Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners) {
  const ops::UserOp user(Op::affine_grid, {&theta});
  ops::check_supported(Op::affine_grid, theta, "theta");
  EMBER_CHECK(size.size() == 4 || size.size() == 5, "affine_grid: size ", size.to_string(),
              " (expected [N, C, H, W] or [N, C, D, H, W])");
  const int spatial = size.size() - 2;
  const int64_t n = size[0];
  EMBER_CHECK(theta.dim() == 3 && theta.shape()[0] == n && theta.shape()[1] == spatial &&
                  theta.shape()[2] == spatial + 1,
              "affine_grid: theta shape ", theta.shape().to_string(), " for size ",
              size.to_string(), " (expected [", n, ", ", spatial, ", ", spatial + 1, "])");
  for (int d = 2; d < size.size(); ++d)
    EMBER_CHECK(size[d] >= 1, "affine_grid: size ", size.to_string(),
                " (expected spatial sizes >= 1)");
  // The base grid [cells, spatial + 1]: (x, y[, z], 1) with x along the last dim.
  const int64_t w = size[size.size() - 1], h = size[size.size() - 2];
  const int64_t depth = spatial == 3 ? size[2] : 1;
  const std::vector<double> xs = base_coords(w, align_corners), ys = base_coords(h, align_corners),
                            zs = base_coords(depth, align_corners);
  const int64_t cols = spatial + 1, cells = depth * h * w;
  std::vector<double> base(static_cast<size_t>(cells * cols));
  for (int64_t d = 0; d < depth; ++d)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        double* row = &base[static_cast<size_t>(((d * h + i) * w + j) * cols)];
        row[0] = xs[static_cast<size_t>(j)];
        row[1] = ys[static_cast<size_t>(i)];
        if (spatial == 3) row[2] = zs[static_cast<size_t>(d)];
        row[cols - 1] = 1.0;
      }
  Tensor b = from_vector<double>(base, {1, cells, cols}).to(theta.dtype()).to(theta.device());
  Tensor grid = matmul(b, theta.transpose(1, 2));  // [N, cells, spatial]
  Shape out;
  out.push_back(n);
  for (int d = 2; d < size.size(); ++d) out.push_back(size[d]);
  out.push_back(spatial);
  return grid.reshape(out);
}

// ---- grid_sample ----
//
// Note [grid_sample as gathers]
// Each output point's grid coordinate (x, y[, z] in [-1, 1], x along the last input dim) is
// unnormalised to a pixel coordinate (align_corners: -1 and 1 are the corner pixels' centres;
// otherwise their outer edges), then folded into the input by the padding mode (border: a
// clamp; reflection: mirrored about the edges, then clamped; zeros: left as it is). Bilinear
// sampling gathers the 2^S neighbours of every point from the input flattened over its
// spatial dims and sums them weighted by (1 - f) or f per dim, where f is the coordinate's
// fractional part; a neighbour outside the input counts 0. Nearest gathers the rounded
// coordinate (half to even, as PyTorch's nearbyint). Bicubic (4-D input only, as PyTorch)
// gathers the 4x4 taps around the unpadded coordinate, each tap folded by the padding mode on
// its own, weighted by Keys' cubic convolution (A = -0.75) of the fractions. The gradient to
// the input is the gathers' (a scatter-add), the gradient to the grid flows through the
// weights (and the clamp / reflection), as PyTorch's; nearest gives the grid none.

namespace {

// PyTorch's reflect_coordinates: x mirrored into [twice_low/2, twice_high/2].
Tensor reflect(const Tensor& x, double twice_low, double twice_high) {
  if (twice_low == twice_high) return zeros_like(x);
  const double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Tensor d = abs(x - lo);
  Tensor extra = fmod(d, span);
  Tensor flips = floor(d / span).detach();
  Tensor even = eq(fmod(flips, 2.0), 0.0);
  return where(even, extra + lo, (span - extra) + lo);
}

// Grid values g in [-1, 1] as pixel coordinates along a dim of `size` cells.
Tensor unnormalize(const Tensor& g, int64_t size, bool align_corners) {
  const double n = static_cast<double>(size);
  return align_corners ? (g + 1.0) * (0.5 * (n - 1.0)) : ((g + 1.0) * n - 1.0) * 0.5;
}

// A pixel coordinate folded into the input by the padding mode (PyTorch's
// compute_coordinates): border clamps, reflection mirrors then clamps, zeros leaves it.
Tensor pad_coordinate(const Tensor& c, int64_t size, const std::string& padding,
                      bool align_corners) {
  const double n = static_cast<double>(size);
  if (padding == "border") return clamp(c, 0.0, n - 1.0);
  if (padding == "reflection") {
    Tensor r = align_corners ? reflect(c, 0.0, 2.0 * (n - 1.0)) : reflect(c, -1.0, 2.0 * n - 1.0);
    return clamp(r, 0.0, n - 1.0);
  }
  return c;
}

// Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for fractions t.
std::array<Tensor, 4> cubic_weights(const Tensor& t) {
  constexpr double a = -0.75;
  auto near = [](const Tensor& v) { return ((a + 2.0) * v - (a + 3.0)) * v * v + 1.0; };
  auto far = [](const Tensor& v) { return ((a * v - 5.0 * a) * v + 8.0 * a) * v - 4.0 * a; };
  return {far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)};
}

}  // namespace

Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode,
                   const std::string& padding_mode, bool align_corners) {
  const ops::UserOp user(Op::grid_sample, {&input, &grid});
  ops::check_supported(Op::grid_sample, input);
  ops::check_defined("grid_sample", grid, "grid");
  ops::check_same_dtype("grid_sample", input, grid);
  ops::check_same_device("grid_sample", input, grid);
  EMBER_CHECK(input.dim() == 4 || input.dim() == 5, "grid_sample: input shape ",
              input.shape().to_string(), " (expected 4-D [N, C, H, W] or 5-D [N, C, D, H, W])");
  const int spatial = input.dim() - 2;
  EMBER_CHECK(
      grid.dim() == input.dim() && grid.shape()[0] == input.shape()[0] && grid.size(-1) == spatial,
      "grid_sample: grid shape ", grid.shape().to_string(), " for input shape ",
      input.shape().to_string(), " (expected [N, ",
      spatial == 2 ? "H_out, W_out" : "D_out, H_out, W_out", ", ", spatial,
      "] with the input's N)");
  EMBER_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", "grid_sample: mode '",
              mode, "' (expected \"bilinear\", \"nearest\" or \"bicubic\")");
  EMBER_CHECK(mode != "bicubic" || input.dim() == 4, "grid_sample: mode 'bicubic' needs 4-D input ",
              "(got ", input.shape().to_string(), ")");
  EMBER_CHECK(padding_mode == "zeros" || padding_mode == "border" || padding_mode == "reflection",
              "grid_sample: padding_mode '", padding_mode,
              "' (expected \"zeros\", \"border\" or \"reflection\")");
  for (int d = 2; d < input.dim(); ++d)
    EMBER_CHECK(input.shape()[d] >= 1, "grid_sample: input shape ", input.shape().to_string(),
                " (expected non-empty spatial dims)");
  const int64_t n = input.shape()[0], c = input.shape()[1];
  int64_t volume = 1;
  for (int d = 2; d < input.dim(); ++d) volume *= input.shape()[d];
  const Tensor flat = input.reshape({n, c, volume});
  const int64_t points = grid.numel() / (n * spatial);
  // coords[d]: the pixel coordinate along input spatial dim d ([N, points]); grid component
  // k addresses dim spatial - 1 - k.
  std::vector<Tensor> coords(static_cast<size_t>(spatial));
  std::vector<int64_t> sizes(static_cast<size_t>(spatial)), strides(static_cast<size_t>(spatial));
  int64_t stride = 1;
  for (int d = spatial - 1; d >= 0; --d) {
    sizes[d] = input.shape()[2 + d];
    strides[d] = stride;
    stride *= sizes[d];
    const Tensor g = grid.select(-1, spatial - 1 - d).reshape({n, points});
    coords[d] = unnormalize(g, sizes[d], align_corners);
    // bicubic folds each tap instead (PyTorch's get_value_bounded).
    if (mode != "bicubic")
      coords[d] = pad_coordinate(coords[d], sizes[d], padding_mode, align_corners);
  }
  const TensorOptions idx{.dtype = DType::i64, .device = input.device()};
  Tensor zero = zeros(Shape{}, {.dtype = input.dtype(), .device = input.device()});
  // One neighbour: its flat index (clamped into the input) and whether it lies inside.
  auto pick = [&](const std::vector<Tensor>& cell, const Tensor& weight) {
    Tensor inside = ones(Shape{}, {.dtype = DType::boolean, .device = input.device()});
    Tensor index = zeros(Shape{}, idx);
    for (int d = 0; d < spatial; ++d) {
      const double top = static_cast<double>(sizes[d] - 1);
      inside = logical_and(inside, logical_and(ge(cell[d], 0.0), le(cell[d], top)));
      index = index + clamp(cell[d], 0.0, top).to(DType::i64) *
                          full(Shape{}, static_cast<double>(strides[d]), idx);
    }
    Tensor values = gather(flat, 2, index.reshape({n, 1, points}).expand({n, c, points}));
    return values * where(inside, weight, zero).reshape({n, 1, points});
  };
  Tensor out;
  if (mode == "bicubic") {
    // 16 taps around floor(coordinate), each folded by the padding mode; the weights are the
    // cubic convolution of the fractions, through which the grid's gradient flows.
    std::vector<Tensor> lower;
    std::vector<std::array<Tensor, 4>> weights;
    for (int d = 0; d < spatial; ++d) {
      lower.push_back(floor(coords[d]).detach());
      weights.push_back(cubic_weights(coords[d] - lower.back()));
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        std::vector<Tensor> cell;
        for (int d = 0; d < spatial; ++d) {
          const int tap = d == 0 ? i : j;
          cell.push_back(
              pad_coordinate(lower[d] + (tap - 1.0), sizes[d], padding_mode, align_corners));
        }
        Tensor term = pick(cell, weights[0][i] * weights[1][j]);
        out = out.defined() ? out + term : term;
      }
  } else if (mode == "nearest") {
    std::vector<Tensor> cell;
    for (int d = 0; d < spatial; ++d) cell.push_back(round(coords[d]).detach());
    out = pick(cell, ones(Shape{}, {.dtype = input.dtype(), .device = input.device()}));
  } else {
    std::vector<Tensor> lower, frac;
    for (int d = 0; d < spatial; ++d) {
      lower.push_back(floor(coords[d]).detach());
      frac.push_back(coords[d] - lower.back());
    }
    for (int corner = 0; corner < (1 << spatial); ++corner) {
      std::vector<Tensor> cell;
      Tensor weight;
      for (int d = 0; d < spatial; ++d) {
        const bool up = (corner >> d) & 1;
        cell.push_back(up ? lower[d] + 1.0 : lower[d]);
        Tensor w = up ? frac[d] : 1.0 - frac[d];
        weight = weight.defined() ? weight * w : w;
      }
      Tensor term = pick(cell, weight);
      out = out.defined() ? out + term : term;
    }
  }
  Shape shape;
  shape.push_back(n);
  shape.push_back(c);
  for (int d = 1; d < grid.dim() - 1; ++d) shape.push_back(grid.shape()[d]);
  return out.reshape(shape);
}

}  // namespace ember
