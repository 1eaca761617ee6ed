// src/ops/pool3d.cpp — issue 32's pools (include/ember/ops_nn.hpp): max_pool3d, avg_pool3d,
// the adaptive 3-D pools, max_unpool1d/2d/3d and lp_pool1d/2d/3d, over one generic N-d
// window gather instead of a copy per rank; and fractional_max_pool2d/3d, whose windows differ
// per plane (one gather of every plane's own window cells).
//
// Note [Pools as gathered windows]
// A pool over S spatial dims gathers every window's cells into a new last dim: the input is
// padded (with -inf for max, 0 otherwise), each spatial dim is index_select'ed with the table
// of its windows' cells (out·k entries: o·stride + j·dilation in padded coordinates, or the
// adaptive cells), and the result [..., o1, k1, ..., oS, kS] is permuted to
// [..., o1, ..., oS, k1·...·kS]. max over that dim is the pool, and its gradient (index_select's
// is an index_add) is the pool's; that copy holds the kernel's volume times the output (as
// im2col's). Sums are separable: average and power pools gather and sum one dim at a time. The
// 2-D pools keep their fused kernels. An argmax maps back to the input's flat index through a
// host table of the same layout.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/ops_nn.hpp"
#include "ops/common.hpp"
#include "ops/window2d.hpp"

namespace ember {

namespace {

// One spatial dim of a pool: each output cell's window cells in the padded input, the
// window length k, the output length and the left padding.
struct Axis {
  std::vector<int64_t> cells;  // out·k positions in the padded input
  int64_t in = 0, k = 1, out = 1, pad_before = 0, pad_after = 0;
};

using ops::adaptive_end;
using ops::adaptive_start;

// A strided window axis (stride, dilation, padding, ceil_mode as the pools).
Axis strided_axis(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                  bool ceil_mode) {
  Axis a;
  a.in = in;
  a.k = k;
  a.out = ops::pool_out_size(in, k, pad, stride, dilation, ceil_mode);
  a.pad_before = pad;
  const int64_t last = (a.out - 1) * stride + (k - 1) * dilation;  // in padded coordinates
  a.pad_after = std::max<int64_t>(pad, last + 1 - in - pad);
  for (int64_t o = 0; o < a.out; ++o)
    for (int64_t j = 0; j < k; ++j) a.cells.push_back(o * stride + j * dilation);
  return a;
}

// An adaptive axis: window i of `out` over `in` (short windows repeat their last cell, which
// a max does not mind).
Axis adaptive_axis(int64_t in, int64_t out) {
  Axis a;
  a.in = in;
  a.out = out;
  a.k = 0;
  for (int64_t i = 0; i < out; ++i)
    a.k = std::max(a.k, adaptive_end(i, in, out) - adaptive_start(i, in, out));
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = adaptive_start(i, in, out), e = adaptive_end(i, in, out);
    for (int64_t j = 0; j < a.k; ++j) a.cells.push_back(std::min(s + j, e - 1));
  }
  return a;
}

// The leading (batch, channel) dims of x ahead of `spatial` trailing dims.
Shape lead_of(const Tensor& x, size_t spatial) {
  return Shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - spatial));
}

// Note [Memory formats]: the 3-D pools gather windows from any layout; a channels_last_3d
// input's result (values and indices) is made channels_last_3d once at the end.
using ops::in_format_of;
std::pair<Tensor, Tensor> in_format_of(const Tensor& x, std::pair<Tensor, Tensor> result) {
  return {in_format_of(x, result.first), in_format_of(x, result.second)};
}

// Note [Pools as gathered windows]: x [..., i1, ..., iS] -> [..., o1, ..., oS, K].
Tensor gather_windows(const Tensor& x, const std::vector<Axis>& axes, double pad_value) {
  const int s = static_cast<int>(axes.size()), r = x.dim(), first = r - s;
  Shape pads;  // from the last dim backwards
  bool padded = false;
  for (int i = s - 1; i >= 0; --i) {
    pads.push_back(axes[i].pad_before);
    pads.push_back(axes[i].pad_after);
    padded = padded || axes[i].pad_before != 0 || axes[i].pad_after != 0;
  }
  Tensor t = padded ? pad(x, pads, "constant", pad_value) : x;
  for (int i = 0; i < s; ++i) {
    const Axis& a = axes[i];
    Tensor cells = from_vector<int64_t>(a.cells, {a.out * a.k}).to(x.device());
    t = index_select(t, first + i, cells);
  }
  Shape split = lead_of(x, s), order, flat = lead_of(x, s);
  for (int d = 0; d < first; ++d) order.push_back(d);
  int64_t volume = 1;
  for (int i = 0; i < s; ++i) {
    split.push_back(axes[i].out);
    split.push_back(axes[i].k);
    order.push_back(first + 2 * i);
    flat.push_back(axes[i].out);
    volume *= axes[i].k;
  }
  for (int i = 0; i < s; ++i) order.push_back(first + 2 * i + 1);
  flat.push_back(volume);
  return t.reshape(split).permute(order).reshape(flat);
}

// For every (output cell, window cell) of gather_windows' layout, the flat index of the input
// cell within its volume (i1·I2·...·IS + ...), as a [1, ..., 1, o1, ..., oS, K] i64 table.
Tensor flat_index_table(const std::vector<Axis>& axes, int64_t lead_rank, Device device) {
  const size_t s = axes.size();
  int64_t outs = 1, volume = 1;
  for (const Axis& a : axes) {
    outs *= a.out;
    volume *= a.k;
  }
  std::vector<int64_t> table(static_cast<size_t>(outs * volume));
  std::vector<int64_t> o(s), k(s);
  for (int64_t oi = 0; oi < outs; ++oi) {
    int64_t rest = oi;
    for (size_t i = s; i-- > 0;) {
      o[i] = rest % axes[i].out;
      rest /= axes[i].out;
    }
    for (int64_t ki = 0; ki < volume; ++ki) {
      int64_t kr = ki;
      for (size_t i = s; i-- > 0;) {
        k[i] = kr % axes[i].k;
        kr /= axes[i].k;
      }
      int64_t flat = 0;
      for (size_t i = 0; i < s; ++i) {
        const Axis& a = axes[i];
        flat = flat * a.in + (a.cells[static_cast<size_t>(o[i] * a.k + k[i])] - a.pad_before);
      }
      table[static_cast<size_t>(oi * volume + ki)] = flat;
    }
  }
  Shape shape = Shape::filled(static_cast<int>(lead_rank), 1);
  for (const Axis& a : axes) shape.push_back(a.out);
  shape.push_back(volume);
  return from_vector<int64_t>(table, shape).to(device);
}

// The max of each window and its input index (Note [Pools as gathered windows]).
std::pair<Tensor, Tensor> max_over_windows(const Tensor& x, const std::vector<Axis>& axes) {
  Tensor w = gather_windows(x, axes, -std::numeric_limits<double>::infinity());
  ValuesIndices m = max(w, -1);
  const int64_t lead = x.dim() - static_cast<int64_t>(axes.size());
  Tensor table = flat_index_table(axes, lead, x.device()).expand(w.shape()).contiguous();
  Tensor indices = gather(table, -1, m.indices.unsqueeze(-1)).squeeze(-1);
  return {m.values, indices};
}

// The input's rank: [N, C, spatial...] or unbatched [C, spatial...].
void check_pool_input(Op op, const Tensor& x, int spatial) {
  const char* name = op_name(op);
  ops::check_defined(name, x);
  const char* layout = spatial == 1 ? "L" : (spatial == 2 ? "H, W" : "D, H, W");
  EMBER_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, name, ": input shape ",
              x.shape().to_string(), " (expected ", spatial + 2, "-D [N, C, ", layout, "] or ",
              spatial + 1, "-D [C, ", layout, "])");
  ops::check_supported(op, x);
  for (int d = x.dim() - spatial; d < x.dim(); ++d)
    EMBER_CHECK(x.shape()[d] >= 1, name, ": input shape ", x.shape().to_string(),
                " (expected non-empty spatial dims)");
}

std::string list_string(const std::vector<int64_t>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + ")";
}

// Strided axes for a pool over the trailing dims, with PyTorch's checks.
std::vector<Axis> pool_axes(Op op, const Tensor& x, const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                            const std::vector<int64_t>& dilation, bool ceil_mode) {
  const char* name = op_name(op);
  const size_t s = kernel.size();
  std::vector<Axis> axes;
  for (size_t i = 0; i < s; ++i) {
    EMBER_CHECK(kernel[i] >= 1, name, ": kernel size ", list_string(kernel),
                " (expected every entry >= 1)");
    EMBER_CHECK(stride[i] >= 1, name, ": stride ", list_string(stride),
                " (expected every entry >= 1)");
    EMBER_CHECK(dilation[i] >= 1, name, ": dilation ", list_string(dilation),
                " (expected every entry >= 1)");
    EMBER_CHECK(pad[i] >= 0 && pad[i] <= kernel[i] / 2, name, ": padding ", list_string(pad),
                " (expected 0 <= padding <= half the kernel size ", list_string(kernel), ")");
    const int64_t in = x.size(static_cast<int>(x.dim() - s + i));
    axes.push_back(strided_axis(in, kernel[i], stride[i], pad[i], dilation[i], ceil_mode));
    EMBER_CHECK(axes.back().out >= 1, name, ": output size ", axes.back().out,
                " is too small (input shape ", x.shape().to_string(), ", kernel size ",
                list_string(kernel), ", stride ", list_string(stride), ", padding ",
                list_string(pad), "; expected an output of at least 1)");
  }
  return axes;
}

std::vector<int64_t> v3(Size3d s) { return {s.d, s.h, s.w}; }
std::vector<int64_t> v2(Size2d s) { return {s.h, s.w}; }

// The divisor of each output cell of an average over `axes` (PyTorch's: the window clipped to
// the padded input, or, without count_include_pad, to the input itself) as a [o1, ..., oS]
// tensor; `stride` per axis.
Tensor window_counts(const std::vector<Axis>& axes, const std::vector<int64_t>& stride,
                     bool count_include_pad, const Tensor& like) {
  std::vector<std::vector<double>> per(axes.size());
  int64_t outs = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& a = axes[i];
    for (int64_t o = 0; o < a.out; ++o) {
      const int64_t start = o * stride[i] - a.pad_before;
      const int64_t end = std::min(start + a.k, a.in + a.pad_before);
      const int64_t clipped = std::min(end, a.in) - std::max<int64_t>(start, 0);
      per[i].push_back(static_cast<double>(count_include_pad ? end - start : clipped));
    }
    outs *= a.out;
  }
  std::vector<double> counts(static_cast<size_t>(outs));
  Shape shape;
  for (const Axis& a : axes) shape.push_back(a.out);
  for (int64_t oi = 0; oi < outs; ++oi) {
    int64_t rest = oi;
    double c = 1.0;
    for (size_t i = axes.size(); i-- > 0;) {
      c *= per[i][static_cast<size_t>(rest % axes[i].out)];
      rest /= axes[i].out;
    }
    counts[static_cast<size_t>(oi)] = c;
  }
  return from_vector<double>(counts, shape).to(like.dtype()).to(like.device());
}

// Σ of each window (zero padding) divided by window_counts (or divisor_override).
// A sum is separable: each spatial dim's windows are gathered and summed in turn, so the
// gathered copy holds k·out of one dim at a time, never the kernel's whole volume.
Tensor average_pool(const Tensor& x, const std::vector<Axis>& axes,
                    const std::vector<int64_t>& stride, bool count_include_pad,
                    std::optional<int64_t> divisor_override) {
  const int s = static_cast<int>(axes.size()), first = x.dim() - s;
  Shape pads;  // from the last dim backwards
  for (int i = s - 1; i >= 0; --i) {
    pads.push_back(axes[i].pad_before);
    pads.push_back(axes[i].pad_after);
  }
  Tensor total = pad(x, pads);
  for (int i = 0; i < s; ++i) {
    const Axis& a = axes[i];
    const int dim = first + i;
    Tensor cells = from_vector<int64_t>(a.cells, {a.out * a.k}).to(x.device());
    Tensor t = index_select(total, dim, cells);
    Shape split;
    for (int d = 0; d < t.dim(); ++d) {
      if (d != dim) {
        split.push_back(t.shape()[d]);
        continue;
      }
      split.push_back(a.out);
      split.push_back(a.k);
    }
    total = sum(t.reshape(split), {dim + 1});
  }
  if (divisor_override) return total / static_cast<double>(*divisor_override);
  return total / window_counts(axes, stride, count_include_pad, x);
}

}  // namespace

std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, Size3d kernel,
                                                  std::optional<Size3d> stride, Size3d padding,
                                                  Size3d dilation, bool ceil_mode) {
  const ops::UserOp user(Op::max_pool3d, {&x});
  check_pool_input(Op::max_pool3d, x, 3);
  const std::vector<Axis> axes =
      pool_axes(Op::max_pool3d, x, v3(kernel), v3(stride.value_or(kernel)), v3(padding),
                v3(dilation), ceil_mode);
  return in_format_of(x, max_over_windows(x, axes));
}

Tensor max_pool3d(const Tensor& x, Size3d kernel, std::optional<Size3d> stride, Size3d padding,
                  Size3d dilation, bool ceil_mode) {
  return max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool3d(const Tensor& x, Size3d kernel, std::optional<Size3d> stride, Size3d padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const ops::UserOp user(Op::avg_pool3d, {&x});
  check_pool_input(Op::avg_pool3d, x, 3);
  EMBER_CHECK(!divisor_override || *divisor_override != 0,
              "avg_pool3d: divisor_override 0 (expected a non-zero divisor)");
  const std::vector<int64_t> st = v3(stride.value_or(kernel));
  const std::vector<Axis> axes =
      pool_axes(Op::avg_pool3d, x, v3(kernel), st, v3(padding), {1, 1, 1}, ceil_mode);
  return in_format_of(x, average_pool(x, axes, st, count_include_pad, divisor_override));
}

// ---- adaptive 3-D pools ----

namespace {

void check_adaptive3d(Op op, const Tensor& x, Size3d os) {
  check_pool_input(op, x, 3);
  EMBER_CHECK(os.d >= 1 && os.h >= 1 && os.w >= 1, op_name(op), ": output size ",
              list_string(v3(os)), " (expected every entry >= 1)");
}

}  // namespace

Tensor adaptive_avg_pool3d(const Tensor& x, Size3d output_size) {
  const ops::UserOp user(Op::adaptive_avg_pool3d, {&x});
  check_adaptive3d(Op::adaptive_avg_pool3d, x, output_size);
  const std::vector<int64_t> os = v3(output_size);
  Tensor y = x;
  bool changed = false;
  for (int i = 0; i < 3; ++i) {
    const int d = x.dim() - 3 + i;
    const int64_t in = x.size(d);
    if (os[i] == in) continue;
    // Averaging along dim d: move it last, multiply by the window matrix, move it back.
    y = movedim(matmul(movedim(y, d, -1), ops::adaptive_average_matrix(in, os[i], x).t()), -1, d);
    changed = true;
  }
  return changed ? in_format_of(x, y) : x.clone();
}

std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, Size3d output_size) {
  const ops::UserOp user(Op::adaptive_max_pool3d, {&x});
  check_adaptive3d(Op::adaptive_max_pool3d, x, output_size);
  const std::vector<int64_t> os = v3(output_size);
  std::vector<Axis> axes;
  for (int i = 0; i < 3; ++i) axes.push_back(adaptive_axis(x.size(x.dim() - 3 + i), os[i]));
  return in_format_of(x, max_over_windows(x, axes));
}

Tensor adaptive_max_pool3d(const Tensor& x, Size3d output_size) {
  return adaptive_max_pool3d_with_indices(x, output_size).first;
}

// ---- max_unpool ----

namespace {

Tensor max_unpool(Op op, const Tensor& x, const Tensor& indices, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                  const std::optional<std::vector<int64_t>>& output_size) {
  const char* name = op_name(op);
  const int s = static_cast<int>(kernel.size());
  check_pool_input(op, x, s);
  ops::check_defined(name, indices, "indices");
  ops::check_index_dtype(name, indices);
  ops::check_same_device(name, x, indices);
  EMBER_CHECK(indices.shape() == x.shape(), name, ": indices shape ", indices.shape().to_string(),
              " (expected the input's shape ", x.shape().to_string(), ")");
  std::vector<int64_t> out(static_cast<size_t>(s));
  for (int i = 0; i < s; ++i) {
    EMBER_CHECK(kernel[i] >= 1 && stride[i] >= 1 && pad[i] >= 0, name, ": kernel size ",
                list_string(kernel), ", stride ", list_string(stride), ", padding ",
                list_string(pad), " (expected kernel and stride >= 1, padding >= 0)");
    const int64_t in = x.size(x.dim() - s + i);
    out[i] = output_size ? (*output_size)[i] : (in - 1) * stride[i] - 2 * pad[i] + kernel[i];
    const int64_t lo = (in - 1) * stride[i] - 2 * pad[i] + kernel[i] - stride[i];
    EMBER_CHECK(!output_size || (out[i] > lo && out[i] < lo + 2 * stride[i]), name,
                ": output_size ", list_string(*output_size), " (expected each entry between ",
                lo + 1, " and ", lo + 2 * stride[i] - 1, " for dim ", i, ")");
    EMBER_CHECK(out[i] >= 1, name, ": output size ", list_string(out),
                " (expected every entry >= 1)");
  }
  int64_t volume = 1;
  for (int64_t o : out) volume *= o;
  Tensor idx = indices.to(DType::i64).flatten(x.dim() - s);
  if (idx.device().is_cpu() && idx.numel() > 0) {
    const std::vector<int64_t> v = idx.contiguous().to_vector<int64_t>();
    for (int64_t i : v)
      EMBER_CHECK(i >= 0 && i < volume, name, ": index ", i, " is out of range (expected indices",
                  " in [0, ", volume, ") of an output of spatial size ", list_string(out), ")");
  }
  Shape flat = lead_of(x, static_cast<size_t>(s)), shape = flat;
  flat.push_back(volume);
  for (int64_t o : out) shape.push_back(o);
  Tensor base = zeros(flat, {.dtype = x.dtype(), .device = x.device()});
  return scatter(base, -1, idx, x.flatten(x.dim() - s)).reshape(shape);
}

template <typename T>
std::optional<std::vector<int64_t>> sizes_of(const std::optional<T>& s,
                                             std::vector<int64_t> (*to)(T)) {
  if (!s) return std::nullopt;
  return to(*s);
}

std::vector<int64_t> v1(int64_t s) { return {s}; }

}  // namespace

Tensor max_unpool1d(const Tensor& x, const Tensor& indices, int64_t kernel,
                    std::optional<int64_t> stride, int64_t padding,
                    std::optional<int64_t> output_size) {
  const ops::UserOp user(Op::max_unpool1d, {&x, &indices});
  return max_unpool(Op::max_unpool1d, x, indices, {kernel}, {stride.value_or(kernel)}, {padding},
                    sizes_of(output_size, v1));
}

Tensor max_unpool2d(const Tensor& x, const Tensor& indices, Size2d kernel,
                    std::optional<Size2d> stride, Size2d padding,
                    std::optional<Size2d> output_size) {
  const ops::UserOp user(Op::max_unpool2d, {&x, &indices});
  return max_unpool(Op::max_unpool2d, x, indices, v2(kernel), v2(stride.value_or(kernel)),
                    v2(padding), sizes_of(output_size, v2));
}

Tensor max_unpool3d(const Tensor& x, const Tensor& indices, Size3d kernel,
                    std::optional<Size3d> stride, Size3d padding,
                    std::optional<Size3d> output_size) {
  const ops::UserOp user(Op::max_unpool3d, {&x, &indices});
  return max_unpool(Op::max_unpool3d, x, indices, v3(kernel), v3(stride.value_or(kernel)),
                    v3(padding), sizes_of(output_size, v3));
}

// ---- lp_pool ----

namespace {

// PyTorch's form: avg_pool(x^p) (count_include_pad, no padding) times the kernel's volume,
// to the power 1/p; a ceil_mode window cut short by the edge is scaled up to the full kernel.
Tensor lp_pool(Op op, const Tensor& x, double p, const std::vector<int64_t>& kernel,
               const std::vector<int64_t>& stride, bool ceil_mode) {
  check_pool_input(op, x, static_cast<int>(kernel.size()));
  EMBER_CHECK(p > 0.0 && std::isfinite(p), op_name(op), ": norm_type ", p,
              " (expected a finite power > 0)");
  const std::vector<int64_t> zero(kernel.size(), 0), one(kernel.size(), 1);
  const std::vector<Axis> axes = pool_axes(op, x, kernel, stride, zero, one, ceil_mode);
  int64_t volume = 1;
  for (int64_t k : kernel) volume *= k;
  Tensor mean = average_pool(pow(x, p), axes, stride, true, std::nullopt);
  return pow(mean * static_cast<double>(volume), 1.0 / p);
}

}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, int64_t kernel, std::optional<int64_t> stride,
                 bool ceil_mode) {
  const ops::UserOp user(Op::lp_pool1d, {&x});
  return lp_pool(Op::lp_pool1d, x, norm_type, {kernel}, {stride.value_or(kernel)}, ceil_mode);
}

Tensor lp_pool2d(const Tensor& x, double norm_type, Size2d kernel, std::optional<Size2d> stride,
                 bool ceil_mode) {
  const ops::UserOp user(Op::lp_pool2d, {&x});
  return lp_pool(Op::lp_pool2d, x, norm_type, v2(kernel), v2(stride.value_or(kernel)), ceil_mode);
}

Tensor lp_pool3d(const Tensor& x, double norm_type, Size3d kernel, std::optional<Size3d> stride,
                 bool ceil_mode) {
  const ops::UserOp user(Op::lp_pool3d, {&x});
  return lp_pool(Op::lp_pool3d, x, norm_type, v3(kernel), v3(stride.value_or(kernel)), ceil_mode);
}

// ---- fractional max pooling ----

namespace {

// PyTorch's window starts along one dim for every plane: u [N, C] samples in [0, 1) give
// start_i = floor((i + u)·α) - floor(u·α) with α = (in - k)/(out - 1), the last window ending
// at the input's end. i64 [N, C, out].
Tensor fractional_starts(const Tensor& u, int64_t in, int64_t out, int64_t k) {
  const int64_t n = u.shape()[0], c = u.shape()[1];
  const TensorOptions idx{.dtype = DType::i64, .device = u.device()};
  if (out == 1) return full({n, c, 1}, static_cast<double>(in - k), idx);
  const double alpha = static_cast<double>(in - k) / static_cast<double>(out - 1);
  Tensor us = u.unsqueeze(-1);
  Tensor steps = arange(static_cast<double>(out - 1), {.dtype = u.dtype(), .device = u.device()});
  Tensor starts = floor((steps.reshape({1, 1, out - 1}) + us) * alpha) - floor(us * alpha);
  return cat({starts.to(DType::i64), full({n, c, 1}, static_cast<double>(in - k), idx)}, 2);
}

std::pair<Tensor, Tensor> fractional_max_pool(Op op, const Tensor& x_in,
                                              const std::vector<int64_t>& kernel,
                                              const FractionalMaxPoolOptions& o) {
  const char* name = op_name(op);
  const int s = static_cast<int>(kernel.size());
  check_pool_input(op, x_in, s);
  const Tensor x = x_in.dim() == s + 2 ? x_in : x_in.unsqueeze(0);
  const int64_t n = x.shape()[0], c = x.shape()[1];
  EMBER_CHECK(o.output_size.has_value() != o.output_ratio.has_value(), name,
              ": give exactly one of output_size and output_ratio");
  std::vector<int64_t> in(static_cast<size_t>(s)), out(static_cast<size_t>(s));
  for (int d = 0; d < s; ++d) {
    in[d] = x.shape()[2 + d];
    EMBER_CHECK(kernel[d] >= 1, name, ": kernel size ", list_string(kernel),
                " (expected every entry >= 1)");
    if (o.output_size) {
      EMBER_CHECK(static_cast<int>(o.output_size->size()) == s, name, ": output_size ",
                  list_string(*o.output_size), " (expected ", s, " sizes)");
      out[d] = (*o.output_size)[d];
    } else {
      EMBER_CHECK(static_cast<int>(o.output_ratio->size()) == s, name, ": output_ratio has ",
                  o.output_ratio->size(), " entries (expected ", s, ")");
      const double r = (*o.output_ratio)[d];
      EMBER_CHECK(r > 0.0 && r < 1.0, name, ": output_ratio ", r, " (expected 0 < ratio < 1)");
      out[d] = static_cast<int64_t>(static_cast<double>(in[d]) * r);
    }
    // PyTorch's bound: output + kernel - 1 <= input in 2-D, < input in 3-D.
    const int64_t reach = out[d] + kernel[d] - 1 + (s == 3 ? 1 : 0);
    EMBER_CHECK(out[d] >= 1 && reach <= in[d], name, ": output size ", list_string(out),
                " with kernel size ", list_string(kernel), " for input shape ",
                x_in.shape().to_string(), " (expected 1 <= output and output + kernel - 1 ",
                s == 3 ? "<" : "<=", " input in each dim)");
  }
  Tensor u = o.random_samples;
  if (u.defined()) {
    ops::check_same_dtype(name, x, u);
    ops::check_same_device(name, x, u);
    EMBER_CHECK(u.dim() == 3 && u.shape()[0] == n && u.shape()[1] == c && u.shape()[2] == s, name,
                ": random_samples shape ", u.shape().to_string(), " (expected [", n, ", ", c, ", ",
                s, "])");
  } else {
    u = rand({n, c, s}, {.dtype = x.dtype(), .device = x.device()});
  }
  u = u.detach();
  // Which sample drives which dim: 2-D uses [0] for the width and [1] for the height; 3-D
  // [0], [1], [2] for depth, height and width (PyTorch's kernels).
  const TensorOptions idx{.dtype = DType::i64, .device = x.device()};
  Shape full_shape{n, c};
  for (int d = 0; d < s; ++d) full_shape.push_back(out[d]);
  for (int d = 0; d < s; ++d) full_shape.push_back(kernel[d]);
  Tensor flat;
  int64_t volume = 1, window = 1;
  for (int d = 0; d < s; ++d) {
    const int64_t sample = s == 2 ? 1 - d : d;
    Tensor starts = fractional_starts(u.select(2, sample), in[d], out[d], kernel[d]);
    Shape start_shape = Shape::filled(2 + 2 * s, 1), step_shape = Shape::filled(2 + 2 * s, 1);
    start_shape[0] = n;
    start_shape[1] = c;
    start_shape[2 + d] = out[d];
    step_shape[2 + s + d] = kernel[d];
    Tensor cell = starts.reshape(start_shape) +
                  arange(static_cast<double>(kernel[d]), idx).reshape(step_shape);
    flat = flat.defined() ? flat * full(Shape{}, static_cast<double>(in[d]), idx) + cell : cell;
    volume *= in[d];
    window *= kernel[d];
  }
  flat = flat.expand(full_shape).contiguous();
  Shape windows{n, c};
  for (int d = 0; d < s; ++d) windows.push_back(out[d]);
  windows.push_back(window);
  flat = flat.reshape(windows);
  Tensor values = gather(x.reshape({n, c, volume}), 2, flat.reshape({n, c, -1})).reshape(windows);
  ValuesIndices m = max(values, -1);
  Tensor indices = gather(flat, -1, m.indices.unsqueeze(-1)).squeeze(-1);
  if (x_in.dim() == s + 2) return {m.values, indices};
  return {m.values.squeeze(0), indices.squeeze(0)};
}

}  // namespace

std::pair<Tensor, Tensor> fractional_max_pool2d(const Tensor& x, Size2d kernel,
                                                const FractionalMaxPoolOptions& options) {
  const ops::UserOp user(Op::fractional_max_pool2d, {&x, &options.random_samples});
  return fractional_max_pool(Op::fractional_max_pool2d, x, v2(kernel), options);
}

std::pair<Tensor, Tensor> fractional_max_pool3d(const Tensor& x, Size3d kernel,
                                                const FractionalMaxPoolOptions& options) {
  const ops::UserOp user(Op::fractional_max_pool3d, {&x, &options.random_samples});
  return fractional_max_pool(Op::fractional_max_pool3d, x, v3(kernel), options);
}

}  // namespace ember
