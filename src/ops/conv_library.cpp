// src/ops/conv_library.cpp — the library route of the convolutions (conv_library.hpp) and
// the public switches of include/ember/conv_backend.hpp.
//
// Note [Which convolution path runs]
// conv1d, conv2d and conv3d check their arguments, then offer the convolution to the device's
// library through the conv_library_forward slot: oneDNN on the CPU (src/cpu/conv_onednn.cpp),
// cuDNN on CUDA (src/cuda/conv_cudnn.cpp). The slot declines (with a reason, nothing written)
// when its library is missing, the dtype or geometry is one it does not take, or it could
// not also run the backward the call will need; then the op runs its own im2col + GEMM path,
// and conv_fallback_reason() keeps the reason. A forward the library ran records a node whose
// backward asks the library for the input and weight gradients (the bias gradient comes with
// the weight's) and falls back to the op's own backward for a part it declines, so a
// convolution is never left without a gradient. set_conv_library(false) (EMBER_CONV_IM2COL=1)
// takes the im2col path everywhere: the reference the library paths are tested against.
// conv1d runs as conv2d over a unit height and reaches the library as a 1-D geometry.
#include "ops/conv_library.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/alloc_trace.hpp"
#include "ember/conv_backend.hpp"
#include "ember/runtime.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

thread_local ConvBackend t_last_backend = ConvBackend::none;
thread_local std::string t_fallback_reason;

std::atomic<bool>& library_on() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("EMBER_CONV_IM2COL");
    return !(v && std::strcmp(v, "1") == 0);
  }();
  return on;
}

// Note [cuDNN convolutions by default]
// GPU convolutions go to cuDNN unless set_cudnn_convolutions(false) or EMBER_CONV_CUDNN=0. They
// were opt-in from 2026-12-04 to 2026-12-07 while two suite failures were open: the first
// H200 run found a captured CNN step 1 ulp from its eager step (engines with atomics, since
// always skipped) and ResNet-18's f32 gradients up to 2.6e-2 from the CPU's; on the H100
// (2026-12-05) CudaResNet.Resnet18ForwardBackwardMatchesCpu had conv1's weight gradient 2.5 %
// from the CPU's and MemoryEstimateCuda.CnnWithinFifteenPercent missed by 17.2 %. The first
// came from f32 engines cuDNN notes as FFT, Winograd or reduced-precision reductions, now
// refused for f32 without TF32 (refusal() in src/cuda/conv_cudnn.cpp); the second from the
// dry run tracing im2col's columns (Note [A dry run for a cuDNN target]). With both fixed the
// whole GPU suite passed with cuDNN on (H100, 2026-12-07: 5,553 run, 0 failed), and cuDNN ran
// ResNet-18's bf16 channels_last step in 9.9 ms against 34.9 with im2col.
// But f32 without TF32 leaves cuDNN only its precise engines, and on them the Fashion-MNIST
// CNN's captured step (f32, batch 128 of 28×28) took 0.805 ms on the H200 (2026-12-07) against
// 0.52 on im2col + cuBLAS (H100, 2026-12-06; PyTorch's graph 0.68-0.70 on both): so the default
// (CudnnConvolutions::automatic) gives cuDNN 16-bit convolutions and f32 ones where TF32 is
// allowed, and keeps f32 without TF32 on im2col; CudnnConvolutions::always (EMBER_CONV_CUDNN=1)
// gives it every dtype.
std::atomic<CudnnConvolutions>& cudnn_mode() {
  static std::atomic<CudnnConvolutions> mode = [] {
    const char* v = std::getenv("EMBER_CONV_CUDNN");
    if (v && std::strcmp(v, "0") == 0) return CudnnConvolutions::off;
    if (v && std::strcmp(v, "1") == 0) return CudnnConvolutions::always;
    return CudnnConvolutions::automatic;
  }();
  return mode;
}

// Why the GPU's cuDNN does not take a convolution of `dtype` ("" when it may).
std::string cudnn_declines(DType dtype) {
  switch (cudnn_mode().load(std::memory_order_relaxed)) {
    case CudnnConvolutions::off:
      return "cuDNN convolutions are switched off (set_cudnn_convolutions(false) or "
             "EMBER_CONV_CUDNN=0; Note [cuDNN convolutions by default])";
    case CudnnConvolutions::automatic:
      if (dtype == DType::f32 && !detail::allow_tf32())
        return "f32 without TF32 runs im2col + cuBLAS by default, faster than cuDNN's precise "
               "engines (CudnnConvolutions::always or EMBER_CONV_CUDNN=1 takes cuDNN; Note "
               "[cuDNN convolutions by default])";
      return "";
    case CudnnConvolutions::always: return "";
  }
  return "";
}

void note(ConvBackend backend, std::string reason) {
  t_last_backend = backend;
  t_fallback_reason = std::move(reason);
}

backend::ConvBackwardArgs backward_args(const backend::ConvGeometry& g, const Tensor& grad_out) {
  backend::ConvBackwardArgs a;
  a.geo = g;
  a.grad_out = grad_out.data_ptr();
  return a;
}

// Whether a convolution may go to the library at all (switched on, cuDNN opted into, operands
// not empty); when not, the reason is noted for conv_fallback_reason().
bool offered(const ops::ConvLibraryCall& c) {
  if (!library_on().load(std::memory_order_relaxed)) {
    note(ConvBackend::im2col,
         "the library path is switched off (set_conv_library(false) or EMBER_CONV_IM2COL=1)");
    return false;
  }
  if (ops::library_convolution_in_dry_run(c.x->device(), c.geo.dtype)) {
    note(ConvBackend::im2col,
         "a memory estimate's dry run for a cuDNN target (Note [A dry run for a cuDNN target])");
    return false;
  }
  // core::planning_device: a memory estimate's CPU dry run for a GPU takes the GPU's path.
  if (core::planning_device(c.x->device()).is_cuda()) {
    if (std::string why = cudnn_declines(c.geo.dtype); !why.empty()) {
      note(ConvBackend::im2col, std::move(why));
      return false;
    }
  }
  if (c.out_shape.numel() == 0 || c.x->numel() == 0) {
    note(ConvBackend::im2col, "an empty input or output (nothing for a library to compute)");
    return false;
  }
  return true;
}

// Note [Memory formats]: a channels_last geometry reads and writes every buffer NHWC (NDHWC).
MemoryFormat format_of_call(const ops::ConvLibraryCall& c) {
  return !c.geo.channels_last      ? MemoryFormat::contiguous
         : c.out_shape.size() == 5 ? MemoryFormat::channels_last_3d
                                   : MemoryFormat::channels_last;
}

// The gradients a library backward left undefined, from the op's own path (which reads
// contiguous tensors).
void fill_from_fallback(const ops::ConvFallback& fallback, const Tensor& grad_out, const Tensor& x,
                        const Tensor& weight, bool need_x, bool need_w, GradList& gi) {
  if (!need_x && !need_w) return;
  const auto plain = [](const Tensor& t) { return t.defined() ? t.contiguous() : t; };
  ops::ConvGradients r = fallback(grad_out.contiguous(), plain(x), plain(weight), need_x, need_w);
  if (need_x) gi[0] = r.input;
  if (need_w) gi[1] = r.weight;
}

}  // namespace

namespace ops {

// Note [A dry run for a cuDNN target]
// estimate_training_memory computes its dry run on the CPU while ops plan for the target
// (core::planning_device). A GPU target whose convolutions cuDNN takes allocates for each one
// its output and, in the backward, its gradients, as the op's own im2col path does, but none of
// that path's temporaries (the columns, split-K partials, the weight with the bias folded in:
// cuDNN's workspace is an assumption the estimate lists). So the dry run computes such a
// convolution on the im2col path (not oneDNN's, which the target does not have) and makes
// those temporaries with the trace paused (make_scratch in conv.cpp). Counting them put a
// CNN's estimate 17.2 % above its cuDNN step on the H100 (2026-12-05).
bool library_convolution_in_dry_run(Device actual, DType dtype) {
  return !actual.is_cuda() && core::planning_device(actual).is_cuda() &&
         library_on().load(std::memory_order_relaxed) && cudnn_declines(dtype).empty();
}

namespace {

// Note [A convolution's input gradient added where it lands]
// A ResNet block's input feeds its first convolution and the shortcut, so its gradient is a
// sum: the shortcut's arrives first (the block's last batch norm runs its backward before the
// first convolution's) and the engine then added the convolution's input gradient to it in a
// pass of its own (ResNet-50: 16 adds a step, 1.4 ms of 25 on an H100). A plain convolution's
// node therefore accumulates into x's pending gradient (Note [Gradients accumulate where they
// land] in src/autograd/engine.cpp): handed that buffer in the layout the call writes, it asks
// the backend's backward data to add into it (cuDNN's beta = 1: the sum formed in the
// convolution's own accumulator, rounded once); a slot that declines that (oneDNN, a graph no
// cuDNN engine takes, the im2col path) leaves the plain backward and autograd::accumulate.

// The autograd node of a convolution the library ran (transposed: a transposed one, Note
// [Transposed convolutions in the library]): the input's and the weight's gradients from the
// library's slots in the direction's roles, the bias's (a plain convolution's own) with the
// weight's, and `fallback` for a part a slot declines.
void record_library_backward(const ConvLibraryCall& c, Tensor& out, ConvFallback fallback,
                             bool transposed) {
  const Tensor& x = *c.x;
  const Tensor& weight = *c.weight;
  const bool need_x = autograd::needs_grad(x), need_w = autograd::needs_grad(weight);
  const bool need_b = !transposed && c.bias->defined() && autograd::needs_grad(*c.bias);
  const std::vector<const Tensor*> inputs =
      transposed ? std::vector<const Tensor*>{c.x, c.weight} : std::vector{c.x, c.weight, c.bias};
  autograd::Node& node = autograd::record(
      c.op, out, inputs,
      [geo = c.geo, format = format_of_call(c), transposed, need_x, need_w, need_b,
       fallback = std::move(fallback), xshape = x.shape(), wshape = weight.shape(),
       sx = SavedTensor(need_w ? c.xc : Tensor()),
       sw = SavedTensor(need_x ? c.wc : Tensor())](const Tensor& g, GradList& gi) {
        const Tensor gc = g.contiguous(format);
        const backend::Backend& be = backend_of(gc);
        const Tensor xs = sx.get(), ws = sw.get();
        bool fallback_x = false, fallback_w = false;
        // x's pending gradient, when the engine handed it over (accumulates)
        Tensor pending = std::move(gi[0]);
        gi[0] = Tensor();
        if (need_x && !transposed && pending.defined() && pending.dtype() == gc.dtype() &&
            pending.device() == gc.device() && pending.is_contiguous(format)) {
          backend::ConvBackwardArgs b = backward_args(geo, gc);
          b.weight = ws.data_ptr();
          b.grad_input = pending.data_ptr();
          b.accumulate = true;
          if (be.conv_library_backward_data(b).handled) gi[0] = std::move(pending);
        }
        if (need_x && !gi[0].defined()) {
          Tensor gx = make_tensor(xshape, gc.dtype(), gc.device(), format);
          if (transposed) {  // the convolution's forward of grad_out
            backend::ConvForwardArgs f;
            f.geo = geo;
            f.x = gc.data_ptr();
            f.weight = ws.data_ptr();
            f.out = gx.data_ptr();
            fallback_x = !be.conv_library_forward(f).handled;
          } else {
            backend::ConvBackwardArgs b = backward_args(geo, gc);
            b.weight = ws.data_ptr();
            b.grad_input = gx.data_ptr();
            fallback_x = !be.conv_library_backward_data(b).handled;
          }
          if (!fallback_x) gi[0] = gx;
        }
        if (need_w) {
          Tensor gw = make_tensor(wshape, gc.dtype(), gc.device(), format);
          Tensor gb = need_b ? make_tensor({geo.out_channels}, gc.dtype(), gc.device()) : Tensor();
          // Transposed, grad_out and x swap roles: the convolution's input is the op's
          // output.
          backend::ConvBackwardArgs b = backward_args(geo, transposed ? xs : gc);
          b.x = transposed ? gc.data_ptr() : xs.data_ptr();
          b.grad_weight = gw.data_ptr();
          b.grad_bias = need_b ? gb.data_ptr() : nullptr;
          fallback_w = !be.conv_library_backward_filter(b).handled;
          if (!fallback_w) {
            gi[1] = gw;
            if (need_b) gi[2] = gb;
          }
        }
        fill_from_fallback(fallback, gc, xs, ws, fallback_x, fallback_w, gi);
        if (need_b && !gi[2].defined()) {
          Shape dims{0};
          for (int d = 2; d < gc.dim(); ++d) dims.push_back(d);
          gi[2] = sum(gc, dims);
        }
        if (pending.defined()) {  // not added by the slot: added here
          autograd::accumulate(pending, gi[0]);
          gi[0] = std::move(pending);
        }
      });
  // Note [A convolution's input gradient added where it lands]
  if (need_x && !transposed) node.accumulates = 1u;  // edge 0: x
}

}  // namespace

Tensor conv_through_library(const ConvLibraryCall& c, ConvFallback fallback) {
  const Tensor& x = *c.x;
  const MemoryFormat format = format_of_call(c);
  Tensor out = offered(c) ? make_tensor(c.out_shape, x.dtype(), x.device(), format) : Tensor();
  if (!out.defined()) return out;
  const Tensor& weight = *c.weight;
  const Tensor& bias = *c.bias;
  const bool need_x = autograd::needs_grad(x), need_w = autograd::needs_grad(weight);
  const bool need_b = bias.defined() && autograd::needs_grad(bias);
  backend::ConvForwardArgs a;
  a.geo = c.geo;
  a.x = c.xc.data_ptr();
  a.weight = c.wc.data_ptr();
  Tensor bias_c;
  if (bias.defined()) {
    NoGradGuard no_grad;  // data for the slot, not graph
    bias_c = bias.contiguous();
  }
  a.bias = bias_c.defined() ? bias_c.data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.relu = c.relu;
  a.need_grad_input = need_x;
  a.need_grad_weight = need_w || need_b;
  const backend::ConvLibraryStatus st = backend_of(x).conv_library_forward(a);
  if (!st.handled) {
    note(ConvBackend::im2col, st.reason);
    return Tensor();
  }
  note(x.device().is_cuda() ? ConvBackend::cudnn : ConvBackend::onednn, "");
  if (!(need_x || need_w || need_b)) return out;
  EMBER_CHECK(!c.relu, op_name(c.op), ": the fused ReLU has no backward here (internal)");
  record_library_backward(c, out, std::move(fallback), false);
  return out;
}

// Note [Transposed convolutions in the library]
// conv_transpose{1,2,3}d(x, W) is the input gradient of the convolution conv(y, W) whose input
// y has the transposed op's output shape and whose output has x's (Note [Transposed convolution
// as conv2d's input gradient] in conv.cpp). So the library runs it with the three convolution
// slots in other roles, on that convolution's geometry:
//   forward       y      = backward_data(grad_out = x, weight = W)
//   grad_x               = forward(x = grad_y, weight = W)
//   grad_W               = backward_filter(x = grad_y, grad_out = x)
// The geometry exists only where the convolution formula maps y's size back to x's: an
// output_padding of at least the stride (allowed when it is below the dilation) adds rows no
// input feeds, and the op's own path runs. The bias is the op's (one broadcast add).
Tensor conv_transpose_through_library(const ConvLibraryCall& c, ConvFallback fallback) {
  const Tensor& x = *c.x;
  const backend::ConvGeometry& geo = c.geo;
  for (int i = 0; i < geo.spatial; ++i) {
    const int64_t span = geo.dilation[i] * (geo.kernel[i] - 1) + 1;
    const int64_t padded = geo.input[i] + 2 * geo.padding[i];
    if (span > padded || (padded - span) / geo.stride[i] + 1 != geo.output[i]) {
      note(ConvBackend::im2col,
           "an output_padding at least the stride (rows no input feeds: no convolution's input "
           "gradient has that shape)");
      return Tensor();
    }
  }
  const MemoryFormat format = format_of_call(c);
  Tensor out = offered(c) ? make_tensor(c.out_shape, x.dtype(), x.device(), format) : Tensor();
  if (!out.defined()) return out;
  const Tensor& weight = *c.weight;
  backend::ConvBackwardArgs a = backward_args(geo, c.xc);
  a.weight = c.wc.data_ptr();
  a.grad_input = out.data_ptr();
  const backend::ConvLibraryStatus st = backend_of(x).conv_library_backward_data(a);
  if (!st.handled) {
    note(ConvBackend::im2col, st.reason);
    return Tensor();
  }
  note(x.device().is_cuda() ? ConvBackend::cudnn : ConvBackend::onednn, "");
  if (autograd::needs_grad(x, weight)) record_library_backward(c, out, std::move(fallback), true);
  return out;
}

ConvGradients composite_conv_grads(
    const Tensor& grad_out, const Tensor& x, const Shape& x_shape, const Tensor& weight,
    const Shape& w_shape, bool need_x, bool need_w,
    const std::function<Tensor(const Tensor&, const Tensor&)>& composite) {
  struct GradMode {
    bool previous = grad_mode_enabled();
    GradMode() { set_grad_mode(true); }
    ~GradMode() { set_grad_mode(previous); }
  } grad_mode;
  const TensorOptions o{.dtype = grad_out.dtype(), .device = grad_out.device()};
  Tensor xd = x.defined() ? x.detach() : zeros(x_shape, o);
  Tensor wd = weight.defined() ? weight.detach() : zeros(w_shape, o);
  xd.requires_grad_(need_x);
  wd.requires_grad_(need_w);
  const Tensor y = composite(xd, wd);
  std::vector<Tensor> inputs;
  if (need_x) inputs.push_back(xd);
  if (need_w) inputs.push_back(wd);
  const std::vector<Tensor> g = grad({y}, inputs, {grad_out});
  return {need_x ? g[0] : Tensor(), need_w ? g.back() : Tensor()};
}

MemoryFormat conv_memory_format(const Tensor& x, const Tensor& weight) {
  const MemoryFormat last = x.dim() == 4   ? MemoryFormat::channels_last
                            : x.dim() == 5 ? MemoryFormat::channels_last_3d
                                           : MemoryFormat::contiguous;
  if (last == MemoryFormat::contiguous || weight.dim() != x.dim()) return MemoryFormat::contiguous;
  return x.suggest_memory_format() == last || weight.suggest_memory_format() == last
             ? last
             : MemoryFormat::contiguous;
}

}  // namespace ops

ConvBackend conv_last_backend() { return t_last_backend; }

std::string conv_fallback_reason() { return t_fallback_reason; }

void set_conv_library(bool on) { library_on().store(on, std::memory_order_relaxed); }

bool conv_library() { return library_on().load(std::memory_order_relaxed); }

void set_cudnn_convolutions(CudnnConvolutions mode) {
  cudnn_mode().store(mode, std::memory_order_relaxed);
}

CudnnConvolutions cudnn_convolution_mode() { return cudnn_mode().load(std::memory_order_relaxed); }

void set_cudnn_convolutions(bool on) {
  set_cudnn_convolutions(on ? CudnnConvolutions::always : CudnnConvolutions::off);
}

bool cudnn_convolutions() { return cudnn_convolution_mode() != CudnnConvolutions::off; }

std::string conv_library_status(Device device) {
  try {
    return backend::backend_for(device.type).conv_library_status(device.index);
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace ember
