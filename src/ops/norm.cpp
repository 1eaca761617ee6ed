// src/ops/norm.cpp — batch_norm, layer_norm and rms_norm with fused kernels: checks, forward,
// running-stat update and backward side by side.
//
// Shape letters: N batch, C channels (dim 1), S = the product of the dims after C,
// M = N·S values per channel; r = 1/√(var + eps), x̂ = (x - mean)·r, y = x̂·w + b.
//
// Note [Fused batch norm]
// Built from primitives, batch norm makes about twenty passes over the activation in the
// forward and backward (it was the costliest layer of the Fashion-MNIST CNN's training
// step). Here every pass that touches [N, C, S] is one of three kernels, and all the rest is
// arithmetic on [C] vectors:
//   forward   stats (training: mean, biased var)        one read
//             y = x·(w·r) + (b - mean·w·r)               one read, one write
//   backward  Σg, Σg·(x - mean) per channel              one read of g and x
//             training: dx = g·A + x·B + D with          one read of g and x, one write
//               A = w·r,  B = -w·r³·Σg(x - mean)/M,  D = -mean·B - w·r·Σg/M
//             eval (running stats are constants): dx = g·(w·r)
//             dw = r·Σg(x - mean),  db = Σg
// The running statistics use the unbiased variance (var·M/(M - 1)), as PyTorch.
#include <limits>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

// The [N, C, S] view of a contiguous tensor with at least 2 dims; a channels_last one is
// [N·S, C, 1] (Note [Batch norm with the channels innermost] in src/cuda/batch_norm.cu): the same
// per-channel walk with the channels innermost.
backend::View nc3(const Tensor& t, MemoryFormat format = MemoryFormat::contiguous) {
  const int64_t n = t.shape()[0], c = t.shape()[1];
  const int64_t s = n * c == 0 ? 0 : t.numel() / (n * c);
  if (format != MemoryFormat::contiguous)
    return {t.data_ptr(), t.dtype(), t.device().index, Shape{n * s, c, 1}, Shape{c, 1, 1}};
  return {t.data_ptr(), t.dtype(), t.device().index, Shape{n, c, s}, Shape{c * s, s, 1}};
}

const backend::View kNone{};  // an absent operand of channel_affine

}  // namespace

namespace {

// The composite of batch_norm_relu: what the fused path must equal.
Tensor bn_relu_composite(const Tensor& y, const Tensor& residual) {
  return relu(residual.defined() ? add(y, residual) : y);
}

// A [C] view of a per-channel tensor (contiguous), or an absent operand.
backend::View channel_view(const Tensor& t) { return t.defined() ? ops::view_of(t) : kNone; }

// relu?(batch_norm(x, ...) + residual?) (residual undefined: none; relu false: batch_norm).
Tensor batch_norm_fused(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool training, double momentum,
                        double eps, const Tensor& residual, bool relu_after) {
  EMBER_ASSERT(relu_after || !residual.defined(), "batch_norm: a residual comes with the ReLU");
  const bool epilogue = relu_after;
  if (const auto c = ops::autocast(Op::batch_norm, {&x, &weight, &bias}))
    return batch_norm_fused(c[0], running_mean, running_var, c[1], c[2], training, momentum, eps,
                            residual, relu_after);
  ops::check_defined("batch_norm", x);
  const ops::OpScope op_scope(Op::batch_norm, x);
  ops::check_supported(Op::batch_norm, x);
  EMBER_CHECK(x.dim() >= 2, op_name(Op::batch_norm), ": input shape ", x.shape().to_string(),
              " (expected [N, C] or [N, C, ...])");
  if (residual.defined()) {
    EMBER_CHECK(residual.shape() == x.shape(), "batch_norm_relu: residual shape ",
                residual.shape().to_string(), " (expected the input's, ", x.shape().to_string(),
                ")");
    ops::check_same_device("batch_norm_relu", x, residual);
  }
  const int64_t c = x.shape()[1];
  const bool half = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  auto check_param = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return;
    EMBER_CHECK(t.dim() == 1 && t.shape()[0] == c, op_name(Op::batch_norm), ": ", what, " shape ",
                t.shape().to_string(), " (expected [", c, "] for input shape ",
                x.shape().to_string(), ")");
    // A 16-bit input takes f32 parameters and statistics too (autocast gives it f32 ones).
    if (!(half && t.dtype() == DType::f32)) ops::check_same_dtype("batch_norm", x, t);
    ops::check_same_device("batch_norm", x, t);
  };
  check_param(running_mean, "running_mean");
  check_param(running_var, "running_var");
  check_param(weight, "weight");
  check_param(bias, "bias");
  const int64_t m = c == 0 ? 0 : x.numel() / c;  // values per channel
  if (training) {
    EMBER_CHECK(m > 1, op_name(Op::batch_norm),
                ": expected more than 1 value per channel when training (got input shape ",
                x.shape().to_string(), ")");
  } else {
    EMBER_CHECK(running_mean.defined() && running_var.defined(), op_name(Op::batch_norm),
                ": eval mode needs running_mean and running_var (got undefined tensors)");
  }
  // A residual of another dtype promotes in the add: the composite computes that.
  if (residual.defined() && residual.dtype() != x.dtype())
    return bn_relu_composite(batch_norm_fused(x, running_mean, running_var, weight, bias, training,
                                              momentum, eps, Tensor(), false),
                             residual);
  // Note [16-bit batch norm]: an f16/bf16 input is normalised with f32 statistics and
  // parameters, its output rounded once to its dtype (torch's autocast runs batch_norm so, and
  // keeps the activations 16-bit). On a GPU the kernels read the 16-bit data and the f32
  // per-channel values as they are; 16-bit parameters or running statistics are widened first
  // (the running ones written back after the update). The CPU computes it all in f32 copies.
  if (half) {
    const auto wide = [](const Tensor& t) {
      return t.defined() && t.dtype() != DType::f32 ? t.to(DType::f32) : t;
    };
    const bool narrow_params = (weight.defined() && weight.dtype() != DType::f32) ||
                               (bias.defined() && bias.dtype() != DType::f32);
    const bool narrow_stats = running_mean.defined() && running_mean.dtype() != DType::f32;
    const bool narrow_var = running_var.defined() && running_var.dtype() != DType::f32;
    if (x.device().is_cpu() || narrow_params || narrow_stats || narrow_var) {
      Tensor rm, rv;
      {
        NoGradGuard no_grad;
        rm = narrow_stats ? running_mean.to(DType::f32) : running_mean;
        rv = narrow_var ? running_var.to(DType::f32) : running_var;
      }
      const bool cpu = x.device().is_cpu();
      Tensor y = batch_norm_fused(cpu ? x.to(DType::f32) : x, rm, rv, wide(weight), wide(bias),
                                  training, momentum, eps, Tensor(), false);
      if (training) {
        NoGradGuard no_grad;
        if (narrow_stats) Tensor(running_mean).copy_(rm);
        if (narrow_var) Tensor(running_var).copy_(rv);
      }
      y = cpu ? y.to(x.dtype()) : y;
      return epilogue ? bn_relu_composite(y, residual) : y;
    }
  }
  const DType stat_dtype = half ? DType::f32 : x.dtype();  // of the per-channel values
  const backend::Backend& be = ops::backend_of(x);
  // Note [Memory formats]: a channels_last input is normalised as it lies, and so is its output.
  const MemoryFormat format = ops::format_of(x);
  Tensor xc, mean, invstd, out, res;
  {
    NoGradGuard no_grad;  // everything below is data for the kernels, not graph
    xc = x.contiguous(format);
    if (residual.defined()) res = residual.contiguous(format);
    // Note [Batch norm's per-channel arithmetic in one kernel] (src/kernels/norm.hpp).
    Tensor var, scale = ops::make_tensor({c}, stat_dtype, x.device());
    Tensor shift = ops::make_tensor({c}, stat_dtype, x.device());
    invstd = ops::make_tensor({c}, stat_dtype, x.device());
    // Running statistics are updated in place by the kernel: a non-contiguous one through a
    // contiguous copy written back after.
    const bool update = training && running_mean.defined() && running_var.defined();
    Tensor rm = update ? running_mean.contiguous() : Tensor();
    Tensor rv = update ? running_var.contiguous() : Tensor();
    if (training) {
      mean = ops::make_tensor({c}, stat_dtype, x.device());
      var = ops::make_tensor({c}, stat_dtype, x.device());
      be.batch_norm_stats(ops::view_of(mean), ops::view_of(var), nc3(xc, format));
    } else {
      mean = running_mean.contiguous().clone();  // a snapshot: the buffer may change later
      var = running_var.contiguous();
    }
    const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    backend::BatchNormPrepare prep;
    prep.invstd = ops::view_of(invstd);
    prep.scale = ops::view_of(scale);
    prep.shift = ops::view_of(shift);
    prep.mean = ops::view_of(mean);
    prep.var = ops::view_of(var);
    prep.running_mean = channel_view(rm);
    prep.running_var = channel_view(rv);
    prep.weight = channel_view(w);
    prep.bias = channel_view(b);
    prep.eps = eps;
    prep.momentum = momentum;
    prep.unbias = m > 1 ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
    prep.training = training;
    be.batch_norm_prepare(prep);
    if (update) {
      if (!rm.is_same(running_mean)) Tensor(running_mean).copy_(rm);
      if (!rv.is_same(running_var)) Tensor(running_var).copy_(rv);
    }
    out = ops::make_tensor(x.shape(), x.dtype(), x.device(), format);
    if (out.numel() > 0) {
      backend::ChannelAffine f;
      f.out = nc3(out, format);
      f.a = nc3(xc, format);
      f.scale_a = ops::view_of(scale);
      f.shift = ops::view_of(shift);
      if (res.defined()) f.residual = nc3(res, format);
      f.relu = relu_after;
      be.channel_affine(f);
    }
  }
  const bool needs_residual = residual.defined() && autograd::needs_grad(residual);
  if (autograd::needs_grad(x, weight, bias) || needs_residual) {
    const bool nx = x.requires_grad(), nw = weight.defined() && weight.requires_grad();
    const bool nb = bias.defined() && bias.requires_grad();
    const bool nr = residual.defined() && residual.requires_grad();
    autograd::record(
        Op::batch_norm, out, {&x, &weight, &bias, &residual},
        [nx, nw, nb, nr, relu_after, training, m, format, sx = SavedTensor(xc),
         smean = SavedTensor(mean), sr = SavedTensor(invstd), sw = SavedTensor(weight),
         so = relu_after ? SavedTensor(out) : SavedTensor()](const Tensor& g, GradList& gi) {
          Tensor gc = g.to(sx.get().dtype()).contiguous(format);
          const Tensor xs = sx.get(), mu = smean.get(), r = sr.get(), w = sw.get();
          Tensor gate;  // ReLU's output: its backward folded into the kernels below
          if (relu_after && nr) {
            gc = ops::relu_backward(gc, so.get()).contiguous(format);  // the residual's too
          } else if (relu_after) {
            gate = so.get().contiguous(format);
          }
          if (nr) gi[3] = gc;
          if (!nx && !nw && !nb) return;
          const backend::Backend& b = ops::backend_of(gc);
          const int64_t channels = mu.numel();
          Tensor sum_g = ops::make_tensor({channels}, mu.dtype(), gc.device());
          Tensor sum_gx = ops::make_tensor({channels}, mu.dtype(), gc.device());
          if (gc.numel() > 0) {
            b.batch_norm_backward_reduce(ops::view_of(sum_g), ops::view_of(sum_gx), nc3(gc, format),
                                         nc3(xs, format), ops::view_of(mu),
                                         gate.defined() ? nc3(gate, format) : kNone);
          } else {
            b.fill(ops::view_of(sum_g), 0.0);
            b.fill(ops::view_of(sum_gx), 0.0);
          }
          const Tensor wc = w.defined() ? w.contiguous() : Tensor();
          const auto channel = [&](bool wanted) {
            return wanted ? ops::make_tensor({channels}, mu.dtype(), gc.device()) : Tensor();
          };
          Tensor scale_g = channel(nx), scale_x = channel(nx && training);
          Tensor shift = channel(nx && training), gw = channel(nw), gb = channel(nb);
          backend::BatchNormBackwardPrepare prep;
          prep.scale_g = channel_view(scale_g);
          prep.scale_x = channel_view(scale_x);
          prep.shift = channel_view(shift);
          prep.grad_weight = channel_view(gw);
          prep.grad_bias = channel_view(gb);
          prep.sum_g = ops::view_of(sum_g);
          prep.sum_gx = ops::view_of(sum_gx);
          prep.mean = ops::view_of(mu);
          prep.invstd = ops::view_of(r);
          prep.weight = channel_view(wc);
          prep.inv_m = 1.0 / static_cast<double>(m);
          prep.training = training;
          b.batch_norm_backward_prepare(prep);
          if (nw) gi[1] = gw;
          if (nb) gi[2] = gb;
          if (!nx) return;
          Tensor dx = ops::make_tensor(gc.shape(), gc.dtype(), gc.device(), format);
          if (dx.numel() > 0) {
            backend::ChannelAffine f;
            f.out = nc3(dx, format);
            f.a = nc3(gc, format);
            f.scale_a = ops::view_of(scale_g);
            if (gate.defined()) f.gate = nc3(gate, format);
            if (training) {
              f.b = nc3(xs, format);
              f.scale_b = ops::view_of(scale_x);
              f.shift = ops::view_of(shift);
            }
            b.channel_affine(f);
          }
          gi[0] = dx;
        });
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum, eps,
                          Tensor(), false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps, const Tensor& residual) {
  return batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum, eps,
                          residual, true);
}

namespace {
// A contiguous tensor seen as [rows, n] (`flat`); undefined: a View with no data (left out).
backend::View rows_view(const Tensor& t, const Shape& flat) {
  if (!t.defined()) return backend::View{nullptr, DType::f32, 0, flat, Shape{flat[1], 1}};
  return backend::View{t.data_ptr(), t.dtype(), t.device().index, flat, Shape{flat[1], 1}};
}
// A weight or bias as a flat vector (undefined: a View with no data, of dtype `dtype`).
backend::View vector_view(const Tensor& t, DType dtype) {
  if (!t.defined()) return backend::View{nullptr, dtype, 0, Shape{0}, Shape{1}};
  return ops::view_of(t.reshape(Shape{t.numel()}));
}

bool is_half_float(DType t) { return t == DType::f16 || t == DType::bf16; }

// The dtype layer_norm's (or rms_norm's) weight and bias share (Note [16-bit layer norm] in
// src/kernels/norm.hpp): x's dtype, or f32 for an f16/bf16 x, as PyTorch's mixed-type layer
// norm; anything else is refused, naming both dtypes. Without either: x's.
DType layer_norm_param_dtype(Op op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* name = op_name(op);
  const DType xt = x.dtype();
  auto check = [&](const Tensor& p, const char* what) {
    if (!p.defined()) return;
    const DType pt = p.dtype();
    EMBER_CHECK(pt == xt || (is_half_float(xt) && pt == DType::f32), name, ": ", what, " dtype ",
                dtype_name(pt), " for input dtype ", dtype_name(xt), " (expected ", dtype_name(xt),
                " as the input", is_half_float(xt) ? ", or f32" : "; convert with .to(DType)", ")");
  };
  check(weight, "weight");
  check(bias, "bias");
  if (weight.defined() && bias.defined())
    EMBER_CHECK(weight.dtype() == bias.dtype(), name, ": bias dtype ", dtype_name(bias.dtype()),
                " differs from weight dtype ", dtype_name(weight.dtype()),
                " (expected one dtype for both)");
  return weight.defined() ? weight.dtype() : bias.defined() ? bias.dtype() : xt;
}

// x's gradient in a norm's backward (wanted: `nx`): x's pending gradient when the engine handed
// it over and the kernel can add to it (into_pending: the kernel's grad_x +=), else a fresh
// tensor that the node accumulates itself (Note [Fused layer norm]).
struct GradX {
  Tensor t;
  bool into_pending = false;
};
GradX grad_x_of(const GradList& gi, const Tensor& xs, bool nx) {
  if (!nx) return {};
  if (gi[0].defined() && gi[0].dtype() == xs.dtype() && gi[0].device() == xs.device() &&
      gi[0].is_contiguous())
    return {gi[0], true};
  return {ops::make_tensor(xs.shape(), xs.dtype(), xs.device()), false};
}

// Note [A lower-precision copy beside a tensor] (src/ops/autocast.cpp), for layer_norm and
// rms_norm: the forward's copy of y under autocast (undefined when none is wanted) ...
Tensor forward_low_copy(const Tensor& x, int64_t rows) {
  return rows > 0 && ops::want_low_copy(x.dtype())
             ? ops::make_tensor(x.shape(), autocast_dtype(), x.device())
             : Tensor();
}

// ... and the backward's copy of grad_x, when this node is the last to add into the gradient
// and x's node reads it in 16 bits too (the residual stream's add of a block's bf16 output).
Tensor backward_low_copy(const Tensor& xs, const Shape& flat, bool nx, const GradX& gx,
                         const GradList& gi) {
  if (!nx || xs.dtype() != DType::f32 || flat.numel() == 0 || !ops::low_copies_enabled() ||
      !(gx.into_pending || !gi[0].defined()))
    return Tensor();
  const std::optional<DType> low = autograd::final_gradient_copy(0);
  return low ? ops::make_tensor(xs.shape(), *low, xs.device()) : Tensor();
}

backend::View low_view(const Tensor& low, const Shape& flat) {
  return low.defined() ? rows_view(low, flat) : backend::View{};
}

// layer_norm's and rms_norm's shape and device checks: x ends with normalized_shape, the
// weight and bias (either undefined: left out) have that shape and x's device.
void check_normalized(Op op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                      const Tensor& bias) {
  const char* name = op_name(op);
  const int k = normalized_shape.size();
  EMBER_CHECK(k >= 1 && k <= x.dim(), name, ": normalized_shape ", normalized_shape.to_string(),
              " does not fit input shape ", x.shape().to_string());
  for (int i = 0; i < k; ++i)
    EMBER_CHECK(x.shape()[x.dim() - k + i] == normalized_shape[i], name, ": input shape ",
                x.shape().to_string(), " does not end with normalized_shape ",
                normalized_shape.to_string());
  auto check_param = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return;
    EMBER_CHECK(t.shape() == normalized_shape, name, ": ", what, " shape ", t.shape().to_string(),
                " (expected ", normalized_shape.to_string(), ")");
    ops::check_same_device(name, x, t);
  };
  check_param(weight, "weight");
  check_param(bias, "bias");
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (const auto c = ops::autocast(Op::layer_norm, {&x, &weight, &bias}))
    return layer_norm(c[0], normalized_shape, c[1], c[2], eps);
  const ops::OpScope op_scope(Op::layer_norm, x);
  ops::check_supported(Op::layer_norm, x);
  check_normalized(Op::layer_norm, x, normalized_shape, weight, bias);
  const DType param_dtype = layer_norm_param_dtype(Op::layer_norm, x, weight, bias);
  // Note [Fused layer norm]
  // One kernel per direction over [rows, n] instead of the ~8 forward and ~20 backward passes
  // of the composite. The forward reads x once and writes y once; the backward reads grad and
  // x once and writes grad_x, and forms the weight's and bias's gradients (column sums of
  // grad·x̂ and grad) in the same pass, from per-block partials summed in a fixed order
  // (Note [Layer norm on CUDA] in src/cuda/norm.cu). Its node accumulates into x's pending
  // gradient (Note [Gradients accumulate where they land] in src/autograd/engine.cpp): in a
  // residual block x + f(layer_norm(x)), x's gradient from the residual branch arrives here
  // and the kernel adds its own into it (grad_x += ...) instead of a separate add pass.
  // f16/bf16 inputs compute in f32 and round once (Note [16-bit layer norm]): mean and rstd
  // are saved in f32, the parameters' gradients come in the parameters' dtype.
  const int64_t n = normalized_shape.numel();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const Tensor xc = x.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const DType stats_dtype = is_half_float(x.dtype()) ? DType::f32 : x.dtype();
  Tensor y = ops::make_tensor(x.shape(), x.dtype(), x.device());
  Tensor mu = ops::make_tensor(Shape{rows}, stats_dtype, x.device());
  Tensor rstd = ops::make_tensor(Shape{rows}, stats_dtype, x.device());
  const Shape flat{rows, n};
  const Tensor y_low = forward_low_copy(x, rows);  // for the linear that usually comes next
  if (rows > 0)
    ops::backend_of(x).layer_norm_forward(
        rows_view(y, flat), low_view(y_low, flat), ops::view_of(mu), ops::view_of(rstd),
        rows_view(xc, flat), vector_view(w, param_dtype), vector_view(b, param_dtype), eps);
  if (y_low.defined()) ops::attach_low_copy(y, y_low);
  if (autograd::needs_grad(x, weight, bias)) {
    const bool nx = x.requires_grad(), nw = weight.requires_grad(), nb = bias.requires_grad();
    autograd::Node& node = autograd::record(
        Op::layer_norm, y, {&x, &weight, &bias},
        [sx = SavedTensor(xc), sm = SavedTensor(mu), sr = SavedTensor(rstd), sw = SavedTensor(w),
         flat, nx, nw, nb, param_dtype, wshape = weight.defined() ? weight.shape() : Shape{},
         bshape = bias.defined() ? bias.shape() : Shape{}](const Tensor& g_in, GradList& gi) {
          // g in x's dtype: a root's gradient (y.backward(g)) may come in another.
          const Tensor xs = sx.get(), g = ops::cast_to(g_in, xs.dtype()).contiguous();
          const GradX gx = grad_x_of(gi, xs, nx);
          const Tensor gw =
              nw ? ops::make_tensor(Shape{flat[1]}, param_dtype, xs.device()) : Tensor();
          const Tensor gb =
              nb ? ops::make_tensor(Shape{flat[1]}, param_dtype, xs.device()) : Tensor();
          const Tensor gx_low = backward_low_copy(xs, flat, nx, gx, gi);
          ops::backend_of(xs).layer_norm_backward(
              rows_view(gx.t, flat), low_view(gx_low, flat), vector_view(gw, param_dtype),
              vector_view(gb, param_dtype), rows_view(g, flat), rows_view(xs, flat),
              ops::view_of(sm.get()), ops::view_of(sr.get()), vector_view(sw.get(), param_dtype),
              gx.into_pending);
          if (gx_low.defined()) ops::attach_low_copy(gx.t, gx_low);
          if (nx && !gx.into_pending) autograd::accumulate(gi[0], gx.t);
          if (nw) gi[1] = gw.reshape(wshape);
          if (nb) gi[2] = gb.reshape(bshape);
        });
    node.accumulates = 1u;  // edge 0: x
  }
  return y;
}

namespace {
// torch.finfo(t).eps, rms_norm's default eps.
double machine_epsilon(DType t) {
  switch (t) {
    case DType::f64: return std::numeric_limits<double>::epsilon();
    case DType::f16: return 0.0009765625;  // 2^-10
    case DType::bf16: return 0.0078125;    // 2^-7
    default: return std::numeric_limits<float>::epsilon();
  }
}
}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  if (const auto c = ops::autocast(Op::rms_norm, {&x, &weight}))
    return rms_norm(c[0], normalized_shape, c[1], eps);
  ops::check_defined(op_name(Op::rms_norm), x);
  const ops::OpScope op_scope(Op::rms_norm, x);
  ops::check_supported(Op::rms_norm, x);
  check_normalized(Op::rms_norm, x, normalized_shape, weight, Tensor());
  const DType param_dtype = layer_norm_param_dtype(Op::rms_norm, x, weight, Tensor());
  const double e = eps ? *eps : machine_epsilon(x.dtype());
  // Note [Fused layer norm], without the mean and the bias (Note [RMS norm is layer norm without
  // the mean] in src/kernels/norm.hpp): one kernel per direction, rstd saved in the compute
  // dtype, x's pending gradient accumulated into by the backward's kernel.
  const int64_t n = normalized_shape.numel();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const Tensor xc = x.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  Tensor y = ops::make_tensor(x.shape(), x.dtype(), x.device());
  const DType stats_dtype = is_half_float(x.dtype()) ? DType::f32 : x.dtype();
  Tensor rstd = ops::make_tensor(Shape{rows}, stats_dtype, x.device());
  const Shape flat{rows, n};
  const Tensor y_low = forward_low_copy(x, rows);
  if (rows > 0)
    ops::backend_of(x).rms_norm_forward(rows_view(y, flat), low_view(y_low, flat),
                                        ops::view_of(rstd), rows_view(xc, flat),
                                        vector_view(w, param_dtype), e);
  if (y_low.defined()) ops::attach_low_copy(y, y_low);
  if (autograd::needs_grad(x, weight)) {
    const bool nx = x.requires_grad(), nw = weight.defined() && weight.requires_grad();
    autograd::Node& node = autograd::record(
        Op::rms_norm, y, {&x, &weight},
        [sx = SavedTensor(xc), sr = SavedTensor(rstd), sw = SavedTensor(w), flat, nx, nw,
         param_dtype,
         wshape = weight.defined() ? weight.shape() : Shape{}](const Tensor& g_in, GradList& gi) {
          const Tensor xs = sx.get(), g = ops::cast_to(g_in, xs.dtype()).contiguous();
          const GradX gx = grad_x_of(gi, xs, nx);
          const Tensor gw =
              nw ? ops::make_tensor(Shape{flat[1]}, param_dtype, xs.device()) : Tensor();
          const Tensor gx_low = backward_low_copy(xs, flat, nx, gx, gi);
          ops::backend_of(xs).rms_norm_backward(
              rows_view(gx.t, flat), low_view(gx_low, flat), vector_view(gw, param_dtype),
              rows_view(g, flat), rows_view(xs, flat), ops::view_of(sr.get()),
              vector_view(sw.get(), param_dtype), gx.into_pending);
          if (gx_low.defined()) ops::attach_low_copy(gx.t, gx_low);
          if (nx && !gx.into_pending) autograd::accumulate(gi[0], gx.t);
          if (nw) gi[1] = gw.reshape(wshape);
        });
    node.accumulates = 1u;  // edge 0: x
  }
  return y;
}

}  // namespace ember
