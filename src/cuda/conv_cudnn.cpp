// src/cuda/conv_cudnn.cpp — the CUDA library convolution slots (conv_library_forward,
// conv_library_backward_data, conv_library_backward_filter, conv_library_status): cuDNN's
// convolution engines, built through its backend graph API (the loader and the checked
// descriptors of cudnn_loader.hpp and cudnn_backend.hpp, as the fused attention uses).
//
// Geometry and layouts are ConvGeometry's (src/backend/conv_library.hpp): x [N, C, in...],
// weight [O, C/G, k...], out [N, O, out...], contiguous, or all channels_last (NHWC, NDHWC:
// cuDNN takes the strides as they are). cuDNN infers the groups from the
// channel counts of x and the weight. Its convolutions have 2 or 3 spatial dims, so a 1-D one
// runs as 2-D over a unit height.
//
// Note [The convolution graphs]
//   forward          y = conv_fwd(x, w)                       (one operation)
//   fused forward    v = conv_fwd(x, w) (f32, virtual); v = v + bias (pointwise ADD, bias
//                    [1, O, 1...]); y = relu(v) (pointwise RELU_FWD, with args.relu)
//   backward data    dx = conv_bwd_data(dy, w)
//   backward filter  dw = conv_bwd_filter(x, dy)
// Compute is f32 for every dtype (f16 and bf16 accumulate in f32). For f32 data, engines that
// cuDNN notes as using tensor cores or down-converting their inputs (TF32) are skipped, so
// results stay within f32 rounding of the CPU, unless set_float32_matmul_precision("high")
// allows TF32 (detail::allow_tf32(), part of the plan's key), as for the GEMMs. When no
// engine takes the fused graph, the plain forward runs and the bias and ReLU follow as ember's
// own kernels; the bias gradient is always ember's reduction of dy (cuDNN's backward filter
// has none).
//
// Plans (graph → heuristics mode A, then the fallback list → the first engine configuration
// that passes the filters above and finalizes, or with EMBER_CONV_AUTOTUNE the fastest of
// several: Note [Measured convolution engines]) are built once per kind, device, dtype,
// geometry, fused flags and pointer alignment, and cached for the process; a graph no engine
// takes is remembered with its reason. Engines noted CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
// (cuDNN's backward filter with atomics among them) are skipped unless
// EMBER_CONV_NONDETERMINISTIC=1 allows them outside deterministic mode (Note [Nondeterministic
// convolution engines]); EMBER_CONV_AUTOTUNE times candidates outside deterministic mode. The
// workspace comes from the Pass pool for each call (inside a captured step from the graph's private
// pool), and every call is queued on the device's stream (the capture stream while capturing), so a
// convolution can be captured in a train::CapturedStep.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cudnn_backend.hpp"
#include "cuda/kernels.cuh"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cuda {

using backend::ConvBackwardArgs;
using backend::ConvForwardArgs;
using backend::ConvGeometry;
using backend::ConvLibraryStatus;

#if defined(EMBER_HAVE_CUDNN_HEADERS)
namespace {

using cudnn::api;
using cudnn::BuildError;
using cudnn::check;
using cudnn::Desc;
using cudnn::handle;
using cudnn::set;
using cudnn::set_desc;
using cudnn::status_text;

enum class Kind : int64_t { forward, backward_data, backward_filter };

// Tensors in the variant pack; virtual ones get ids from kFirstVirtual on.
enum Uid : int64_t { kX = 1, kW, kY, kBias, kFirstVirtual = 100 };

// cuDNN's view of a geometry: 2 or 3 spatial dims (1-D as 2-D over a unit height).
struct Layout {
  int spatial = 2;
  std::vector<int64_t> x, w, y, bias;  // dims
  std::vector<int64_t> stride, pad, dilation;
};

Layout layout_of(const ConvGeometry& g) {
  Layout l;
  l.spatial = std::max(g.spatial, 2);
  const int lead = l.spatial - g.spatial;  // unit dims put in front
  l.x = {g.batch, g.in_channels};
  l.w = {g.out_channels, g.in_channels / g.groups};
  l.y = {g.batch, g.out_channels};
  l.bias = {1, g.out_channels};
  for (int i = 0; i < l.spatial; ++i) {
    const bool unit = i < lead;
    const int j = i - lead;
    l.x.push_back(unit ? 1 : g.input[j]);
    l.w.push_back(unit ? 1 : g.kernel[j]);
    l.y.push_back(unit ? 1 : g.output[j]);
    l.bias.push_back(1);
    l.stride.push_back(unit ? 1 : g.stride[j]);
    l.pad.push_back(unit ? 0 : g.padding[j]);
    l.dilation.push_back(unit ? 1 : g.dilation[j]);
  }
  return l;
}

// Row-major strides of [N, C, spatial...], or with channels_last the channels innermost
// (NHWC / NDHWC: C, then the spatial dims from the last, then N).
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims, bool channels_last) {
  const int n = static_cast<int>(dims.size());
  std::vector<int64_t> s(dims.size(), 1);
  if (!channels_last) {
    for (int i = n - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
    return s;
  }
  int64_t acc = dims[1];  // C has stride 1
  for (int i = n - 1; i >= 2; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  s[0] = acc;
  return s;
}

cudnnDataType_t io_type(DType t) {
  return t == DType::f16    ? CUDNN_DATA_HALF
         : t == DType::bf16 ? CUDNN_DATA_BFLOAT16
                            : CUDNN_DATA_FLOAT;
}

// Builds one operation graph; owns every descriptor it makes.
class Graph {
 public:
  Graph(int64_t alignment, bool channels_last)
      : alignment_(alignment), channels_last_(channels_last) {}

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type,
                                  const std::vector<int64_t>& dims, bool is_virtual = false) {
    auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const std::vector<int64_t> strides = packed_strides(dims, channels_last_);
    const auto n = static_cast<int64_t>(dims.size());
    set(t->get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor dtype");
    set(t->get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims.data(), "tensor dims");
    set(t->get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides.data(), "strides");
    set(t->get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(t->get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment_, "align");
    set(t->get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "virtual");
    check(api().finalize(t->get()), "finalize tensor");
    return keep(std::move(t));
  }
  cudnnBackendDescriptor_t virt(const std::vector<int64_t>& dims) {
    return tensor(next_virtual_++, CUDNN_DATA_FLOAT, dims, true);
  }

  // The convolution descriptor of `l` (cross-correlation, f32 compute).
  cudnnBackendDescriptor_t convolution(const Layout& l) {
    auto c = std::make_unique<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t dims = l.spatial;
    set(c->get(), CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "conv comp");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
        "conv mode");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "conv dims");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, dims, l.stride.data(),
        "conv strides");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, dims, l.pad.data(),
        "conv pre paddings");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, dims, l.pad.data(),
        "conv post paddings");
    set(c->get(), CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dims, l.dilation.data(),
        "conv dilations");
    check(api().finalize(c->get()), "finalize convolution descriptor");
    return keep(std::move(c));
  }

  // One convolution operation of `kind`: (a, b) -> out are (x, w) -> y, (dy, w) -> dx or
  // (x, dy) -> dw.
  void convolution_op(Kind kind, cudnnBackendDescriptor_t conv, cudnnBackendDescriptor_t a,
                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out, float beta = 0.0f) {
    struct Attrs {
      cudnnBackendDescriptorType_t type;
      cudnnBackendAttributeName_t alpha, beta, desc, a, b, out;
    };
    static constexpr Attrs kAttrs[] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW},
    };
    const Attrs& at = kAttrs[static_cast<int>(kind)];
    auto op = std::make_unique<Desc>(at.type);
    const float alpha = 1.0f;
    set(op->get(), at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "conv alpha");
    set(op->get(), at.beta, CUDNN_TYPE_FLOAT, 1, &beta, "conv beta");
    set_desc(op->get(), at.desc, conv, "conv desc");
    set_desc(op->get(), at.a, a, "conv operand a");
    set_desc(op->get(), at.b, b, "conv operand b");
    set_desc(op->get(), at.out, out, "conv output");
    check(api().finalize(op->get()), "finalize convolution operation");
    ops_.push_back(std::move(op));
  }

  // y = mode(x[, b]) in f32.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t y) {
    auto pw = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(pw->get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pw mode");
    set(pw->get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pw prec");
    check(api().finalize(pw->get()), "finalize pointwise descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw->get(), "pw desc");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pw x");
    if (b) set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pw b");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pw y");
    check(api().finalize(op->get()), "finalize pointwise operation");
    keep(std::move(pw));
    ops_.push_back(std::move(op));
  }

  std::vector<cudnnBackendDescriptor_t> ops() const {
    std::vector<cudnnBackendDescriptor_t> out;
    for (const auto& o : ops_) out.push_back(o->get());
    return out;
  }
  std::vector<std::unique_ptr<Desc>> release() {
    for (auto& o : ops_) owned_.push_back(std::move(o));
    ops_.clear();
    return std::move(owned_);
  }

 private:
  cudnnBackendDescriptor_t keep(std::unique_ptr<Desc> d) {
    owned_.push_back(std::move(d));
    return owned_.back()->get();
  }
  int64_t alignment_;
  bool channels_last_;  // every tensor of the graph NHWC (ConvGeometry::channels_last)
  std::vector<std::unique_ptr<Desc>> owned_, ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// Note [The convolution graphs]; fused: the forward with bias (and ReLU) in the graph;
// accumulate: the backward data adds into dx (beta 1).
void build(Graph& gr, Kind kind, const ConvGeometry& g, bool fused_bias, bool fused_relu,
           bool accumulate) {
  const Layout l = layout_of(g);
  const cudnnDataType_t io = io_type(g.dtype);
  cudnnBackendDescriptor_t conv = gr.convolution(l);
  auto x = gr.tensor(kX, io, l.x), w = gr.tensor(kW, io, l.w), y = gr.tensor(kY, io, l.y);
  if (kind == Kind::backward_data)
    return gr.convolution_op(kind, conv, y, w, x, accumulate ? 1.0f : 0.0f);
  if (kind == Kind::backward_filter) return gr.convolution_op(kind, conv, x, y, w);
  if (!fused_bias && !fused_relu) return gr.convolution_op(kind, conv, x, w, y);
  cudnnBackendDescriptor_t v = gr.virt(l.y);
  gr.convolution_op(kind, conv, x, w, v);
  if (fused_bias) {
    auto sum = fused_relu ? gr.virt(l.y) : y;
    gr.pointwise(CUDNN_POINTWISE_ADD, v, gr.tensor(kBias, io, l.bias), sum);
    v = sum;
  }
  if (fused_relu) gr.pointwise(CUDNN_POINTWISE_RELU_FWD, v, nullptr, y);
}

// One engine configuration whose execution plan finalized.
struct Candidate {
  std::unique_ptr<Desc> config, plan;
  int64_t workspace = 0;
};

// A graph's plans: the heuristic's first configuration that passes refusal() and finalizes
// (with EMBER_CONV_AUTOTUNE=1, up to kMaxCandidates of them, timed at the first call).
struct Plan {
  std::vector<std::unique_ptr<Desc>> descs;
  std::unique_ptr<Desc> graph, heur;
  std::vector<Candidate> candidates;
  size_t chosen = 0;
  bool tuned = false;
  std::string error;  // set when no engine runs the graph: the call declines
  const Candidate& plan() const { return candidates[chosen]; }
};

// Note [Measured convolution engines]
// By default a plan runs the first engine configuration cuDNN's heuristic ranks (after the
// filters of Note [The convolution graphs]), as PyTorch does without cudnn.benchmark. With
// EMBER_CONV_AUTOTUNE=1 a plan keeps up to kMaxCandidates configurations and its first call
// that is not being captured (and not in deterministic mode) times each on the call's own
// tensors (one warm-up, best of three) and keeps the fastest for the process, as
// cudnn.benchmark = True; =2 also prints the times. Off by default: the pick follows timing
// noise, so two processes may round differently.
constexpr size_t kMaxCandidates = 8;

// Note [Nondeterministic convolution engines]
// Engines cuDNN notes as nondeterministic (a backward filter that adds partial sums with
// atomics, say) are skipped by default: an eager step and its captured replay must agree bit
// for bit (docs/capture.md), and with them the Fashion CNN's did not on the H200.
// EMBER_CONV_NONDETERMINISTIC=1 allows them outside deterministic mode, as PyTorch does with
// cudnn.deterministic off; results then move in the last bits from run to run. Deterministic
// mode also keeps autotuning from timing candidates (two processes could pick two engines),
// so its plans are cached apart.
bool nondeterministic_engines_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("EMBER_CONV_NONDETERMINISTIC");
    return v && std::strcmp(v, "1") == 0;
  }();
  return allowed && !ember::deterministic();
}

int autotune_level() {
  static const int level = [] {
    const char* v = std::getenv("EMBER_CONV_AUTOTUNE");
    return v && (v[0] == '1' || v[0] == '2') ? v[0] - '0' : 0;
  }();
  return level;
}

// Why `config` may not run (Note [The convolution graphs]); "" when it may.
std::string refusal(cudnnBackendDescriptor_t config, DType dtype, bool det) {
  try {
    if (dtype == DType::f32 && !ember::detail::allow_tf32() &&
        (cudnn::engine_has_note(config, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
         cudnn::engine_has_note(config, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
      return "computes f32 in TF32";
    // f32 at f32's accuracy: no transform-domain algorithms (FFT, Winograd), no reduced-precision
    // reductions: with them ResNet-18's conv1 weight gradient was 2.5 % from the CPU's on the
    // H100 (Note [cuDNN convolutions by default] in src/ops/conv_library.cpp).
    if (dtype == DType::f32 && !ember::detail::allow_tf32())
      for (const cudnnBackendNumericalNote_t note :
           {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION, CUDNN_NUMERICAL_NOTE_FFT,
            CUDNN_NUMERICAL_NOTE_WINOGRAD, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,
            CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13})
        if (cudnn::engine_has_note(config, note))
          return "computes f32 with FFT, Winograd or a reduced-precision reduction";
    if (det && cudnn::engine_has_note(config, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC))
      return "noted nondeterministic";
  } catch (const BuildError&) {
    return "";  // an engine that does not describe itself is taken at its graph's word
  }
  return "";
}

// Graph → heuristics → the first engine config that passes refusal() and finalizes (det: skip
// engines noted nondeterministic), or with `timed` up to kMaxCandidates of them.
void make_plan(Plan& p, Graph& g, cudnnHandle_t h, DType dtype, bool det, bool timed) {
  p.graph = cudnn::operation_graph(g.ops(), h);
  p.descs = g.release();
  std::string errors;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<std::unique_ptr<Desc>> configs =
        cudnn::heuristic_configs(p.graph->get(), mode, &p.heur);
    const auto got = static_cast<int64_t>(configs.size());
    const size_t wanted = timed ? kMaxCandidates : 1;
    for (int64_t i = 0; i < got && p.candidates.size() < wanted; ++i) {
      cudnnBackendDescriptor_t config = configs[static_cast<size_t>(i)]->get();
      const std::string why = refusal(config, dtype, det);
      if (!why.empty()) {
        errors += " config " + std::to_string(i) + ": " + why + ";";
        continue;
      }
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      set(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "plan handle");
      set_desc(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config, "plan engine config");
      const cudnnStatus_t st = api().finalize(plan->get());
      if (st != CUDNN_STATUS_SUCCESS) {
        errors += " config " + std::to_string(i) + ": " + status_text(st) + ";";
        continue;
      }
      Candidate c;
      int64_t n = 0;
      check(api().get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                CUDNN_TYPE_INT64, 1, &n, &c.workspace),
            "plan workspace size");
      c.config = std::move(configs[static_cast<size_t>(i)]);
      c.plan = std::move(plan);
      p.candidates.push_back(std::move(c));
    }
    if (!p.candidates.empty()) return;
    errors += " (" + std::string(mode == CUDNN_HEUR_MODE_A ? "mode A" : "fallback") + ": " +
              std::to_string(got) + " configs)";
  }
  throw BuildError("no cuDNN engine runs this convolution graph:" + errors);
}

struct Cache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::unique_ptr<Plan>> plans;
  std::array<std::string, 64> status;  // per device: the last decline's reason
};
Cache& cache() {
  static Cache* c = new Cache();  // leaked: plans live until exit
  return *c;
}

std::vector<int64_t> key_of(Kind kind, const ConvGeometry& g, bool bias, bool relu, bool accumulate,
                            int64_t alignment, bool det, bool timed) {
  std::vector<int64_t> k = backend::key_of(g);
  k.insert(k.end(), {static_cast<int64_t>(kind), bias, relu, accumulate, alignment, det, timed,
                     g.dtype == DType::f32 && ember::detail::allow_tf32()});
  return k;
}

// The cached plan (built on first use); null with *why when no engine runs the graph. An
// accumulating plan is never timed (its trial runs would add into the caller's dx).
Plan* plan_for(Kind kind, const ConvGeometry& g, bool bias, bool relu, int64_t alignment,
               std::string* why, bool accumulate = false) {
  Cache& c = cache();
  const bool det = !nondeterministic_engines_allowed();
  const bool timed = autotune_level() > 0 && !ember::deterministic() && !accumulate;
  std::lock_guard<std::mutex> lock(c.mutex);
  std::unique_ptr<Plan>& slot =
      c.plans[key_of(kind, g, bias, relu, accumulate, alignment, det, timed)];
  if (!slot) {
    slot = std::make_unique<Plan>();
    try {
      Graph gr(alignment, g.channels_last);
      build(gr, kind, g, bias, relu, accumulate);
      // Note [One cuDNN handle, one thread at a time]
      std::lock_guard<std::mutex> lock(cudnn::handle_mutex(g.device));
      make_plan(*slot, gr, handle(g.device), g.dtype, det, timed);
    } catch (const BuildError& e) {
      static constexpr const char* kNames[] = {"forward", "backward data", "backward filter"};
      slot->error = std::string("cuDNN ") + kNames[static_cast<int>(kind)] + ": " + e.what();
    }
  }
  if (!slot->error.empty()) {
    *why = slot->error;
    return nullptr;
  }
  return slot.get();
}

// The largest power of two up to 16 that every pointer is a multiple of (the plan's
// CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT promise).
int64_t alignment_of(std::initializer_list<const void*> ptrs) {
  int64_t a = 16;
  for (const void* p : ptrs)
    if (p)
      while (a > 1 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

void run_candidate(const ConvGeometry& g, const Candidate& c, const std::vector<int64_t>& uids,
                   const std::vector<void*>& ptrs) {
  Scratch scratch(g.device, std::max<size_t>(static_cast<size_t>(c.workspace), 256));
  cudnn::execute(g.device, c.plan->get(), uids, ptrs, scratch.get(), "conv (cuDNN)");
}

// Keeps the fastest candidate on the call's tensors (Note [Measured convolution engines], timed
// by cudnn::fastest: Note [Measured engines]).
void tune(const ConvGeometry& g, Plan& p, const std::vector<int64_t>& uids,
          const std::vector<void*>& ptrs) {
  const std::optional<size_t> best = cudnn::fastest(
      g.device, p.candidates.size(),
      [&](size_t i) { run_candidate(g, p.candidates[i], uids, ptrs); },
      [&](size_t i, float ms) {
        if (autotune_level() == 2)
          std::fprintf(stderr, "conv autotune: candidate %zu of %zu: %.4f ms\n", i,
                       p.candidates.size(), ms);
      });
  if (!best) return;  // tuned by the next eager call
  p.tuned = true;
  p.chosen = *best;
}

void execute(const ConvGeometry& g, Plan& p, const std::vector<int64_t>& uids,
             const std::vector<void*>& ptrs) {
  if (p.candidates.size() > 1) {
    std::lock_guard<std::mutex> lock(cache().mutex);  // one thread tunes a plan
    if (!p.tuned) tune(g, p, uids, ptrs);
  }
  run_candidate(g, p.plan(), uids, ptrs);
}

// Why the slots decline `g` before building a graph ("" when they may try it).
std::string precheck(const ConvGeometry& g) {
  std::string why;
  if (!cudnn_api(&why)) return why;
  if (g.dtype != DType::f32 && g.dtype != DType::f16 && g.dtype != DType::bf16)
    return "dtype " + std::string(dtype_name(g.dtype)) +
           " (cuDNN convolutions here take f32, f16 and bf16)";
  return "";
}

// y [N, O, out...] as [N, O, S] (channels_last: O innermost), and bias [O] broadcast to that
// shape (for ember's add and sum kernels).
backend::View activations(void* data, const ConvGeometry& g) {
  int64_t s = 1;
  for (int i = 0; i < g.spatial; ++i) s *= g.output[i];
  const int64_t o = g.out_channels;
  return {data, g.dtype, g.device, Shape{g.batch, o, s},
          g.channels_last ? Shape{o * s, 1, o} : Shape{o * s, s, 1}};
}
backend::View broadcast_bias(const void* bias, const backend::View& y) {
  return {const_cast<void*>(bias), y.dtype, y.device, y.shape, Shape{0, 1, 0}};
}

ConvLibraryStatus declined(const ConvGeometry& g, std::string why) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().status[static_cast<size_t>(g.device % 64)] = why;
  return ConvLibraryStatus::declined(std::move(why));
}

}  // namespace

ConvLibraryStatus conv_library_forward(const ConvForwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return declined(g, why);
  const bool bias = a.bias != nullptr;
  const int64_t align = alignment_of({a.x, a.weight, a.out, a.bias});
  std::string why;
  // Note [The convolution graphs]: the fused graph first, else the plain one and ember's
  // kernels for the bias and ReLU.
  Plan* p = nullptr;
  bool fused = bias || a.relu;
  if (fused) {
    std::string fused_why;
    p = plan_for(Kind::forward, g, bias, a.relu, align, &fused_why);
    fused = p != nullptr;
  }
  if (!p) p = plan_for(Kind::forward, g, false, false, align, &why);
  if (!p) return declined(g, why);
  if (a.need_grad_input &&
      !plan_for(Kind::backward_data, g, false, false, alignment_of({a.x, a.weight}), &why))
    return declined(g, why);
  if (a.need_grad_weight &&
      !plan_for(Kind::backward_filter, g, false, false, alignment_of({a.x, a.weight}), &why))
    return declined(g, why);
  std::vector<int64_t> uids = {kX, kW, kY};
  std::vector<void*> ptrs = {const_cast<void*>(a.x), const_cast<void*>(a.weight), a.out};
  if (fused && bias) {
    uids.push_back(kBias);
    ptrs.push_back(const_cast<void*>(a.bias));
  }
  try {
    execute(g, *p, uids, ptrs);
  } catch (const BuildError& e) {
    ember::detail::throw_error(std::string("conv (cuDNN): ") + e.what());
  }
  if (!fused) {
    const backend::View y = activations(a.out, g);
    if (bias) binary(backend::BinaryOp::add, y, y, broadcast_bias(a.bias, y));
    if (a.relu) unary(backend::UnaryOp::relu, y, y, 0.0, 0.0);
  }
  return ConvLibraryStatus::done();
}

ConvLibraryStatus conv_library_backward_data(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return declined(g, why);
  std::string why;
  Plan* p = plan_for(Kind::backward_data, g, false, false,
                     alignment_of({a.grad_out, a.weight, a.grad_input}), &why, a.accumulate);
  // An accumulating graph no engine takes leaves the convolution on cuDNN (the op runs the
  // plain one and adds): not a fallback for conv_fallback_reason to report.
  if (!p) return a.accumulate ? ConvLibraryStatus::declined(why) : declined(g, why);
  try {
    execute(g, *p, {kX, kW, kY},
            {a.grad_input, const_cast<void*>(a.weight), const_cast<void*>(a.grad_out)});
  } catch (const BuildError& e) {
    ember::detail::throw_error(std::string("conv (cuDNN): ") + e.what());
  }
  return ConvLibraryStatus::done();
}

ConvLibraryStatus conv_library_backward_filter(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  if (std::string why = precheck(g); !why.empty()) return declined(g, why);
  std::string why;
  Plan* p = plan_for(Kind::backward_filter, g, false, false,
                     alignment_of({a.grad_out, a.x, a.grad_weight}), &why);
  if (!p) return declined(g, why);
  try {
    execute(g, *p, {kX, kW, kY},
            {const_cast<void*>(a.x), a.grad_weight, const_cast<void*>(a.grad_out)});
  } catch (const BuildError& e) {
    ember::detail::throw_error(std::string("conv (cuDNN): ") + e.what());
  }
  if (a.grad_bias) {
    const backend::View dy = activations(const_cast<void*>(a.grad_out), g);
    const backend::View db{a.grad_bias, g.dtype, g.device, Shape{1, g.out_channels, 1},
                           Shape{g.out_channels, 1, 1}};
    reduce(backend::ReduceOp::sum, db, dy);
  }
  return ConvLibraryStatus::done();
}

const char* conv_library_status(int device) {
  thread_local std::string text;
  std::string why;
  const CudnnApi* a = cudnn_api(&why);
  if (!a) return (text = why).c_str();
  std::lock_guard<std::mutex> lock(cache().mutex);
  const std::string& last = cache().status[static_cast<size_t>(device < 0 ? 0 : device % 64)];
  text = cudnn::version_text(*a) + (last.empty() ? "" : "; last fallback: " + last);
  return text.c_str();
}

#else  // built without cuDNN's headers

namespace {
constexpr const char* kNoHeaders = "ember was built without cuDNN's headers (cudnn_graph.h)";
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

}  // namespace ember::cuda
