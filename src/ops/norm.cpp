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
// [N·S, C, 1] (Note [Batch norm with the channels innermost] in src/cuda/norm.cu): the same
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

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  if (const auto c = ops::autocast(Op::batch_norm, {&x, &weight, &bias}))
    return batch_norm(c[0], running_mean, running_var, c[1], c[2], training, momentum, eps);
  ops::check_defined("batch_norm", x);
  const ops::OpScope op_scope(Op::batch_norm, x);
  ops::check_supported(Op::batch_norm, x);
  EMBER_CHECK(x.dim() >= 2, op_name(Op::batch_norm), ": input shape ", x.shape().to_string(),
              " (expected [N, C] or [N, C, ...])");
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
      Tensor y = batch_norm(cpu ? x.to(DType::f32) : x, rm, rv, wide(weight), wide(bias), training,
                            momentum, eps);
      if (training) {
        NoGradGuard no_grad;
        if (narrow_stats) Tensor(running_mean).copy_(rm);
        if (narrow_var) Tensor(running_var).copy_(rv);
      }
      return cpu ? y.to(x.dtype()) : y;
    }
  }
  const DType stat_dtype = half ? DType::f32 : x.dtype();  // of the per-channel values
  const backend::Backend& be = ops::backend_of(x);
  // Note [Memory formats]: a channels_last input is normalised as it lies, and so is its output.
  const MemoryFormat format = ops::format_of(x);
  Tensor xc, mean, invstd, out;
  {
    NoGradGuard no_grad;  // everything below is data for the kernels, not graph
    xc = x.contiguous(format);
    if (training) {
      mean = ops::make_tensor({c}, stat_dtype, x.device());
      Tensor var = ops::make_tensor({c}, stat_dtype, x.device());
      be.batch_norm_stats(ops::view_of(mean), ops::view_of(var), nc3(xc, format));
      invstd = rsqrt(add(var, eps));
      if (running_mean.defined() && running_var.defined()) {
        const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
        Tensor new_mean = add(mul(running_mean, 1.0 - momentum), mul(mean, momentum));
        Tensor new_var = add(mul(running_var, 1.0 - momentum), mul(var, momentum * unbias));
        Tensor(running_mean).copy_(new_mean);
        Tensor(running_var).copy_(new_var);
      }
    } else {
      mean = running_mean.contiguous().clone();  // a snapshot: the buffer may change later
      invstd = rsqrt(add(running_var, eps));
    }
    Tensor scale = weight.defined() ? mul(invstd, weight) : invstd;
    Tensor shift = neg(mul(mean, scale));
    if (bias.defined()) shift = add(shift, bias);
    scale = scale.contiguous();
    shift = shift.contiguous();
    out = ops::make_tensor(x.shape(), x.dtype(), x.device(), format);
    if (out.numel() > 0)
      be.channel_affine(nc3(out, format), nc3(xc, format), ops::view_of(scale), kNone, kNone,
                        ops::view_of(shift));
  }
  if (autograd::needs_grad(x, weight, bias)) {
    const bool nx = x.requires_grad(), nw = weight.defined() && weight.requires_grad();
    const bool nb = bias.defined() && bias.requires_grad();
    autograd::record(
        Op::batch_norm, out, {&x, &weight, &bias},
        [nx, nw, nb, training, m, format, sx = SavedTensor(xc), smean = SavedTensor(mean),
         sr = SavedTensor(invstd), sw = SavedTensor(weight)](const Tensor& g, GradList& gi) {
          const Tensor gc = g.to(sx.get().dtype()).contiguous(format), xs = sx.get(),
                       mu = smean.get(), r = sr.get(), w = sw.get();
          const backend::Backend& b = ops::backend_of(gc);
          const int64_t channels = mu.numel();
          Tensor sum_g = ops::make_tensor({channels}, mu.dtype(), gc.device());
          Tensor sum_gx = ops::make_tensor({channels}, mu.dtype(), gc.device());
          if (gc.numel() > 0) {
            b.batch_norm_backward_reduce(ops::view_of(sum_g), ops::view_of(sum_gx), nc3(gc, format),
                                         nc3(xs, format), ops::view_of(mu));
          } else {
            b.fill(ops::view_of(sum_g), 0.0);
            b.fill(ops::view_of(sum_gx), 0.0);
          }
          if (nw) gi[1] = mul(sum_gx, r);
          if (nb) gi[2] = sum_g;
          if (!nx) return;
          const Tensor wr = (w.defined() ? mul(w, r) : r).contiguous();  // A
          Tensor dx = ops::make_tensor(gc.shape(), gc.dtype(), gc.device(), format);
          if (dx.numel() == 0) {
            gi[0] = dx;
            return;
          }
          if (training) {
            const double inv_m = 1.0 / static_cast<double>(m);
            const Tensor coef_x =
                neg(mul(mul(wr, square(r)), mul(sum_gx, inv_m))).contiguous();  // B
            const Tensor shift =
                sub(neg(mul(mu, coef_x)), mul(wr, mul(sum_g, inv_m))).contiguous();  // D
            b.channel_affine(nc3(dx, format), nc3(gc, format), ops::view_of(wr), nc3(xs, format),
                             ops::view_of(coef_x), ops::view_of(shift));
          } else {
            b.channel_affine(nc3(dx, format), nc3(gc, format), ops::view_of(wr), kNone, kNone,
                             kNone);
          }
          gi[0] = dx;
        });
  }
  return out;
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
  if (gi[0].defined() && gi[0].dtype() == xs.dtype() && gi[0].device() == xs.device())
    return {gi[0], true};
  return {ops::make_tensor(xs.shape(), xs.dtype(), xs.device()), false};
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
  if (rows > 0)
    ops::backend_of(x).layer_norm_forward(rows_view(y, flat), ops::view_of(mu), ops::view_of(rstd),
                                          rows_view(xc, flat), vector_view(w, param_dtype),
                                          vector_view(b, param_dtype), eps);
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
          ops::backend_of(xs).layer_norm_backward(
              rows_view(gx.t, flat), vector_view(gw, param_dtype), vector_view(gb, param_dtype),
              rows_view(g, flat), rows_view(xs, flat), ops::view_of(sm.get()),
              ops::view_of(sr.get()), vector_view(sw.get(), param_dtype), gx.into_pending);
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
  if (rows > 0)
    ops::backend_of(x).rms_norm_forward(rows_view(y, flat), ops::view_of(rstd), rows_view(xc, flat),
                                        vector_view(w, param_dtype), e);
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
          ops::backend_of(xs).rms_norm_backward(
              rows_view(gx.t, flat), vector_view(gw, param_dtype), rows_view(g, flat),
              rows_view(xs, flat), ops::view_of(sr.get()), vector_view(sw.get(), param_dtype),
              gx.into_pending);
          if (nx && !gx.into_pending) autograd::accumulate(gi[0], gx.t);
          if (nw) gi[1] = gw.reshape(wshape);
        });
    node.accumulates = 1u;  // edge 0: x
  }
  return y;
}

}  // namespace ember
