// src/ops/conv.cpp — the conv family (2-D windows): conv2d (shape checks, forward and backward:
// grad input, weight, bias), then max_pool2d and avg_pool2d.
//
// conv2d first offers the convolution to the device's library (oneDNN, cuDNN: Note [Which
// convolution path runs] in conv_library.cpp); the im2col path below runs when it declines.
//
// Shape letters: N batch, C input channels, O output channels, G groups, Cg = C/G, Og = O/G,
// kh×kw kernel, K = Cg·kh·kw (one output's receptive field), H×W input, oh×ow output,
// L = oh·ow, and nb the images of one chunk.
//
// Note [Convolution as GEMMs]
// im2col lays the patches of nb images side by side: columns [C·kh·kw, nb·L]. Group g's
// rows form one block, so each group is one GEMM and the groups are one batched call:
//   Y[O, nb·L]      = W[O, K] · columns              (per group: Og rows, K columns)
//   out[n, o, l]    = Y[o, n·L + l] + bias[o]
// Backward, with G[O, nb·L] = grad_out laid out the same way:
//   grad_W[O, K]    = Σ over chunks of G · columnsᵀ  (beta = 1 after the first chunk)
//   grad_columns    = Wᵀ · G,  grad_x = col2im(grad_columns)
//   grad_b          = grad_out summed over N, oh, ow
// Chunks are small on purpose: a chunk's columns stay in the L2 cache between im2col and
// the GEMM, where one GEMM over the whole batch streams tens of MB from memory and runs at
// a third of the speed (measured with OpenBLAS on the Fashion-MNIST CNN's layers). With
// L >= kMinColumns a chunk is one image: then Y is out[n] itself and G is grad_out[n], so
// no layout pass is needed.
// Smaller planes group ceil(kMinColumns / L) images (within kChunkBudget elements of
// columns) so the GEMMs stay wide, and move Y / G with one strided pass per chunk. The
// backward rebuilds each chunk's columns from x (cheap, and they are cache-hot for both
// GEMMs) rather than keeping the whole batch's columns alive between forward and backward.
//
// Note [Convolution chunks on the GPU]
// The CPU's small chunks would cost a GPU one im2col, one GEMM and one layout copy per image
// (a batch of 32 made a U-Net step ~30 launches per layer, each too small to fill the
// device). On CUDA a chunk is the whole batch, up to kCudaChunkBudget elements of columns,
// so a layer is one im2col, one GEMM per group batch and one copy in each direction.
//
// Note [Bias as a row of ones]
// With groups = 1 the forward multiplies [W | bias] (O × (K + 1)) by the columns with a row
// of ones appended, so the bias costs one more GEMM step instead of a pass over the output
// (for a 3×3 convolution of one channel, that pass would cost more than the GEMM). Grouped
// convolutions add the bias in one broadcast pass at the end.
#include "core/alloc_trace.hpp"
#include "ops/conv_library.hpp"
#include "ops/window2d.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

// Note [Convolution as GEMMs]: GEMM width a chunk aims for, and the most elements of
// columns a multi-image chunk may hold (1 MiB in f32: about a core's L2).
constexpr int64_t kMinColumns = 128;
constexpr int64_t kChunkBudget = int64_t{1} << 18;
// Note [Convolution chunks on the GPU]: the most elements of columns one GPU chunk may hold
// (256 MiB in f32).
constexpr int64_t kCudaChunkBudget = int64_t{1} << 26;

struct ConvPlan {
  backend::Window2d win;  // batch = N (chunks override it)
  int64_t out_channels = 0, groups = 1;
  int64_t chunk = 1;                                                           // images per chunk
  int64_t rows() const { return win.channels * win.kernel_h * win.kernel_w; }  // C·kh·kw
  int64_t plane() const { return win.out_h * win.out_w; }                      // L
};

// Images per chunk (Note [Convolution as GEMMs]) for a plan whose geometry is set.
void choose_chunk(ConvPlan& p, Device device) {
  const int64_t l = std::max<int64_t>(p.plane(), 1), per_image = std::max<int64_t>(p.rows() * l, 1);
  if (device.is_cuda()) {
    p.chunk =
        std::clamp<int64_t>(kCudaChunkBudget / per_image, 1, std::max<int64_t>(p.win.batch, 1));
    return;
  }
  const int64_t wanted = (kMinColumns + l - 1) / l;
  p.chunk = std::clamp<int64_t>(std::min(wanted, kChunkBudget / per_image), 1,
                                std::max<int64_t>(p.win.batch, 1));
}

// The checks of torch's conv2d, with errors that name the shapes involved.
ConvPlan plan_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
                   Size2d padding, Size2d dilation, int64_t groups) {
  const char* op = op_name(Op::conv2d);
  ops::check_defined(op, weight, "weight");
  const ops::OpScope op_scope(Op::conv2d, x);
  ops::check_supported(Op::conv2d, x);
  ops::check_same_dtype(op, x, weight);
  ops::check_same_device(op, x, weight);
  EMBER_CHECK(weight.dim() == 4, op_name(Op::conv2d), ": weight shape ", weight.shape().to_string(),
              " (expected 4-D [out_channels, in_channels/groups, kh, kw])");
  EMBER_CHECK(groups >= 1, op_name(Op::conv2d), ": groups ", groups, " (expected >= 1)");
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op_name(Op::conv2d), ": stride ",
              ops::pair_string(stride), " (expected every stride >= 1)");
  EMBER_CHECK(dilation.h >= 1 && dilation.w >= 1, op_name(Op::conv2d), ": dilation ",
              ops::pair_string(dilation), " (expected every dilation >= 1)");
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0, op_name(Op::conv2d), ": padding ",
              ops::pair_string(padding), " (expected every padding >= 0)");
  const Shape& ws = weight.shape();
  const int64_t o = ws[0], kh = ws[2], kw = ws[3];
  EMBER_CHECK(o % groups == 0, op_name(Op::conv2d), ": out_channels ", o,
              " is not divisible by groups ", groups, " (weight shape ", ws.to_string(), ")");
  EMBER_CHECK(x.shape()[1] == ws[1] * groups, op_name(Op::conv2d), ": input has ", x.shape()[1],
              " channels, expected ", ws[1] * groups, " (weight shape ", ws.to_string(),
              ", groups ", groups, ")");
  if (bias.defined()) {
    ops::check_same_dtype(op, x, bias);
    ops::check_same_device(op, x, bias);
    EMBER_CHECK(bias.dim() == 1 && bias.shape()[0] == o, op_name(Op::conv2d), ": bias shape ",
                bias.shape().to_string(), " (expected [", o, "] for weight shape ", ws.to_string(),
                ")");
  }
  const int64_t h = x.shape()[2], w = x.shape()[3];
  const int64_t eff_h = dilation.h * (kh - 1) + 1, eff_w = dilation.w * (kw - 1) + 1;
  const int64_t padded_h = h + 2 * padding.h, padded_w = w + 2 * padding.w;
  EMBER_CHECK(kh >= 1 && kw >= 1 && eff_h <= padded_h && eff_w <= padded_w, op_name(Op::conv2d),
              ": kernel size ", ops::pair_string(kh, kw), " (dilated ",
              ops::pair_string(eff_h, eff_w), ") is larger than the padded input ",
              ops::pair_string(padded_h, padded_w), " (input shape ", x.shape().to_string(),
              ", padding ", ops::pair_string(padding), ")");
  ConvPlan p;
  p.win =
      ops::make_window(x.shape()[0], x.shape()[1], h, w, Size2d(kh, kw), stride, padding, dilation);
  p.win.out_h = (padded_h - eff_h) / stride.h + 1;
  p.win.out_w = (padded_w - eff_w) / stride.w + 1;
  p.out_channels = o;
  p.groups = groups;
  choose_chunk(p, core::planning_device(x.device()));
  return p;
}

// GEMM over the G groups of a convolution (Note [Convolution as GEMMs]); every matrix is
// row-major with the given leading dimension, and group g's block starts `step_*` elements on.
struct GroupGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, step_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, step_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, step_c = 0;
  double beta = 0.0;
};

void run_gemm(const Tensor& like, int64_t groups, const GroupGemm& p) {
  backend::GemmArgs g;
  g.dtype = like.dtype();
  g.device = like.device().index;
  g.trans_a = p.trans_a;
  g.trans_b = p.trans_b;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.batch = groups;
  g.a = p.a;
  g.lda = p.lda;
  g.batch_stride_a = p.step_a;
  g.b = p.b;
  g.ldb = p.ldb;
  g.batch_stride_b = p.step_b;
  g.c = p.c;
  g.ldc = p.ldc;
  g.batch_stride_c = p.step_c;
  g.beta = p.beta;
  ops::backend_of(like).gemm(g);
}

// Note [Split-K weight gradients on the GPU]
// grad_W = G·columnsᵀ has a small output (O × C·kh·kw) and a long inner dim (nb·L: 65536 for 16
// images of 64×64), so as one GEMM it is a few output tiles that a few SMs walk down all of K
// while the rest idle (the H200 spent most of a small U-Net's step there). On CUDA, with one
// group, it runs as S GEMMs over K slices into partials [S, m, n], in one batched call, and
// one sum over S; the slices and the sum are in a fixed order, so results are deterministic.
int64_t split_k_count(const GroupGemm& g) {
  constexpr int64_t kTile = 128, kWantedTiles = 256, kMinSlice = 256;
  const int64_t tiles = ((g.m + kTile - 1) / kTile) * ((g.n + kTile - 1) / kTile);
  if (tiles >= kWantedTiles / 4 || g.k < 8192) return 1;
  return std::clamp<int64_t>(std::min(kWantedTiles / tiles, g.k / kMinSlice), 1, kWantedTiles);
}

const void* advanced(const void* p, int64_t elements, DType dtype) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(element_size(dtype));
}

// A temporary of the im2col path (columns, split-K partials, the bias-folded weight): left out
// of a memory estimate's trace when its GPU target gives the convolution to cuDNN (Note [A dry
// run for a cuDNN target] in conv_library.cpp).
Tensor make_scratch(const Shape& shape, DType dtype, Device device) {
  const core::ObserverPause untraced(ops::library_convolution_in_dry_run(device, dtype));
  return ops::make_tensor(shape, dtype, device);
}

// run_gemm for the weight gradient (trans_b, K contiguous in A and B, C contiguous [m, n]).
void run_weight_gemm(const Tensor& like, int64_t groups, const GroupGemm& g) {
  const int64_t s =
      core::planning_device(like.device()).is_cuda() && groups == 1 && g.beta == 0.0 && g.ldc == g.n
          ? split_k_count(g)
          : 1;
  if (s == 1) return run_gemm(like, groups, g);
  const int64_t slice = g.k / s, rest = g.k - slice * s;
  const Tensor part = make_scratch({s, g.m, g.n}, like.dtype(), like.device());
  GroupGemm pg = g;
  pg.k = slice;
  pg.step_a = slice;
  pg.step_b = slice;
  pg.c = part.data_ptr();
  pg.step_c = g.m * g.n;
  run_gemm(like, s, pg);
  if (rest > 0) {  // the last few columns of K, into the first partial
    GroupGemm tail = pg;
    tail.k = rest;
    tail.a = advanced(g.a, slice * s, like.dtype());
    tail.b = advanced(g.b, slice * s, like.dtype());
    tail.beta = 1.0;
    run_gemm(like, 1, tail);
  }
  const backend::View out{g.c, like.dtype(), like.device().index, Shape{1, g.m * g.n},
                          Shape{g.m * g.n, 1}};
  ops::backend_of(like).reduce(backend::ReduceOp::sum, out,
                               ops::sub_view(part, 0, {s, g.m * g.n}, {g.m * g.n, 1}));
}

// A [O, nb·L] matrix seen as [nb, O, L] (for moving to and from NCHW in one strided pass).
backend::View as_batch_major(const Tensor& m, int64_t nb, int64_t o, int64_t l) {
  return ops::sub_view(m, 0, {nb, o, l}, {l, nb * l, 1});
}

// out = conv(x) for contiguous 4-D x and weight (Note [Convolution as GEMMs]).
Tensor conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const backend::Backend& be = ops::backend_of(x);
  const int64_t n = p.win.batch, o = p.out_channels, l = p.plane(), rows = p.rows();
  const int64_t og = o / p.groups, kg = rows / p.groups;
  Tensor out = ops::make_tensor({n, o, p.win.out_h, p.win.out_w}, x.dtype(), x.device());
  if (out.numel() == 0) return out;
  // Note [Convolution chunks on the GPU]
  // The CPU's small chunks would cost a GPU one im2col, one GEMM and one layout copy per image
  // (a batch of 32 made a U-Net step ~30 launches per layer, each too small to fill the
  // device). On CUDA a chunk is the whole batch, up to kCudaChunkBudget elements of columns,
  // so a layer is one im2col, one GEMM per group batch and one copy in each direction.
  //
  // Note [Bias as a row of ones]: with one group, W gains the bias as an extra column and the
  // columns an extra row of ones, so the GEMM adds the bias (no pass over the output).
  const bool fold_bias = bias.defined() && p.groups == 1;
  const int64_t k = fold_bias ? kg + 1 : kg;
  Tensor wk = weight;
  if (fold_bias) {
    wk = make_scratch({o, k}, x.dtype(), x.device());
    be.copy(ops::sub_view(wk, 0, {o, kg}, {k, 1}), ops::sub_view(weight, 0, {o, kg}, {kg, 1}));
    be.copy(ops::sub_view(wk, kg, {o}, {k}), ops::view_of(bias));
  }
  Tensor col = make_scratch({fold_bias ? rows + 1 : rows, p.chunk * l}, x.dtype(), x.device());
  Tensor y = p.chunk == 1 ? Tensor() : make_scratch({o, p.chunk * l}, x.dtype(), x.device());
  int64_t ones_width = 0;  // the width the row of ones was last written for
  for (int64_t n0 = 0; n0 < n; n0 += p.chunk) {
    const int64_t nb = std::min(p.chunk, n - n0);
    backend::Window2d win = p.win;
    win.batch = nb;
    be.im2col(win, ops::view_of(col), ops::batch_chunk(x, n0, nb));
    if (fold_bias && ones_width != nb * l) {
      ones_width = nb * l;
      be.fill(ops::sub_view(col, kg * nb * l, {nb * l}, {1}), 1.0);
    }
    backend::View out_chunk = ops::batch_chunk(out, n0, nb);
    out_chunk.shape = Shape{nb, o, l};
    out_chunk.strides = Shape{o * l, l, 1};
    const bool direct = nb == 1;  // Y is out[n0] itself
    run_gemm(x, p.groups,
             {.m = og,
              .n = nb * l,
              .k = k,
              .a = wk.data_ptr(),
              .lda = k,
              .step_a = og * k,
              .b = col.data_ptr(),
              .ldb = nb * l,
              .step_b = kg * nb * l,
              .c = direct ? out_chunk.data : y.data_ptr(),
              .ldc = nb * l,
              .step_c = og * nb * l});
    if (!direct) be.copy(out_chunk, as_batch_major(y, nb, o, l));
  }
  if (bias.defined() && !fold_bias) {
    const backend::View ov = ops::sub_view(out, 0, {n, o, l}, {o * l, l, 1});
    be.binary(backend::BinaryOp::add, ov, ov,
              ops::sub_view(bias, 0, {n, o, l}, {0, bias.stride(0), 0}));
  }
  return out;
}

struct ConvGrads {
  Tensor input, weight;
};

// grad_x and grad_W of conv_forward (either may be skipped); each chunk's columns are
// rebuilt from x (Note [Convolution as GEMMs]).
ConvGrads conv_backward(const ConvPlan& p, const Tensor& grad_out, const Tensor& x,
                        const Tensor& weight, bool need_input, bool need_weight) {
  const Tensor g = grad_out.contiguous();
  const backend::Backend& be = ops::backend_of(g);
  const int64_t n = p.win.batch, o = p.out_channels, l = p.plane(), rows = p.rows();
  const int64_t og = o / p.groups, kg = rows / p.groups;
  ConvGrads r;
  const DType dt = g.dtype();
  const Device dev = g.device();
  if (need_input)
    r.input = ops::make_tensor({n, p.win.channels, p.win.height, p.win.width}, dt, dev);
  if (need_weight) {
    r.weight =
        ops::make_tensor({o, p.win.channels / p.groups, p.win.kernel_h, p.win.kernel_w}, dt, dev);
    if (n == 0 || l == 0) be.fill(ops::view_of(r.weight), 0.0);
  }
  if (need_input && (n == 0 || l == 0)) be.fill(ops::view_of(r.input), 0.0);
  if (n == 0 || l == 0) return r;
  Tensor col = make_scratch({rows, p.chunk * l}, dt, dev);
  Tensor gm = p.chunk == 1 ? Tensor() : make_scratch({o, p.chunk * l}, dt, dev);
  for (int64_t n0 = 0; n0 < n; n0 += p.chunk) {
    const int64_t nb = std::min(p.chunk, n - n0);
    backend::Window2d win = p.win;
    win.batch = nb;
    // G[O, nb·L] from grad_out[n0 : n0 + nb] (for one image they are the same memory).
    backend::View g_chunk = ops::batch_chunk(g, n0, nb);
    const void* gdata = g_chunk.data;
    if (nb != 1) {
      g_chunk.shape = Shape{nb, o, l};
      g_chunk.strides = Shape{o * l, l, 1};
      be.copy(as_batch_major(gm, nb, o, l), g_chunk);
      gdata = gm.data_ptr();
    }
    if (need_weight) {
      be.im2col(win, ops::view_of(col), ops::batch_chunk(x, n0, nb));
      run_weight_gemm(g, p.groups,
                      {.trans_b = true,
                       .m = og,
                       .n = kg,
                       .k = nb * l,
                       .a = gdata,
                       .lda = nb * l,
                       .step_a = og * nb * l,
                       .b = col.data_ptr(),
                       .ldb = nb * l,
                       .step_b = kg * nb * l,
                       .c = r.weight.data_ptr(),
                       .ldc = kg,
                       .step_c = og * kg,
                       .beta = n0 == 0 ? 0.0 : 1.0});
    }
    if (need_input) {
      run_gemm(g, p.groups,
               {.trans_a = true,
                .m = kg,
                .n = nb * l,
                .k = og,
                .a = weight.data_ptr(),
                .lda = kg,
                .step_a = og * kg,
                .b = gdata,
                .ldb = nb * l,
                .step_b = og * nb * l,
                .c = col.data_ptr(),
                .ldc = nb * l,
                .step_c = kg * nb * l});
      be.col2im(win, ops::batch_chunk(r.input, n0, nb), ops::view_of(col));
    }
  }
  return r;
}

// The plan's convolution for the library slots (Note [Which convolution path runs] in
// conv_library.cpp): a unit height with a unit kernel height and no padding there (conv1d's
// form) is the 1-D geometry.
backend::ConvGeometry geometry_of(const ConvPlan& p, const Tensor& x) {
  const backend::Window2d& w = p.win;
  backend::ConvGeometry g;
  g.dtype = x.dtype();
  g.device = x.device().index;
  g.batch = w.batch;
  g.in_channels = w.channels;
  g.out_channels = p.out_channels;
  g.groups = p.groups;
  const bool one_d = w.height == 1 && w.kernel_h == 1 && w.pad_h == 0 && w.out_h == 1;
  g.spatial = one_d ? 1 : 2;
  const int64_t in[] = {w.height, w.width}, k[] = {w.kernel_h, w.kernel_w},
                out[] = {w.out_h, w.out_w}, s[] = {w.stride_h, w.stride_w},
                pad[] = {w.pad_h, w.pad_w}, d[] = {w.dilation_h, w.dilation_w};
  for (int i = one_d ? 1 : 0, j = 0; i < 2; ++i, ++j) {
    g.input[j] = in[i];
    g.kernel[j] = k[i];
    g.output[j] = out[i];
    g.stride[j] = s[i];
    g.padding[j] = pad[i];
    g.dilation[j] = d[i];
  }
  return g;
}

Tensor conv2d_4d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
                 Size2d padding, Size2d dilation, int64_t groups) {
  const ConvPlan p = plan_conv(x, weight, bias, stride, padding, dilation, groups);
  const bool need_x = autograd::needs_grad(x), need_w = autograd::needs_grad(weight);
  // Note [Memory formats]: a channels_last input or weight runs the library NHWC; im2col
  // reads NCHW and its output is made channels_last after.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  Tensor xc, wc, out;
  {
    NoGradGuard no_grad;  // the copies are data for the kernels, not graph
    xc = x.contiguous(format);
    wc = weight.contiguous(format);
  }
  backend::ConvGeometry geo = geometry_of(p, x);
  geo.channels_last = format != MemoryFormat::contiguous;
  Tensor library = ops::conv_through_library(
      {.op = Op::conv2d,
       .geo = geo,
       .x = &x,
       .weight = &weight,
       .bias = &bias,
       .xc = xc,
       .wc = wc,
       .out_shape = {p.win.batch, p.out_channels, p.win.out_h, p.win.out_w}},
      [p](const Tensor& g, const Tensor& xs, const Tensor& ws, bool nx, bool nw) {
        ConvGrads r = conv_backward(p, g, xs, ws, nx, nw);
        return ops::ConvGradients{r.input, r.weight};
      });
  if (library.defined()) return library;
  if (format != MemoryFormat::contiguous) {
    NoGradGuard no_grad;
    xc = xc.contiguous();
    wc = wc.contiguous();
  }
  {
    NoGradGuard no_grad;
    out = conv_forward(p, xc, wc, bias);
  }
  if (autograd::needs_grad(x, weight, bias)) {
    const bool need_b = bias.defined() && bias.requires_grad();
    autograd::record(Op::conv2d, out, {&x, &weight, &bias},
                     [p, need_x, need_w, need_b, sx = SavedTensor(need_w ? xc : Tensor()),
                      sw = SavedTensor(need_x ? wc : Tensor())](const Tensor& g, GradList& gi) {
                       ConvGrads r = conv_backward(p, g, sx.get(), sw.get(), need_x, need_w);
                       if (need_x) gi[0] = r.input;
                       if (need_w) gi[1] = r.weight;
                       if (need_b) gi[2] = sum(g, {0, 2, 3});
                     });
  }
  return out.contiguous(format);
}

// Note [Transposed convolution as conv2d's input gradient]
// conv_transpose2d(x, W) is the gradient of conv2d(y, W) with respect to y: a plan whose
// conv input is the transposed output y [N, O, Hout, Wout] and whose conv output is x
// [N, C, H, W] (so C is the plan's out_channels and W [C, O/G, kh, kw] its weight). Then
//   forward      y      = conv_backward's input path (Wᵀ·x per group, then col2im)
//   grad_x              = conv_forward(grad_y)       (im2col, then W·columns)
//   grad_W              = conv_backward's weight path with x as the "grad_out", grad_y as input
// The plan's output size is H×W itself, not the conv formula's: with output_padding >= stride
// (allowed when it is below the dilation) the formula would give one more row that no
// input feeds.
Tensor conv_transpose2d_4d(const Tensor& x, const Tensor& weight, Size2d stride, Size2d padding,
                           Size2d output_padding, int64_t groups, Size2d dilation) {
  const char* op = op_name(Op::conv_transpose2d);
  ops::check_defined(op, weight, "weight");
  const ops::OpScope op_scope(Op::conv_transpose2d, x);
  ops::check_supported(Op::conv_transpose2d, x);
  ops::check_same_dtype(op, x, weight);
  ops::check_same_device(op, x, weight);
  EMBER_CHECK(weight.dim() == 4, op, ": weight shape ", weight.shape().to_string(),
              " (expected 4-D [in_channels, out_channels/groups, kh, kw])");
  EMBER_CHECK(groups >= 1, op, ": groups ", groups, " (expected >= 1)");
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op, ": stride ", ops::pair_string(stride),
              " (expected every stride >= 1)");
  EMBER_CHECK(dilation.h >= 1 && dilation.w >= 1, op, ": dilation ", ops::pair_string(dilation),
              " (expected every dilation >= 1)");
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding ", ops::pair_string(padding),
              " (expected every padding >= 0)");
  EMBER_CHECK(output_padding.h >= 0 && output_padding.w >= 0 &&
                  (output_padding.h < stride.h || output_padding.h < dilation.h) &&
                  (output_padding.w < stride.w || output_padding.w < dilation.w),
              op, ": output_padding ", ops::pair_string(output_padding),
              " (expected >= 0 and smaller than the stride ", ops::pair_string(stride),
              " or the dilation ", ops::pair_string(dilation), " in each dim)");
  const Shape& ws = weight.shape();
  const int64_t c = ws[0], kh = ws[2], kw = ws[3];
  EMBER_CHECK(c % groups == 0, op, ": in_channels ", c, " is not divisible by groups ", groups,
              " (weight shape ", ws.to_string(), ")");
  EMBER_CHECK(x.shape()[1] == c, op, ": input has ", x.shape()[1], " channels, expected ", c,
              " (weight shape ", ws.to_string(), ")");
  EMBER_CHECK(kh >= 1 && kw >= 1 && ws[1] >= 1, op, ": weight shape ", ws.to_string(),
              " (expected every kernel size and out_channels/groups >= 1)");
  const int64_t h = x.shape()[2], w = x.shape()[3];
  const int64_t out_h =
      (h - 1) * stride.h - 2 * padding.h + dilation.h * (kh - 1) + output_padding.h + 1;
  const int64_t out_w =
      (w - 1) * stride.w - 2 * padding.w + dilation.w * (kw - 1) + output_padding.w + 1;
  EMBER_CHECK(out_h >= 1 && out_w >= 1, op, ": output size ", ops::pair_string(out_h, out_w),
              " is too small (input shape ", x.shape().to_string(), ", weight shape ",
              ws.to_string(), ", stride ", ops::pair_string(stride), ", padding ",
              ops::pair_string(padding), "; expected an output of at least (1, 1))");
  ConvPlan p;
  p.win = ops::make_window(x.shape()[0], ws[1] * groups, out_h, out_w, Size2d(kh, kw), stride,
                           padding, dilation);
  p.win.out_h = h;
  p.win.out_w = w;
  p.out_channels = c;
  p.groups = groups;
  choose_chunk(p, core::planning_device(x.device()));
  // Note [Transposed convolutions in the library]: the plan's window is the convolution whose
  // input gradient this is, so geometry_of gives the library its geometry. Note [Memory
  // formats]: a channels_last operand runs the library NHWC; the own path below reads NCHW and
  // makes its output channels_last after.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  Tensor xc, wc, out;
  {
    NoGradGuard no_grad;  // data for the kernels, not graph
    xc = x.contiguous(format);
    wc = weight.contiguous(format);
  }
  backend::ConvGeometry geo = geometry_of(p, x);
  geo.channels_last = format != MemoryFormat::contiguous;
  Tensor library = ops::conv_transpose_through_library(
      {.op = Op::conv_transpose2d,
       .geo = geo,
       .x = &x,
       .weight = &weight,
       .xc = xc,
       .wc = wc,
       .out_shape = {x.shape()[0], ws[1] * groups, out_h, out_w}},
      [p](const Tensor& g, const Tensor& xs, const Tensor& wsaved, bool nx, bool nw) {
        ops::ConvGradients r;
        if (nx) r.input = conv_forward(p, g, wsaved, Tensor());
        if (nw) r.weight = conv_backward(p, xs, g, Tensor(), false, true).weight;
        return r;
      });
  if (library.defined()) return library;
  const bool need_x = autograd::needs_grad(x), need_w = autograd::needs_grad(weight);
  {
    NoGradGuard no_grad;
    xc = xc.contiguous();
    wc = wc.contiguous();
    out = conv_backward(p, xc, Tensor(), wc, true, false).input;
  }
  if (autograd::needs_grad(x, weight)) {
    autograd::record(Op::conv_transpose2d, out, {&x, &weight},
                     [p, need_x, need_w, sx = SavedTensor(need_w ? xc : Tensor()),
                      sw = SavedTensor(need_x ? wc : Tensor())](const Tensor& g, GradList& gi) {
                       const Tensor gc = g.contiguous();
                       if (need_x) gi[0] = conv_forward(p, gc, sw.get(), Tensor());
                       if (need_w)
                         gi[1] = conv_backward(p, sx.get(), gc, Tensor(), false, true).weight;
                     });
  }
  return out.contiguous(format);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
              Size2d padding, Size2d dilation, int64_t groups) {
  if (const auto c = ops::autocast(Op::conv2d, {&x, &weight, &bias}))
    return conv2d(c[0], c[1], c[2], stride, padding, dilation, groups);
  return ops::with_batch_dim("conv2d", x, [&](const Tensor& x4) {
    return conv2d_4d(x4, weight, bias, stride, padding, dilation, groups);
  });
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
                        Size2d padding, Size2d output_padding, int64_t groups, Size2d dilation) {
  if (const auto c = ops::autocast(Op::conv_transpose2d, {&x, &weight, &bias}))
    return conv_transpose2d(c[0], c[1], c[2], stride, padding, output_padding, groups, dilation);
  const char* op = op_name(Op::conv_transpose2d);
  if (bias.defined() && weight.defined() && weight.dim() == 4) {
    ops::check_same_device(op, weight, bias);
    EMBER_CHECK(bias.dim() == 1 && bias.shape()[0] == weight.shape()[1] * groups, op,
                ": bias shape ", bias.shape().to_string(), " (expected [",
                weight.shape()[1] * groups, "] for weight shape ", weight.shape().to_string(),
                " and groups ", groups, ")");
  }
  return ops::with_batch_dim(op, x, [&](const Tensor& x4) {
    Tensor y = conv_transpose2d_4d(x4, weight, stride, padding, output_padding, groups, dilation);
    return bias.defined() ? y + bias.reshape({1, bias.shape()[0], 1, 1}) : y;
  });
}

// ---- pooling ----
//
// Pooling: max_pool2d and avg_pool2d: PyTorch's shape rules and checks, forward
// through the backend pool kernels, backward (max: to the argmax kept from the forward;
// avg: spread over each window with the forward's divisor).
//
// Output size (torch's pooling_output_shape), per spatial dim:
//   out = floor((in + 2·pad - dilation·(k - 1) - 1 + (ceil_mode ? stride - 1 : 0)) / stride) + 1
//   and with ceil_mode, one less when the last window would start past in + pad.

namespace {

using ops::pool_out_size;

backend::Window2d plan_pool(Op pool, const Tensor& x, Size2d kernel,
                            std::optional<Size2d> stride_opt, Size2d padding, Size2d dilation,
                            bool ceil_mode) {
  const ops::OpScope op_scope(pool, x);
  ops::check_supported(pool, x);
  const char* op = op_name(pool);
  const Size2d stride = stride_opt.value_or(kernel);
  EMBER_CHECK(kernel.h >= 1 && kernel.w >= 1, op, ": kernel size ", ops::pair_string(kernel),
              " (expected every kernel size >= 1)");
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op, ": stride ", ops::pair_string(stride),
              " (expected every stride >= 1)");
  EMBER_CHECK(dilation.h >= 1 && dilation.w >= 1, op, ": dilation ", ops::pair_string(dilation),
              " (expected every dilation >= 1)");
  EMBER_CHECK(
      padding.h >= 0 && padding.w >= 0 && padding.h <= kernel.h / 2 && padding.w <= kernel.w / 2,
      op, ": padding ", ops::pair_string(padding),
      " (expected 0 <= padding <= half the kernel size ", ops::pair_string(kernel), ")");
  backend::Window2d w = ops::make_window(x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3],
                                         kernel, stride, padding, dilation);
  w.out_h = pool_out_size(w.height, kernel.h, padding.h, stride.h, dilation.h, ceil_mode);
  w.out_w = pool_out_size(w.width, kernel.w, padding.w, stride.w, dilation.w, ceil_mode);
  EMBER_CHECK(w.out_h >= 1 && w.out_w >= 1, op, ": output size ",
              ops::pair_string(w.out_h, w.out_w), " is too small (input shape ",
              x.shape().to_string(), ", kernel size ", ops::pair_string(kernel), ", stride ",
              ops::pair_string(stride), ", padding ", ops::pair_string(padding), ", dilation ",
              ops::pair_string(dilation), "; expected an output of at least (1, 1))");
  return w;
}

std::pair<Tensor, Tensor> max_pool2d_4d(const Tensor& x, Size2d kernel,
                                        std::optional<Size2d> stride, Size2d padding,
                                        Size2d dilation, bool ceil_mode) {
  // Note [Memory formats]: a channels_last input is pooled as it lies (NHWC kernels), and its
  // output, indices and gradient are channels_last.
  const MemoryFormat format = ops::format_of(x);
  backend::Window2d w = plan_pool(Op::max_pool2d, x, kernel, stride, padding, dilation, ceil_mode);
  w.channels_last = format != MemoryFormat::contiguous;
  const Shape out_shape{w.batch, w.channels, w.out_h, w.out_w};
  Tensor out = ops::make_tensor(out_shape, x.dtype(), x.device(), format);
  Tensor indices = ops::make_tensor(out_shape, DType::i64, x.device(), format);
  {
    NoGradGuard no_grad;
    Tensor xc = x.contiguous(format);
    if (out.numel() > 0)
      ops::backend_of(x).max_pool2d(w, ops::view_of(out), ops::view_of(indices), ops::view_of(xc));
  }
  if (autograd::needs_grad(x))
    autograd::record(Op::max_pool2d, out, {&x},
                     [w, format, si = SavedTensor(indices)](const Tensor& g, GradList& gi) {
                       Tensor gc = g.contiguous(format);
                       Tensor grad = ops::make_tensor({w.batch, w.channels, w.height, w.width},
                                                      g.dtype(), g.device(), format);
                       if (gc.numel() > 0) {
                         ops::backend_of(g).max_pool2d_backward(
                             w, ops::view_of(grad), ops::view_of(gc), ops::view_of(si.get()));
                       } else {
                         ops::backend_of(g).fill(ops::view_of(grad), 0.0);
                       }
                       gi[0] = grad;
                     });
  return {out, indices};
}

Tensor avg_pool2d_4d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                     bool ceil_mode, bool count_include_pad) {
  const MemoryFormat format = ops::format_of(x);  // as max_pool2d
  backend::Window2d w = plan_pool(Op::avg_pool2d, x, kernel, stride, padding, 1, ceil_mode);
  w.channels_last = format != MemoryFormat::contiguous;
  Tensor out =
      ops::make_tensor({w.batch, w.channels, w.out_h, w.out_w}, x.dtype(), x.device(), format);
  {
    NoGradGuard no_grad;
    Tensor xc = x.contiguous(format);
    if (out.numel() > 0)
      ops::backend_of(x).avg_pool2d(w, ops::view_of(out), ops::view_of(xc), count_include_pad);
  }
  if (autograd::needs_grad(x))
    autograd::record(Op::avg_pool2d, out, {&x},
                     [w, format, count_include_pad](const Tensor& g, GradList& gi) {
                       Tensor gc = g.contiguous(format);
                       Tensor grad = ops::make_tensor({w.batch, w.channels, w.height, w.width},
                                                      g.dtype(), g.device(), format);
                       if (gc.numel() > 0) {
                         ops::backend_of(g).avg_pool2d_backward(
                             w, ops::view_of(grad), ops::view_of(gc), count_include_pad);
                       } else {
                         ops::backend_of(g).fill(ops::view_of(grad), 0.0);
                       }
                       gi[0] = grad;
                     });
  return out;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2d kernel,
                                                  std::optional<Size2d> stride, Size2d padding,
                                                  Size2d dilation, bool ceil_mode) {
  const ops::UserOp user("max_pool2d_with_indices", {&x});
  Tensor indices;
  Tensor out = ops::with_batch_dim("max_pool2d", x, [&](const Tensor& x4) {
    auto [o, i] = max_pool2d_4d(x4, kernel, stride, padding, dilation, ceil_mode);
    indices = x.dim() == 3 ? i.squeeze(0) : i;
    return o;
  });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                  Size2d dilation, bool ceil_mode) {
  const ops::UserOp user(Op::max_pool2d, {&x});
  return max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                  bool ceil_mode, bool count_include_pad) {
  return ops::with_batch_dim("avg_pool2d", x, [&](const Tensor& x4) {
    return avg_pool2d_4d(x4, kernel, stride, padding, ceil_mode, count_include_pad);
  });
}

}  // namespace ember
