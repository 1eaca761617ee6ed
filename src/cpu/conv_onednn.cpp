// src/cpu/conv_onednn.cpp — the CPU's library convolution slots (conv_library_forward,
// conv_library_backward_data, conv_library_backward_filter, conv_library_status): oneDNN's
// convolution primitives, opened at run time (onednn_loader.hpp).
//
// Geometry and layouts are ConvGeometry's (src/backend/conv_library.hpp): x [N, C, in...],
// weight [O, C/G, k...] (oneDNN's grouped form [G, O/G, C/G, k...] is the same memory), out
// [N, O, out...], all contiguous. Each primitive is created with format `any` for its
// activations and weights, so oneDNN picks its blocked layouts (nChw16c on AVX-512); the
// operands whose layout differs from ember's are reordered into a Pass-pool buffer before the
// call (inputs) or out of it after (outputs). A channels_last geometry's forward does the same:
// naming NHWC for its activations instead (no activation reorders) was measured slower on this
// AVX-512 machine (ResNet-18, batch 32 of 64x64, 1 thread, ONEDNN_VERBOSE over 5 steps: oneDNN
// chose brgconv for the NHWC forward, 504 ms against 330 ms for the blocked jit kernel, while
// the activation reorders it saved were 99 ms; 2026-12-05). Its backward data and backward
// weights do take the NHWC activations as they are (grad_out, x, grad_input): oneDNN keeps its
// jit kernels for them, and the reorders they saved made ResNet-18's channels_last step 1-4 %
// faster (280-287 against 284-294 ms at 1 thread, 155-162 against 163-185 at 2; 2026-12-07,
// docs/benchmarks.md). A primitive whose only
// implementation is oneDNN's reference kernel ("ref:any") is declined: im2col + OpenBLAS is far
// faster.
//
// Note [oneDNN primitives are built once]
// Creating a primitive (descriptor, implementation search, JIT) costs tens of microseconds
// to milliseconds, so each one is built once per (kind, geometry, dtype, bias, ReLU, thread
// count) and kept for the process, together with its reorders, in an OnednnCache
// (onednn_loader.hpp); a geometry oneDNN declines is remembered too, with its reason.
// oneDNN's own primitive cache (capacity 1024 by default, reported by conv_library_status)
// sits below and is not relied on.
//
// Note [oneDNN's threads are ember's]
// Debian's oneDNN 2.6 runs its parallel regions on OpenMP (libgomp), a second thread system
// beside ember's pool and OpenBLAS's. Three rules keep them from oversubscribing the cores
// (ARCHITECTURE §5): before each call the calling thread's OpenMP thread count is set to
// ember's (omp_set_num_threads, from oneDNN's own handle); ember's idle workers are parked
// first (park_workers, as before OpenBLAS); and the thread count is part of the primitive's
// key, since oneDNN fixes a primitive's work split when it is created. And OpenMP's idle
// threads block instead of spinning: the loader sets OMP_WAIT_POLICY=PASSIVE before libgomp
// loads, unless the user set it or GOMP_SPINCOUNT. With libgomp's default (spin a while, then
// block) the Fashion-MNIST CNN's step took 208 ms at 2 threads against 67 ms passive, on a
// 2-core machine where other processes were compiling: a spinning OpenMP thread takes the
// core that ember's pool, OpenBLAS or another process needs next.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/conv_small_plane.hpp"
#include "cpu/kernels.hpp"
#include "cpu/onednn_loader.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pass_buffer.hpp"
#include "ember/error.hpp"

namespace ember::cpu {

using backend::ConvBackwardArgs;
using backend::ConvForwardArgs;
using backend::ConvGeometry;
using backend::ConvLibraryStatus;

#if defined(EMBER_HAVE_ONEDNN_HEADERS)
namespace {

enum class Kind : int64_t { forward, backward_data, backward_weights };

// One argument of a primitive: ember's plain layout, the primitive's, and the reorder between
// them (user → primitive for inputs, primitive → user for outputs; null when they agree).
struct Operand {
  int arg = 0;  // DNNL_ARG_*
  bool output = false;
  dnnl_memory_desc_t user{}, prim{};
  dnnl_primitive_t reorder = nullptr;
};

// A built primitive and its reorders, or the reason oneDNN declined the geometry.
struct Primitive {
  dnnl_primitive_t prim = nullptr;
  std::vector<Operand> operands;
  dnnl_memory_desc_t scratchpad{};
  size_t scratchpad_bytes = 0;
  std::string impl;   // oneDNN's implementation name ("brg:avx512_core", "jit:avx2", ...)
  std::string error;  // non-empty: declined
};

const OnednnApi& api() { return onednn(); }

// A failed oneDNN call while building: the geometry is declined with its message.
using Declined = OnednnDeclined;
void check(dnnl_status_t s, const char* what) { onednn_check(s, what); }

dnnl_format_tag_t plain_tag(int ndims) {
  switch (ndims) {
    case 1: return dnnl_a;
    case 3: return dnnl_abc;
    case 4: return dnnl_abcd;
    case 5: return dnnl_abcde;
    default: return dnnl_abcdef;
  }
}

// Channels innermost: activations [N, C, spatial...] as NWC / NHWC / NDHWC, weights
// [O, I, k...] as OWI / OHWI / ODHWI and grouped [G, O/G, I/G, k...] with I/G innermost.
dnnl_format_tag_t channels_last_tag(int ndims, bool grouped) {
  if (grouped) return ndims == 5 ? dnnl_abdec : ndims == 6 ? dnnl_abdefc : dnnl_abdc;
  return ndims == 3 ? dnnl_acb : ndims == 4 ? dnnl_acdb : dnnl_acdeb;
}

// ember's layout of an operand (`any`: the primitive's choice).
dnnl_memory_desc_t md(std::vector<int64_t> dims, DType dtype, bool any, bool channels_last = false,
                      bool grouped = false) {
  dnnl_memory_desc_t d{};
  const int n = static_cast<int>(dims.size());
  const dnnl_format_tag_t tag = any             ? dnnl_format_tag_any
                                : channels_last ? channels_last_tag(n, grouped)
                                                : plain_tag(n);
  check(api().memory_desc_init_by_tag(&d, n, dims.data(), onednn_dtype(dtype), tag),
        "dnnl_memory_desc_init_by_tag");
  return d;
}

// The descriptors of one convolution geometry (format `any` where oneDNN may choose).
struct Descs {
  dnnl_memory_desc_t src, weights, bias, dst;
  dnnl_memory_desc_t src_user, weights_user, dst_user;
  dnnl_dims_t strides{}, dilates{}, pad_l{}, pad_r{};
};

Descs descs_of(const ConvGeometry& g) {
  Descs d{};
  const int s = g.spatial;
  std::vector<int64_t> src{g.batch, g.in_channels}, dst{g.batch, g.out_channels}, w;
  if (g.groups > 1)
    w = {g.groups, g.out_channels / g.groups, g.in_channels / g.groups};
  else
    w = {g.out_channels, g.in_channels};
  for (int i = 0; i < s; ++i) {
    src.push_back(g.input[i]);
    dst.push_back(g.output[i]);
    w.push_back(g.kernel[i]);
    d.strides[i] = g.stride[i];
    d.dilates[i] = g.dilation[i] - 1;  // oneDNN counts the gaps
    d.pad_l[i] = g.padding[i];
    // What makes oneDNN's output size formula give ember's (floor) size; may be below pad_l.
    d.pad_r[i] = (g.output[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dilation[i] + 1 -
                 g.input[i] - g.padding[i];
  }
  d.src = md(src, g.dtype, true);
  d.weights = md(w, g.dtype, true);
  d.dst = md(dst, g.dtype, true);
  d.bias = md({g.out_channels}, g.dtype, false);
  d.src_user = md(src, g.dtype, false, g.channels_last);
  d.weights_user = md(w, g.dtype, false, g.channels_last, g.groups > 1);
  d.dst_user = md(dst, g.dtype, false, g.channels_last);
  return d;
}

using PdGuard = OnednnPd;
using AttrGuard = OnednnAttr;

// The primitive's layout for `what`, and the reorder from / to ember's layout `user`.
// index: which of the primitive's descriptors of that kind (the bias is weights' second).
Operand operand(const dnnl_primitive_desc_t pd, dnnl_query_t what, int arg, bool output,
                const dnnl_memory_desc_t& user, int index = 0) {
  Operand o;
  o.arg = arg;
  o.output = output;
  o.user = user;
  o.prim = *api().primitive_desc_query_md(pd, what, index);
  if (api().memory_desc_equal(&o.user, &o.prim)) return o;
  PdGuard r;
  const dnnl_memory_desc_t& from = output ? o.prim : o.user;
  const dnnl_memory_desc_t& to = output ? o.user : o.prim;
  check(api().reorder_primitive_desc_create(&r.pd, &from, api().engine, &to, api().engine, nullptr),
        "reorder");
  check(api().primitive_create(&o.reorder, r.pd), "reorder primitive");
  return o;
}

// Builds the primitive of `kind` for `g` (Note [oneDNN primitives are built once]).
void build(Primitive& p, Kind kind, const ConvGeometry& g, bool bias, bool relu, bool training) {
  Descs d = descs_of(g);
  AttrGuard attr;
  check(api().attr_create(&attr.attr), "dnnl_primitive_attr_create");
  check(api().attr_set_scratchpad_mode(attr.attr, dnnl_scratchpad_mode_user), "scratchpad mode");
  if (relu) {
    check(api().post_ops_create(&attr.ops), "dnnl_post_ops_create");
    check(api().post_ops_append_eltwise(attr.ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu");
    check(api().attr_set_post_ops(attr.attr, attr.ops), "post ops");
  }
  const dnnl_memory_desc_t* bias_md = bias ? &d.bias : nullptr;
  if (g.channels_last && kind != Kind::forward) {  // the backward on NHWC itself (file comment)
    d.src = d.src_user;
    d.dst = d.dst_user;
  }
  dnnl_convolution_desc_t fwd{};
  check(
      api().conv_forward_desc_init(&fwd, training ? dnnl_forward_training : dnnl_forward_inference,
                                   dnnl_convolution_direct, &d.src, &d.weights, bias_md, &d.dst,
                                   d.strides, d.dilates, d.pad_l, d.pad_r),
      "convolution forward descriptor");
  PdGuard hint, pd;
  if (kind == Kind::forward) {
    check(api().primitive_desc_create(&pd.pd, &fwd, attr.attr, api().engine, nullptr),
          "convolution forward");
  } else {
    check(api().primitive_desc_create(&hint.pd, &fwd, nullptr, api().engine, nullptr),
          "convolution forward (the backward's hint)");
    dnnl_convolution_desc_t bwd{};
    if (kind == Kind::backward_data)
      check(api().conv_backward_data_desc_init(&bwd, dnnl_convolution_direct, &d.src, &d.weights,
                                               &d.dst, d.strides, d.dilates, d.pad_l, d.pad_r),
            "convolution backward data descriptor");
    else
      check(api().conv_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &d.src, &d.weights,
                                                  bias_md, &d.dst, d.strides, d.dilates, d.pad_l,
                                                  d.pad_r),
            "convolution backward weights descriptor");
    check(
        api().primitive_desc_create(&pd.pd, &bwd, attr.attr, api().engine, hint.pd),
        kind == Kind::backward_data ? "convolution backward data" : "convolution backward weights");
  }
  const char* impl = nullptr;
  check(api().primitive_desc_query(pd.pd, dnnl_query_impl_info_str, 0, &impl), "impl query");
  p.impl = impl ? impl : "?";
  if (p.impl.rfind("ref", 0) == 0)
    throw Declined{"oneDNN has only its reference kernel (" + p.impl + ") for this convolution"};
  switch (kind) {
    case Kind::forward:
      p.operands.push_back(operand(pd.pd, dnnl_query_src_md, DNNL_ARG_SRC, false, d.src_user));
      p.operands.push_back(
          operand(pd.pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, false, d.weights_user));
      p.operands.push_back(operand(pd.pd, dnnl_query_dst_md, DNNL_ARG_DST, true, d.dst_user));
      break;
    case Kind::backward_data:
      p.operands.push_back(
          operand(pd.pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, false, d.dst_user));
      p.operands.push_back(
          operand(pd.pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, false, d.weights_user));
      p.operands.push_back(
          operand(pd.pd, dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC, true, d.src_user));
      break;
    case Kind::backward_weights:
      p.operands.push_back(operand(pd.pd, dnnl_query_src_md, DNNL_ARG_SRC, false, d.src_user));
      p.operands.push_back(
          operand(pd.pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, false, d.dst_user));
      p.operands.push_back(
          operand(pd.pd, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS, true, d.weights_user));
      break;
  }
  if (bias && kind != Kind::backward_data) {
    const bool fwd_kind = kind == Kind::forward;
    p.operands.push_back(
        operand(pd.pd, fwd_kind ? dnnl_query_weights_md : dnnl_query_diff_weights_md,
                fwd_kind ? DNNL_ARG_BIAS : DNNL_ARG_DIFF_BIAS, !fwd_kind, d.bias, 1));
  }
  p.scratchpad = *api().primitive_desc_query_md(pd.pd, dnnl_query_scratchpad_md, 0);
  p.scratchpad_bytes = api().memory_desc_get_size(&p.scratchpad);
  check(api().primitive_create(&p.prim, pd.pd), "primitive");
}

std::vector<int64_t> key_of(Kind kind, const ConvGeometry& g, bool bias, bool relu, bool training,
                            int threads) {
  std::vector<int64_t> k = backend::key_of(g);
  k.insert(k.end(), {static_cast<int64_t>(kind), bias, relu, training, threads});
  return k;
}

// The cached primitive (built on first use); never null (its error says when declined).
const Primitive& primitive_for(Kind kind, const ConvGeometry& g, bool bias, bool relu,
                               bool training) {
  auto& c = OnednnCache<Primitive>::get();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::unique_ptr<Primitive>& slot =
      c.entries[key_of(kind, g, bias, relu, training, num_threads())];
  if (!slot) {
    slot = std::make_unique<Primitive>();
    try {
      build(*slot, kind, g, bias, relu, training);
    } catch (const Declined& d) {
      slot->error = d.why;
    }
  }
  return *slot;
}

// Why the slots decline `g` before asking oneDNN ("" when they may try it).
std::string precheck(const ConvGeometry& g) {
  std::string why;
  if (!onednn_api(&why)) return why;
  if (onednn_dtype(g.dtype) == dnnl_data_type_undef)
    return "dtype " + std::string(dtype_name(g.dtype)) +
           " (oneDNN convolutions take f32, bf16, f16)";
  return "";
}

using Buffer = PassBuffer;

// A memory object over `data` for one call.
struct Memory : OnednnMemory {
  Memory(const dnnl_memory_desc_t& d, void* data) : OnednnMemory(d, data, "conv") {}
};

void run(dnnl_primitive_t prim, const std::vector<dnnl_exec_arg_t>& args, const char* what) {
  onednn_execute(prim, args, "conv", what);
}

// Runs `p` on ember's buffers `data` (one per operand, in p.operands' order), reordering
// where the layouts differ (Note [oneDNN's threads are ember's] for the thread count).
void execute(const Primitive& p, const std::vector<void*>& data) {
  onednn_take_threads();
  std::vector<std::unique_ptr<Buffer>> staged;
  std::vector<std::unique_ptr<Memory>> mems;
  std::vector<dnnl_exec_arg_t> args;
  std::vector<std::pair<const Operand*, std::pair<dnnl_memory_t, dnnl_memory_t>>> outputs;
  for (size_t i = 0; i < p.operands.size(); ++i) {
    const Operand& o = p.operands[i];
    mems.push_back(std::make_unique<Memory>(o.user, data[i]));
    dnnl_memory_t user = mems.back()->get();
    if (!o.reorder) {
      args.push_back({o.arg, user});
      continue;
    }
    staged.push_back(std::make_unique<Buffer>(api().memory_desc_get_size(&o.prim)));
    mems.push_back(std::make_unique<Memory>(o.prim, staged.back()->get()));
    dnnl_memory_t prim = mems.back()->get();
    args.push_back({o.arg, prim});
    if (o.output)
      outputs.push_back({&o, {prim, user}});
    else
      run(o.reorder, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, prim}}, "reorder");
  }
  Buffer scratch(p.scratchpad_bytes);
  std::unique_ptr<Memory> scratch_mem;
  if (p.scratchpad_bytes) {
    scratch_mem = std::make_unique<Memory>(p.scratchpad, scratch.get());
    args.push_back({DNNL_ARG_SCRATCHPAD, scratch_mem->get()});
  }
  run(p.prim, args, "convolution");
  for (const auto& [o, m] : outputs)
    run(o->reorder, {{DNNL_ARG_FROM, m.first}, {DNNL_ARG_TO, m.second}}, "reorder");
  api().stream_wait(onednn_thread_stream());
}

}  // namespace

ConvLibraryStatus conv_library_forward(const ConvForwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return ConvLibraryStatus::declined(why);
  if (small_plane(g)) {  // Note [Convolutions onto small planes]
    small_plane_forward(a);
    return ConvLibraryStatus::done();
  }
  const bool bias = a.bias != nullptr, training = a.need_grad_input || a.need_grad_weight;
  const Primitive& p = primitive_for(Kind::forward, g, bias, a.relu, training);
  if (!p.error.empty()) return ConvLibraryStatus::declined("oneDNN forward: " + p.error);
  // The backward this forward promises (ConvForwardArgs): built now, so a decline is now.
  if (a.need_grad_input) {
    const Primitive& b = primitive_for(Kind::backward_data, g, false, false, true);
    if (!b.error.empty()) return ConvLibraryStatus::declined("oneDNN backward data: " + b.error);
  }
  if (a.need_grad_weight) {
    const Primitive& b = primitive_for(Kind::backward_weights, g, bias, false, true);
    if (!b.error.empty()) return ConvLibraryStatus::declined("oneDNN backward weights: " + b.error);
  }
  std::vector<void*> data = {const_cast<void*>(a.x), const_cast<void*>(a.weight), a.out};
  if (bias) data.push_back(const_cast<void*>(a.bias));
  execute(p, data);
  return ConvLibraryStatus::done();
}

ConvLibraryStatus conv_library_backward_data(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return ConvLibraryStatus::declined(why);
  if (a.accumulate)
    return ConvLibraryStatus::declined("oneDNN's backward data overwrites its output (no sum)");
  if (small_plane(g)) {  // Note [Convolutions onto small planes]
    small_plane_backward_data(a);
    return ConvLibraryStatus::done();
  }
  const Primitive& p = primitive_for(Kind::backward_data, g, false, false, true);
  if (!p.error.empty()) return ConvLibraryStatus::declined("oneDNN backward data: " + p.error);
  execute(p, {const_cast<void*>(a.grad_out), const_cast<void*>(a.weight), a.grad_input});
  return ConvLibraryStatus::done();
}

ConvLibraryStatus conv_library_backward_filter(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return ConvLibraryStatus::declined(why);
  if (small_plane(g)) {  // Notes in conv_small_plane.cpp
    small_plane_weight_grad(a);
    return ConvLibraryStatus::done();
  }
  const bool bias = a.grad_bias != nullptr;
  const Primitive& p = primitive_for(Kind::backward_weights, g, bias, false, true);
  if (!p.error.empty()) return ConvLibraryStatus::declined("oneDNN backward weights: " + p.error);
  std::vector<void*> data = {const_cast<void*>(a.x), const_cast<void*>(a.grad_out), a.grad_weight};
  if (bias) data.push_back(a.grad_bias);
  execute(p, data);
  return ConvLibraryStatus::done();
}

const char* conv_library_status(int) {
  thread_local std::string text;
  std::string why;
  const OnednnApi* a = onednn_api(&why);
  if (!a) return (text = why).c_str();
  int capacity = -1;
  a->get_primitive_cache_capacity(&capacity);
  text = a->version_text + ", primitive cache " + std::to_string(capacity);
  return text.c_str();
}

#else  // built without oneDNN's headers

namespace {
constexpr const char* kNoHeaders = "ember was built without oneDNN's headers (oneapi/dnnl/dnnl.h)";
}
ConvLibraryStatus conv_library_forward(const ConvForwardArgs&) {
  return ConvLibraryStatus::declined(kNoHeaders);
}
ConvLibraryStatus conv_library_backward_data(const ConvBackwardArgs&) {
  return ConvLibraryStatus::declined(kNoHeaders);
}
ConvLibraryStatus conv_library_backward_filter(const ConvBackwardArgs&) {
  return ConvLibraryStatus::declined(kNoHeaders);
}
const char* conv_library_status(int) { return kNoHeaders; }

#endif

}  // namespace ember::cpu
