// src/ops/grid.cpp — issue 32's channel and sampling-grid ops (include/ember/ops_nn.hpp):
// channel_shuffle, local_response_norm and affine_grid, composites of ember's primitives.
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

}  // namespace ember
