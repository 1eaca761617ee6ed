// src/cuda/attention.cpp — the fused attention slots (sdpa_forward, sdpa_backward,
// sdpa_status): cuDNN 9's flash attention, built through its backend graph API.
//
// Shapes are SdpaArgs's (src/backend/attention.hpp): B batch, H heads, L query length, S key
// length, E and Ev head dims. cuDNN has no "attention" call in its backend API before 9.13;
// instead its fused-attention engines recognise an operation graph of the attention's steps
// and run it as one flash-attention kernel, never writing the [L, S] scores to memory.
//
// Note [The attention graphs]
// Forward (every intermediate a virtual f32 tensor unless said otherwise):
//   s = matmul(Q, Kᵀ) · scale             Kᵀ is K's memory with the last two dims swapped
//   s = select(s, lowest, row < Lq ∧ col < len_kv[b])      key padding only
//   s = select(s, lowest, row >= col)                      is_causal only
//   m = max_S(s); e = exp(s - m); z = Σ_S e; stats = m + log z   (stats: f32 output)
//   p = e / z (· bernoulli(1 - p_drop) · 1/(1 - p_drop))   p in the io dtype
//   O = matmul(p, V)
// Backward (Q, K, V, O, dO, stats in; dQ, dK, dV out; two f32 scratch tensors):
//   sum = Σ_Ev(dO ∘ O) · (1 - p_drop)                      f32 [B, H, L, 1], scratch
//   e = exp(select…(matmul(Q, Kᵀ) · scale - stats))        the forward's masks
//   dV = matmul(reshape(e (· mask · 1/(1-p)))ᵀ, dO)
//   dS = (matmul(dO, Vᵀ) (· mask) - sum) ∘ e (· 1/(1-p)) · scale
//   dK = matmul(reshape(dS)ᵀ, Q);  dQacc = matmul(dS, K) (f32 scratch);  dQ = identity(dQacc)
// This mirrors the pattern cuDNN's own frontend (NVIDIA/cudnn-frontend, the SDPA nodes)
// lowers to for cuDNN 9.0-9.20, which is the pattern the engines match; the code is ours.
// Dropout draws from cuDNN's Philox generator with ember's seed and a fresh offset, so a
// fused run is reproducible by seed but its mask differs from the composed path's.
//
// Plans (graph → heuristics → the first engine config that finalizes) are built once per
// device, dtype, shape, strides and flags and kept in a map; the workspace comes from the
// Pass pool for each call.
//
// Note [Deterministic attention backward]
// cuDNN's default backward adds each key block's share of dQ into the f32 scratch dQacc with
// atomics, so dQ (and every weight after it) changes in its last bits from run to run. Its
// other backward writes dP to a workspace (B·H·L·S·2 bytes) and forms dQ without atomics;
// the graph asks for it by leaving dQacc out (dQ = matmul(dS, K) directly), which is what
// cuDNN's frontend lowers SDPA_backward_attributes::set_deterministic_algorithm(true) to on
// sm_80-sm_90 (NVIDIA/cudnn-frontend, scaled_dot_product_flash_attention.h: "Force dP
// workspace implementation if ... the user force requests deterministic algorithm"). In
// deterministic mode (set_deterministic) the backward plan is built that way, engines noted
// CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC are skipped and no plan is chosen by timing; on other
// GPUs (Blackwell needs engine-specific knobs and cuDNN >= 9.18) or when no engine takes the
// graph, the forward declines and the composed path runs, which is deterministic.
#include <algorithm>
#include <array>
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

// Tensors with a fixed id in the variant pack (virtual ones get ids from kFirstVirtual on).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kSeqQ,
  kSeqKv,
  kSeed,
  kOffset,
  kDropScale,
  kNegInf,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSoftmaxSum,
  kDQAccum,
  kKeepProb,
  kOne,
  kBias,
  kFirstVirtual = 100
};

using Dims = std::array<int64_t, 4>;

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
Dims swap_last(Dims d) {
  std::swap(d[2], d[3]);
  return d;
}
Dims dims_of(const int64_t* s) { return {s[0], s[1], s[2], s[3]}; }

// Builds one operation graph; owns every descriptor it makes.
class Builder {
 public:
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                  const Dims& strides, bool is_virtual = false,
                                  bool by_value = false) {
    auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(t->get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor dtype");
    set(t->get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor dims");
    set(t->get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor strides");
    set(t->get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(t->get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor align");
    set(t->get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "virtual");
    if (by_value)
      set(t->get(), CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "by value");
    check(api().finalize(t->get()), "finalize tensor");
    return keep(std::move(t));
  }
  // A virtual tensor (an intermediate the engine keeps on chip).
  cudnnBackendDescriptor_t virt(cudnnDataType_t type, const Dims& dims) {
    return tensor(next_virtual_++, type, dims, packed_strides(dims), true);
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, type, dims, strides, true);
  }
  // A host scalar passed by value in the variant pack (f32 [1, 1, 1, 1]).
  cudnnBackendDescriptor_t scalar(int64_t uid) {
    return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  // y = mode(x[, b][, t]). prec: the math precision; axis >= 0 for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t = nullptr,
                 cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    auto pw = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw->get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pw mode");
    set(pw->get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pw prec");
    if (axis >= 0) set(pw->get(), CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pw axis");
    check(api().finalize(pw->get()), "finalize pointwise descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw->get(), "pw desc");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pw x");
    if (b) set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pw b");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pw y");
    if (t) set_desc(op->get(), CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pw t");
    check(api().finalize(op->get()), "finalize pointwise operation");
    keep(std::move(pw));
    add_op(std::move(op));
  }
  // c = a · b over the last two dims; the overrides are per-batch m, n, k (padding) or null.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
              cudnnBackendDescriptor_t m_override = nullptr,
              cudnnBackendDescriptor_t n_override = nullptr,
              cudnnBackendDescriptor_t k_override = nullptr) {
    auto mm = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(mm->get(), CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "matmul comp");
    check(api().finalize(mm->get()), "finalize matmul descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul b");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_DESC, mm->get(), "matmul desc");
    if (m_override)
      set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override, "m ovr");
    if (n_override)
      set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override, "n ovr");
    if (k_override)
      set_desc(op->get(), CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override, "k ovr");
    check(api().finalize(op->get()), "finalize matmul operation");
    keep(std::move(mm));
    add_op(std::move(op));
  }
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    auto r = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(r->get(), CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode,
        "reduction mode");
    set(r->get(), CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "reduction comp");
    check(api().finalize(r->get()), "finalize reduction descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction x");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction y");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_REDUCTION_DESC, r->get(), "reduction desc");
    check(api().finalize(op->get()), "finalize reduction operation");
    keep(std::move(r));
    add_op(std::move(op));
  }
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, "reshape x");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, "reshape y");
    check(api().finalize(op->get()), "finalize reshape operation");
    add_op(std::move(op));
  }
  // y = Bernoulli(keep) draws from Philox(seed, offset) (seed, offset: i64 [1,1,1,1] tensors).
  void bernoulli(double keep_prob, cudnnBackendDescriptor_t seed, cudnnBackendDescriptor_t offset,
                 cudnnBackendDescriptor_t y) {
    auto r = std::make_unique<Desc>(CUDNN_BACKEND_RNG_DESCRIPTOR);
    const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    set(r->get(), CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist, "rng dist");
    set(r->get(), CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep_prob,
        "rng probability");
    check(api().finalize(r->get()), "finalize rng descriptor");
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RNG_YDESC, y, "rng y");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RNG_SEED, seed, "rng seed");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset, "rng offset");
    set_desc(op->get(), CUDNN_ATTR_OPERATION_RNG_DESC, r->get(), "rng desc");
    check(api().finalize(op->get()), "finalize rng operation");
    keep(std::move(r));
    add_op(std::move(op));
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
  void add_op(std::unique_ptr<Desc> d) { ops_.push_back(std::move(d)); }

  std::vector<std::unique_ptr<Desc>> owned_, ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

cudnnDataType_t io_type(DType t) { return t == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

// The tensors and masks both graphs share (Note [The attention graphs]).
struct Common {
  cudnnBackendDescriptor_t scale = nullptr, neg = nullptr, seq_q = nullptr, seq_kv = nullptr,
                           seed = nullptr, offset = nullptr, bias = nullptr;
};

Common common_tensors(Builder& g, const SdpaArgs& a, bool padding, bool dropout) {
  Common c;
  c.scale = g.scalar(kScale);
  if (padding || a.causal) c.neg = g.scalar(kNegInf);
  if (padding) {
    c.seq_q = g.tensor(kSeqQ, CUDNN_DATA_INT32, {a.batch, 1, 1, 1}, {1, 1, 1, 1});
    c.seq_kv = g.tensor(kSeqKv, CUDNN_DATA_INT32, {a.batch, 1, 1, 1}, {1, 1, 1, 1});
  }
  if (a.bias)
    c.bias = g.tensor(kBias, io_type(a.dtype), dims_of(a.bias_dims), dims_of(a.bias_strides));
  if (dropout) {
    c.seed = g.tensor(kSeed, CUDNN_DATA_INT64, {1, 1, 1, 1}, {1, 1, 1, 1});
    c.offset = g.tensor(kOffset, CUDNN_DATA_INT64, {1, 1, 1, 1}, {1, 1, 1, 1});
  }
  return c;
}

// s with the key-padding mask and then the causal mask applied (select to `lowest`).
cudnnBackendDescriptor_t apply_masks(Builder& g, const SdpaArgs& a, const Common& c,
                                     cudnnBackendDescriptor_t s, const Dims& sd, int flavor) {
  // Flavor 0 types the indices as cuDNN 9's frontend does (i32); flavor 1 as its older
  // releases did (f32): see Note [Graph flavors].
  const cudnnDataType_t index = flavor == 0 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
  if (c.bias) {  // an additive mask first, as cuDNN's frontend orders them
    auto out = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_ADD, s, c.bias, out);
    s = out;
  }
  if (c.seq_kv) {
    auto row = g.virt(index, sd), col = g.virt(index, sd);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, row, nullptr, index, 2);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, col, nullptr, index, 3);
    auto row_ok = g.virt(CUDNN_DATA_BOOLEAN, sd), col_ok = g.virt(CUDNN_DATA_BOOLEAN, sd),
         ok = g.virt(CUDNN_DATA_BOOLEAN, sd);
    g.pointwise(CUDNN_POINTWISE_CMP_LT, row, c.seq_q, row_ok, nullptr, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_LT, col, c.seq_kv, col_ok, nullptr, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_LOGICAL_AND, row_ok, col_ok, ok, nullptr, CUDNN_DATA_BOOLEAN);
    auto out = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, c.neg, out, ok);
    s = out;
  }
  if (a.causal) {
    auto row = g.virt(index, sd), col = g.virt(index, sd);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, row, nullptr, CUDNN_DATA_FLOAT, 2);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, col, nullptr, CUDNN_DATA_FLOAT, 3);
    auto keep = g.virt(CUDNN_DATA_BOOLEAN, sd);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, nullptr, CUDNN_DATA_BOOLEAN);
    auto out = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, c.neg, out, keep);
    s = out;
  }
  return s;
}

void build_forward(Builder& g, const SdpaArgs& a, bool padding, bool dropout, int flavor) {
  const cudnnDataType_t io = io_type(a.dtype);
  const int64_t b = a.batch, h = a.heads, l = a.len_q, s = a.len_kv;
  auto q = g.tensor(kQ, io, {b, h, l, a.head_dim}, dims_of(a.q_strides));
  auto kt = g.tensor(kK, io, {b, h, a.head_dim, s}, swap_last(dims_of(a.k_strides)));
  auto v = g.tensor(kV, io, {b, h, s, a.head_dim_v}, dims_of(a.v_strides));
  auto o = g.tensor(kO, io, {b, h, l, a.head_dim_v}, dims_of(a.o_strides));
  auto stats = g.tensor(kStats, CUDNN_DATA_FLOAT, {b, h, l, 1}, {h * l, l, 1, 1});
  const Common c = common_tensors(g, a, padding, dropout);
  const Dims sd{b, h, l, s}, rd{b, h, l, 1};

  auto s0 = g.virt(CUDNN_DATA_FLOAT, sd);
  g.matmul(q, kt, s0, c.seq_q, c.seq_kv);
  auto s1 = g.virt(CUDNN_DATA_FLOAT, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, s0, c.scale, s1);
  auto s2 = apply_masks(g, a, c, s1, sd, flavor);
  // softmax with stats
  auto m = g.virt(CUDNN_DATA_FLOAT, rd), d = g.virt(CUDNN_DATA_FLOAT, sd),
       e = g.virt(CUDNN_DATA_FLOAT, sd), z = g.virt(CUDNN_DATA_FLOAT, rd),
       lz = g.virt(CUDNN_DATA_FLOAT, rd);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, m);
  g.pointwise(CUDNN_POINTWISE_SUB, s2, m, d);
  g.pointwise(CUDNN_POINTWISE_EXP, d, nullptr, e);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, lz);
  g.pointwise(CUDNN_POINTWISE_ADD, m, lz, stats);
  auto p = g.virt(dropout ? CUDNN_DATA_FLOAT : io, sd);
  g.pointwise(CUDNN_POINTWISE_DIV, e, z, p);
  if (dropout) {
    auto mask = g.virt(CUDNN_DATA_FLOAT, sd), kept = g.virt(CUDNN_DATA_FLOAT, sd),
         scaled = g.virt(io, sd);
    g.bernoulli(1.0 - a.dropout_p, c.seed, c.offset, mask);
    g.pointwise(CUDNN_POINTWISE_MUL, p, mask, kept);
    g.pointwise(CUDNN_POINTWISE_MUL, kept, g.scalar(kDropScale), scaled);
    p = scaled;
  }
  g.matmul(p, v, o, c.seq_q, nullptr, c.seq_kv);
}

// accumulate_dq: dQ through the f32 scratch dQacc (atomics); false: the deterministic graph
// (Note [Deterministic attention backward]).
void build_backward(Builder& g, const SdpaArgs& a, bool padding, bool dropout, int flavor,
                    bool accumulate_dq) {
  const cudnnDataType_t io = io_type(a.dtype);
  const int64_t b = a.batch, h = a.heads, l = a.len_q, s = a.len_kv, e = a.head_dim,
                ev = a.head_dim_v;
  const Dims k_strides = dims_of(a.k_strides);
  auto q = g.tensor(kQ, io, {b, h, l, e}, dims_of(a.q_strides));
  auto kt = g.tensor(kK, io, {b, h, e, s}, swap_last(k_strides));
  auto vt = g.tensor(kV, io, {b, h, ev, s}, swap_last(dims_of(a.v_strides)));
  auto o = g.tensor(kO, io, {b, h, l, ev}, dims_of(a.o_strides));
  auto stats = g.tensor(kStats, CUDNN_DATA_FLOAT, {b, h, l, 1}, {h * l, l, 1, 1});
  auto d_o = g.tensor(kDO, io, {b, h, l, ev}, dims_of(a.o_strides));
  auto dq = g.tensor(kDQ, io, {b, h, l, e}, dims_of(a.grad_q_strides));
  auto dk = g.tensor(kDK, io, {b, h, s, e}, dims_of(a.grad_k_strides));
  auto dv = g.tensor(kDV, io, {b, h, s, ev}, dims_of(a.grad_v_strides));
  auto softmax_sum = g.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, {b, h, l, 1}, {h * l, l, 1, 1});
  auto dq_accum = accumulate_dq ? g.tensor(kDQAccum, CUDNN_DATA_FLOAT, {b, h, l, e},
                                           packed_strides({b, h, l, e}))
                                : nullptr;
  const Common c = common_tensors(g, a, padding, dropout);
  const Dims sd{b, h, l, s}, rd{b, h, l, 1}, sd_t{b, h, s, l}, st_strides{h * l * s, l * s, 1, s};

  cudnnBackendDescriptor_t mask = nullptr, drop_scale = nullptr;
  if (dropout) {
    mask = g.virt(CUDNN_DATA_FLOAT, sd);
    g.bernoulli(1.0 - a.dropout_p, c.seed, c.offset, mask);
    drop_scale = g.scalar(kDropScale);
  }
  // sum = Σ_Ev(dO ∘ O) · keep probability
  auto prod = g.virt(CUDNN_DATA_FLOAT, {b, h, l, ev}), red = g.virt(CUDNN_DATA_FLOAT, rd);
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, prod);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, prod, red);
  g.pointwise(CUDNN_POINTWISE_MUL, red, g.scalar(dropout ? kKeepProb : kOne), softmax_sum);
  // e = exp(masks(q·kᵀ·scale - stats))
  auto s0 = g.virt(CUDNN_DATA_FLOAT, sd), s1 = g.virt(CUDNN_DATA_FLOAT, sd),
       s2 = g.virt(CUDNN_DATA_FLOAT, sd);
  g.matmul(q, kt, s0, c.seq_q, c.seq_kv);
  g.pointwise(CUDNN_POINTWISE_MUL, s0, c.scale, s1);
  cudnnBackendDescriptor_t s3 = nullptr;
  if (flavor == 0) {  // masks after subtracting the stats (cuDNN 9's frontend)
    g.pointwise(CUDNN_POINTWISE_SUB, s1, stats, s2);
    s3 = apply_masks(g, a, c, s2, sd, flavor);
  } else {  // masks first (its older releases)
    auto masked = apply_masks(g, a, c, s1, sd, flavor);
    g.pointwise(CUDNN_POINTWISE_SUB, masked, stats, s2);
    s3 = s2;
  }
  auto ex = g.virt(CUDNN_DATA_FLOAT, sd);
  g.pointwise(CUDNN_POINTWISE_EXP, s3, nullptr, ex);
  // dV = pᵀ · dO
  cudnnBackendDescriptor_t p = ex;
  if (dropout) {
    auto kept = g.virt(CUDNN_DATA_FLOAT, sd), scaled = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_MUL, p, mask, kept);
    g.pointwise(CUDNN_POINTWISE_MUL, kept, drop_scale, scaled);
    p = scaled;
  }
  auto pt = g.virt(io, sd_t, st_strides);
  g.reshape(p, pt);
  g.matmul(pt, d_o, dv, c.seq_kv, nullptr, c.seq_q);
  // dS = ((dO · Vᵀ)(∘ mask) - sum) ∘ e (· 1/(1-p)) · scale
  auto dp = g.virt(CUDNN_DATA_FLOAT, sd);
  g.matmul(d_o, vt, dp, c.seq_q, c.seq_kv);
  if (dropout) {
    auto dpm = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_MUL, dp, mask, dpm);
    dp = dpm;
  }
  auto ds0 = g.virt(CUDNN_DATA_FLOAT, sd), ds1 = g.virt(CUDNN_DATA_FLOAT, sd);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, ds0);
  g.pointwise(CUDNN_POINTWISE_MUL, ds0, ex, ds1);
  if (dropout) {
    auto ds2 = g.virt(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_MUL, ds1, drop_scale, ds2);
    ds1 = ds2;
  }
  auto ds = g.virt(CUDNN_DATA_FLOAT, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, ds1, c.scale, ds);
  // dK = dSᵀ · Q
  auto dst = g.virt(io, sd_t, st_strides);
  g.reshape(ds, dst);
  g.matmul(dst, q, dk, c.seq_kv, nullptr, c.seq_q);
  // dQ = dS · K, accumulated in f32
  auto k = g.virt(flavor == 0 ? CUDNN_DATA_FLOAT : io, {b, h, s, e}, k_strides);
  g.reshape(kt, k);
  if (accumulate_dq) {
    g.matmul(ds, k, dq_accum, c.seq_q, nullptr, c.seq_kv);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, dq);
  } else {
    g.matmul(ds, k, dq, c.seq_q, nullptr, c.seq_kv);
  }
}

// Note [Graph flavors]
// cuDNN's engines match the graph's pattern, and what they accept moved a little across 9.x
// releases. Flavor 0 is the graph of cuDNN 9's own frontend (i32 indices for the masks, masks
// after the stats subtraction in the backward, an f32 view of K for dQ); flavor 1 the one of
// its 1.0 release (f32 indices, masks before the subtraction, K in the io dtype). A plan tries
// flavor 0 first, then 1; sdpa_status() reports the flavor a fallback saw fail.
constexpr int kFlavors = 2;

// One engine configuration whose execution plan finalized.
struct Candidate {
  std::unique_ptr<Desc> config, plan;
  std::vector<std::unique_ptr<Desc>> parts;  // the engine and knob choices a config references
  int64_t workspace = 0;
  std::string label;  // engine index and knob choices, for EMBER_SDPA_AUTOTUNE=2
};

// A built execution plan and everything it references: the heuristic's configurations that
// finalize (its first is the default) and, for the first engine, its knob settings one knob
// at a time (Note [Measured attention engines]).
struct Plan {
  std::vector<std::unique_ptr<Desc>> descs;
  std::unique_ptr<Desc> graph, heur;
  std::vector<Candidate> candidates;
  size_t chosen = 0;
  bool tuned = false;
  int flavor = 0;
  bool deterministic = false;  // Note [Deterministic attention backward]
  std::string error;           // set when no plan could be built: the call falls back
  const Candidate& plan() const { return candidates[chosen]; }
};

// Note [Measured attention engines]
// cuDNN's heuristic ranks the engine configurations that run a graph, and PyTorch runs its
// first. With EMBER_SDPA_AUTOTUNE=1 the first call of each plan (never one being captured)
// times every configuration the heuristic offers plus the first engine's knobs varied one at
// a time (at most kMaxCandidates in all), on the call's own tensors, and keeps the fastest
// for the process, as cuDNN's benchmark mode in PyTorch does; =2 also prints each time to
// stderr. Off by default: the choice follows timing noise, so two processes may pick
// configurations that round differently (within a process a plan always runs the same one).
constexpr size_t kMaxCandidates = 32;

int autotune_level() {
  static const int level = [] {
    const char* v = std::getenv("EMBER_SDPA_AUTOTUNE");
    return v && (v[0] == '1' || v[0] == '2') ? v[0] - '0' : 0;
  }();
  return level;
}

// Finalizes a plan for `config`; false (with the status in *errors) when cuDNN refuses it.
bool add_candidate(Plan& p, cudnnHandle_t h, Candidate c, std::string* errors) {
  c.plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set(c.plan->get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "plan handle");
  set_desc(c.plan->get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, c.config->get(),
           "plan engine config");
  const cudnnStatus_t st = api().finalize(c.plan->get());
  if (st != CUDNN_STATUS_SUCCESS) {
    *errors += " " + c.label + ": " + status_text(st) + ";";
    return false;
  }
  int64_t n = 0;
  check(api().get_attribute(c.plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                            CUDNN_TYPE_INT64, 1, &n, &c.workspace),
        "plan workspace size");
  p.candidates.push_back(std::move(c));
  return true;
}

// The engine a configuration runs, its global index and its knobs' ranges and choices.
struct EngineKnobs {
  std::unique_ptr<Desc> engine;
  int64_t index = -1;
  struct Knob {
    cudnnBackendKnobType_t type;
    int64_t lo, hi, stride, chosen;
  };
  std::vector<Knob> knobs;
};

EngineKnobs knobs_of(cudnnBackendDescriptor_t config) {
  EngineKnobs e;
  e.engine = std::make_unique<Desc>(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = e.engine->get();
  int64_t n = 0;
  check(api().get_attribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                            &n, &raw),
        "config engine");
  check(api().get_attribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &e.index),
        "engine index");
  constexpr int64_t kMaxKnobs = 32;
  std::vector<std::unique_ptr<Desc>> info, choice;
  std::vector<cudnnBackendDescriptor_t> info_raw, choice_raw;
  for (int64_t i = 0; i < kMaxKnobs; ++i) {
    info.push_back(std::make_unique<Desc>(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR));
    info_raw.push_back(info.back()->get());
    choice.push_back(std::make_unique<Desc>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    choice_raw.push_back(choice.back()->get());
  }
  int64_t n_info = 0, n_choice = 0;
  check(api().get_attribute(raw, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                            kMaxKnobs, &n_info, info_raw.data()),
        "engine knobs");
  check(api().get_attribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs, &n_choice, choice_raw.data()),
        "config knob choices");
  for (int64_t i = 0; i < std::min(n_info, kMaxKnobs); ++i) {
    EngineKnobs::Knob k{};
    cudnnBackendDescriptor_t d = info_raw[static_cast<size_t>(i)];
    check(api().get_attribute(d, CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &k.type),
          "knob type");
    check(
        api().get_attribute(d, CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &k.lo),
        "knob minimum");
    check(
        api().get_attribute(d, CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &k.hi),
        "knob maximum");
    check(api().get_attribute(d, CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &n, &k.stride),
          "knob stride");
    k.chosen = k.lo;
    for (int64_t j = 0; j < std::min(n_choice, kMaxKnobs); ++j) {
      cudnnBackendKnobType_t t{};
      int64_t v = 0;
      cudnnBackendDescriptor_t c = choice_raw[static_cast<size_t>(j)];
      check(
          api().get_attribute(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &t),
          "knob choice type");
      check(api().get_attribute(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &v),
            "knob choice value");
      if (t == k.type) k.chosen = v;
    }
    e.knobs.push_back(k);
  }
  return e;
}

std::string label_of(int64_t engine, const std::vector<EngineKnobs::Knob>& knobs) {
  std::string s = "engine " + std::to_string(engine);
  for (const EngineKnobs::Knob& k : knobs)
    s += " k" + std::to_string(static_cast<int>(k.type)) + "=" + std::to_string(k.chosen);
  return s;
}

// The first engine's knobs varied one at a time from the heuristic's choice.
void add_knob_variants(Plan& p, cudnnHandle_t h, cudnnBackendDescriptor_t first) {
  EngineKnobs e;
  try {
    e = knobs_of(first);
  } catch (const BuildError&) {
    return;  // an engine that does not describe its knobs: the heuristic's list only
  }
  p.candidates.front().label = label_of(e.index, e.knobs);
  // The variants run a fresh engine descriptor of the same index on the same graph.
  auto engine = std::make_unique<Desc>(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t graph = p.graph->get();
  try {
    set(engine->get(), CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
        "engine graph");
    set(engine->get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &e.index,
        "engine index");
    check(api().finalize(engine->get()), "finalize engine");
  } catch (const BuildError&) {
    return;
  }
  cudnnBackendDescriptor_t engine_raw = engine->get();
  p.descs.push_back(std::move(engine));  // lives as long as the plan
  std::string ignored;
  for (size_t i = 0; i < e.knobs.size(); ++i) {
    const EngineKnobs::Knob k = e.knobs[i];
    for (int64_t v = k.lo; v <= k.hi && k.stride > 0; v += k.stride) {
      if (v == k.chosen) continue;
      if (p.candidates.size() >= kMaxCandidates) return;
      std::vector<EngineKnobs::Knob> knobs = e.knobs;
      knobs[i].chosen = v;
      Candidate c;
      c.label = label_of(e.index, knobs);
      std::vector<cudnnBackendDescriptor_t> choices;
      try {
        for (const EngineKnobs::Knob& kn : knobs) {
          c.parts.push_back(std::make_unique<Desc>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
          cudnnBackendDescriptor_t d = c.parts.back()->get();
          set(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &kn.type, "knob type");
          set(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &kn.chosen, "knob value");
          check(api().finalize(d), "finalize knob choice");
          choices.push_back(d);
        }
        c.config = std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        set_desc(c.config->get(), CUDNN_ATTR_ENGINECFG_ENGINE, engine_raw, "config engine");
        if (!choices.empty())
          set(c.config->get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(choices.size()), choices.data(), "config knobs");
        if (api().finalize(c.config->get()) != CUDNN_STATUS_SUCCESS) continue;
        add_candidate(p, h, std::move(c), &ignored);
      } catch (const BuildError&) {
        continue;  // a setting this graph does not take
      }
    }
  }
}

// Whether cuDNN notes the engine of `config` as nondeterministic (an engine that cannot say
// is taken at its graph's word: Note [Deterministic attention backward]).
bool noted_nondeterministic(cudnnBackendDescriptor_t config) {
  try {
    return cudnn::nondeterministic_engine(config);
  } catch (const BuildError&) {
    return false;
  }
}

// Graph → heuristics → the engine configs whose plans finalize (the first is the default).
void make_plan(Plan& p, Builder& g, cudnnHandle_t h) {
  p.graph = cudnn::operation_graph(g.ops(), h);
  p.descs = g.release();
  std::string errors;
  const size_t wanted = autotune_level() > 0 && !p.deterministic ? kMaxCandidates : 1;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<std::unique_ptr<Desc>> found =
        cudnn::heuristic_configs(p.graph->get(), mode, &p.heur);
    if (found.empty()) {
      errors += " heuristics: " + status_text(CUDNN_STATUS_NOT_SUPPORTED);
      continue;
    }
    const auto got = static_cast<int64_t>(found.size());
    std::vector<Candidate> configs(found.size());
    for (size_t i = 0; i < found.size(); ++i) configs[i].config = std::move(found[i]);
    for (int64_t i = 0; i < got && p.candidates.size() < wanted; ++i) {
      Candidate& c = configs[static_cast<size_t>(i)];
      c.label = "config " + std::to_string(i);
      if (p.deterministic && noted_nondeterministic(c.config->get())) {
        errors += " " + c.label + ": engine noted nondeterministic;";
        continue;
      }
      add_candidate(p, h, std::move(c), &errors);
    }
    if (!p.candidates.empty()) {
      if (wanted > 1) add_knob_variants(p, h, p.candidates.front().config->get());
      return;
    }
    errors += " (" + std::string(mode == CUDNN_HEUR_MODE_A ? "mode A" : "fallback") + ": " +
              std::to_string(got) + " configs)";
  }
  throw BuildError("no cuDNN engine runs this attention graph:" + errors);
}

struct Cache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::unique_ptr<Plan>> plans;
  std::array<std::string, 64> status;  // per device: the last fallback's reason
};
Cache& cache() {
  static Cache* c = new Cache();  // leaked: plans live until exit
  return *c;
}

std::vector<int64_t> key_of(const SdpaArgs& a, bool backward, bool deterministic) {
  std::vector<int64_t> k = {backward,
                            a.device,
                            static_cast<int64_t>(a.dtype),
                            a.batch,
                            a.heads,
                            a.len_q,
                            a.len_kv,
                            a.head_dim,
                            a.head_dim_v,
                            a.causal,
                            a.seq_len_kv != nullptr,
                            a.bias != nullptr,
                            deterministic};
  if (a.bias) {
    k.insert(k.end(), a.bias_dims, a.bias_dims + 4);
    k.insert(k.end(), a.bias_strides, a.bias_strides + 4);
  }
  int64_t p_bits = 0;
  std::memcpy(&p_bits, &a.dropout_p, sizeof(p_bits));
  k.push_back(p_bits);
  for (const int64_t* s : {a.q_strides, a.k_strides, a.v_strides, a.o_strides, a.grad_q_strides,
                           a.grad_k_strides, a.grad_v_strides})
    k.insert(k.end(), s, s + 4);
  return k;
}

// Why cuDNN's deterministic backward is not used on `device` ("" when it is): the graph of
// Note [Deterministic attention backward] is the frontend's deterministic algorithm on
// compute capability 8.x and 9.x only.
std::string deterministic_refusal(int device) {
  int major = 0, minor = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 8 || major == 9) return "";
  return "deterministic mode: cuDNN's deterministic attention backward is used on sm_80 to sm_90 "
         "(this GPU is sm_" +
         std::to_string(major * 10 + minor) + ")";
}

// The cached plan for a (built on first use); null with the reason recorded when none exists.
Plan* plan_for(const SdpaArgs& a, bool backward) {
  Cache& c = cache();
  const bool det = deterministic();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::unique_ptr<Plan>& slot = c.plans[key_of(a, backward, det)];
  if (!slot) {
    std::string errors;
    const std::string refusal = backward && det ? deterministic_refusal(a.device) : "";
    if (!refusal.empty()) {
      slot = std::make_unique<Plan>();
      slot->error = refusal;
    }
    for (int flavor = 0; flavor < kFlavors && refusal.empty(); ++flavor) {
      slot = std::make_unique<Plan>();
      slot->deterministic = det;
      try {
        Builder g;
        const bool padding = a.seq_len_kv != nullptr, dropout = a.dropout_p > 0.0;
        if (backward)
          build_backward(g, a, padding, dropout, flavor, /*accumulate_dq=*/!det);
        else
          build_forward(g, a, padding, dropout, flavor);
        {
          // Note [One cuDNN handle, one thread at a time]
          std::lock_guard<std::mutex> lock(cudnn::handle_mutex(a.device));
          make_plan(*slot, g, handle(a.device));
        }
        slot->flavor = flavor;
        break;
      } catch (const BuildError& e) {
        errors += " [flavor " + std::to_string(flavor) + "] " + e.what();
        slot->error = std::string(backward ? "backward" : "forward") + " graph:" + errors;
      }
    }
  }
  if (!slot->error.empty()) {
    c.status[static_cast<size_t>(a.device)] = slot->error;
    return nullptr;
  }
  return slot.get();
}

// Scalars passed by value; they must outlive the execute call.
struct Scalars {
  float scale, neg, drop_scale, keep, one = 1.0f;
};

// accumulate_dq: the backward graph has the f32 scratch dQacc (build_backward).
void execute(const SdpaArgs& a, const Candidate& p, bool backward, bool accumulate_dq) {
  Scalars sc{static_cast<float>(a.scale), std::numeric_limits<float>::lowest(),
             static_cast<float>(a.dropout_p > 0 ? 1.0 / (1.0 - a.dropout_p) : 1.0),
             static_cast<float>(1.0 - a.dropout_p)};
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs = {const_cast<void*>(a.q),
                             const_cast<void*>(a.k),
                             const_cast<void*>(a.v),
                             a.o,
                             a.stats,
                             &sc.scale};
  auto add = [&](int64_t uid, const void* ptr) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(ptr));
  };
  const bool padding = a.seq_len_kv != nullptr, dropout = a.dropout_p > 0.0;
  if (padding || a.causal) add(kNegInf, &sc.neg);
  if (padding) {
    add(kSeqQ, a.seq_len_q);
    add(kSeqKv, a.seq_len_kv);
  }
  if (a.bias) add(kBias, a.bias);
  if (dropout) {
    add(kSeed, a.rng_state);
    add(kOffset, a.rng_state + 2);
    add(kDropScale, &sc.drop_scale);
  }
  const int64_t b = a.batch, h = a.heads, l = a.len_q;
  size_t extra = 0;  // backward's f32 scratch, placed after cuDNN's workspace
  const size_t ws = (static_cast<size_t>(p.workspace) + 255) / 256 * 256;
  const size_t sum_bytes = static_cast<size_t>(b * h * l) * sizeof(float);
  const size_t sum_padded = (sum_bytes + 255) / 256 * 256;
  const size_t dq_bytes =
      accumulate_dq ? static_cast<size_t>(b * h * l * a.head_dim) * sizeof(float) : 0;
  if (backward) extra = sum_padded + dq_bytes;
  Scratch scratch(a.device, std::max<size_t>(ws + extra, 256));
  char* base = static_cast<char*>(scratch.get());
  if (backward) {
    add(kDO, a.grad_o);
    add(kDQ, a.grad_q);
    add(kDK, a.grad_k);
    add(kDV, a.grad_v);
    add(kSoftmaxSum, base + ws);
    if (accumulate_dq) add(kDQAccum, base + ws + sum_padded);
    add(dropout ? kKeepProb : kOne, dropout ? &sc.keep : &sc.one);
    if (accumulate_dq && api().version < 90600)
      EMBER_CUDA_CHECK(
          cudaMemsetAsync(base + ws + sum_padded, 0, extra - sum_padded, stream(a.device)));
  }
  cudnn::execute(
      a.device, p.plan->get(), uids, ptrs, base,
      std::string("scaled_dot_product_attention: cuDNN ") + (backward ? "backward" : "forward"));
}

// Keeps the fastest candidate on the call's tensors (Note [Measured attention engines], timed by
// cudnn::fastest: Note [Measured engines]).
void tune(const SdpaArgs& a, Plan& p, bool backward) {
  p.tuned = true;
  if (p.candidates.size() < 2) return;
  const std::optional<size_t> best = cudnn::fastest(
      a.device, p.candidates.size(),
      [&](size_t i) { execute(a, p.candidates[i], backward, !p.deterministic); },
      [&](size_t i, float ms) {
        if (autotune_level() == 2)
          std::fprintf(stderr, "sdpa autotune: %s b%lld h%lld l%lld s%lld d%lld%s: %s %.4f ms\n",
                       backward ? "backward" : "forward", static_cast<long long>(a.batch),
                       static_cast<long long>(a.heads), static_cast<long long>(a.len_q),
                       static_cast<long long>(a.len_kv), static_cast<long long>(a.head_dim),
                       a.causal ? " causal" : "", p.candidates[i].label.c_str(), ms);
      });
  if (!best) {
    p.tuned = false;  // tuned by the first eager call
    return;
  }
  p.chosen = *best;
}

void run(const SdpaArgs& a, Plan& p, bool backward) {
  {
    std::lock_guard<std::mutex> lock(cache().mutex);  // one thread tunes a plan
    if (!p.tuned && autotune_level() > 0) tune(a, p, backward);
  }
  execute(a, p.plan(), backward, !p.deterministic);
}

}  // namespace

bool sdpa_forward(const SdpaArgs& a) {
  std::string why;
  if (!cudnn_api(&why)) {
    std::lock_guard<std::mutex> lock(cache().mutex);
    cache().status[static_cast<size_t>(a.device)] = why;
    return false;
  }
  Plan* fwd = plan_for(a, false);
  if (!fwd || (a.need_backward && !plan_for(a, true))) return false;
  if (a.dropout_p > 0.0) write_philox_state(a.device, a.philox_seed, a.philox_offset, a.rng_state);
  try {
    run(a, *fwd, false);
  } catch (const BuildError& e) {
    detail::throw_error(detail::concat("scaled_dot_product_attention: ", e.what()));
  }
  return true;
}

void sdpa_backward(const SdpaArgs& a) {
  Plan* bwd = plan_for(a, true);
  EMBER_CHECK(bwd != nullptr, "scaled_dot_product_attention: no cuDNN backward plan (",
              cache().status[static_cast<size_t>(a.device)], ")");
  try {
    run(a, *bwd, true);
  } catch (const BuildError& e) {
    detail::throw_error(detail::concat("scaled_dot_product_attention: ", e.what()));
  }
}

const char* sdpa_status(int device) {
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

bool sdpa_forward(const SdpaArgs&) { return false; }
void sdpa_backward(const SdpaArgs&) {
  detail::throw_error("scaled_dot_product_attention: built without cuDNN's headers");
}
const char* sdpa_status(int) { return "ember was built without cuDNN's headers (cudnn_graph.h)"; }

#endif

}  // namespace ember::cuda
