// tests/test_kv_attention.cpp — attention_with_kv_cache (include/ember/attention.hpp): against
// the same attention composed from primitive ops, the cache's writes, CUDA against the CPU,
// a captured replay at new positions, and its errors. (Its PyTorch case is
// attention_with_kv_cache in tests/gen_fixtures.py, run by the op driver.)
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;

double max_diff(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(DType::f64).to(Device::cpu()) - b.to(DType::f64).to(Device::cpu())))
      .item<double>();
}

struct Problem {
  int64_t B = 2, H = 4, Hkv = 2, T = 3, S = 9, E = 8, Ev = 5;
  std::vector<int64_t> lengths{4, 2};
  Tensor q, k, v, k_cache, v_cache, mask;  // mask: bool [B, S] (1 real)

  explicit Problem(DType dtype = DType::f32, Device device = Device::cpu()) {
    manual_seed(3);
    q = randn({B, H, T, E}).to(dtype).to(device);
    k = randn({B, Hkv, T, E}).to(dtype).to(device);
    v = randn({B, Hkv, T, Ev}).to(dtype).to(device);
    k_cache = randn({B, Hkv, S, E}).to(dtype).to(device);
    v_cache = randn({B, Hkv, S, Ev}).to(dtype).to(device);
    std::vector<uint8_t> m(static_cast<size_t>(B * S), 1);
    m[1] = 0;      // row 0 key 1: padding in the past
    m[S + 0] = 0;  // row 1 key 0: padding in the past
    m[S + 3] = 0;  // row 1 key 3: a new key marked as padding (its own query still sees it)
    mask = from_vector(m, {B, S}).to(DType::boolean).to(device);
  }
  Tensor seqlens() const { return from_vector(lengths, {B}, {.device = q.device()}); }
};

// The reference, composed per row from primitive ops in f64: the past rows of the cache and the
// new keys, repeated per query head, masked scores, softmax, times values.
Tensor reference(const Problem& p) {
  std::vector<Tensor> rows;
  const Tensor mask = p.mask.to(Device::cpu());
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t past = p.lengths[static_cast<size_t>(b)], n = past + p.T;
    auto cat_rows = [&](const Tensor& cache, const Tensor& fresh) {
      const Tensor c = cache.to(Device::cpu()).to(DType::f64).select(0, b).narrow(1, 0, past);
      const Tensor all = cat({c, fresh.to(Device::cpu()).to(DType::f64).select(0, b)}, 1);
      const int64_t g = p.H / p.Hkv;
      return all.unsqueeze(1).expand({p.Hkv, g, n, all.size(2)}).reshape({p.H, n, all.size(2)});
    };
    const Tensor K = cat_rows(p.k_cache, p.k), V = cat_rows(p.v_cache, p.v);
    const Tensor q = p.q.to(Device::cpu()).to(DType::f64).select(0, b);
    Tensor scores = matmul(q, K.transpose(1, 2)) / std::sqrt(static_cast<double>(p.E));
    std::vector<uint8_t> keep(static_cast<size_t>(p.T * n));
    const std::vector<int64_t> m =
        mask.select(0, b).to(DType::i64).contiguous().to_vector<int64_t>();
    for (int64_t i = 0; i < p.T; ++i)
      for (int64_t j = 0; j < n; ++j)
        keep[static_cast<size_t>(i * n + j)] = j == past + i || (j < past + i && m[j]);
    const Tensor allowed = from_vector(keep, {1, p.T, n}).to(DType::boolean);
    scores = where(allowed, scores, full_like(scores, -INFINITY));
    rows.push_back(matmul(softmax(scores, -1), V));
  }
  return stack(rows, 0);
}

TEST(KvAttention, MatchesComposedAttentionOnCpu) {
  Problem p;
  const Tensor want = reference(p);
  const Tensor k_cache_before = p.k_cache.clone(), v_cache_before = p.v_cache.clone();
  const Tensor got = attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, p.seqlens(),
                                             {.key_padding_mask = p.mask});
  EXPECT_EQ(got.shape(), Shape({p.B, p.H, p.T, p.Ev}));
  EXPECT_LT(max_diff(got, want), 1e-5);
  // The new rows went into each row's cache right after its past; nothing else changed.
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t past = p.lengths[static_cast<size_t>(b)];
    EXPECT_EQ(max_diff(p.k_cache.select(0, b).narrow(1, past, p.T), p.k.select(0, b)), 0.0);
    EXPECT_EQ(max_diff(p.v_cache.select(0, b).narrow(1, past, p.T), p.v.select(0, b)), 0.0);
    EXPECT_EQ(max_diff(p.k_cache.select(0, b).narrow(1, 0, past),
                       k_cache_before.select(0, b).narrow(1, 0, past)),
              0.0);
    const int64_t after = past + p.T;
    EXPECT_EQ(max_diff(p.v_cache.select(0, b).narrow(1, after, p.S - after),
                       v_cache_before.select(0, b).narrow(1, after, p.S - after)),
              0.0);
  }
}

TEST(KvAttention, WithoutMaskAndScaleIsPlainCausalAttention) {
  Problem p;
  p.mask = ones({p.B, p.S}).to(DType::boolean);
  const Tensor want = reference(p);
  const Tensor got =
      attention_with_kv_cache(p.q, p.k_cache.clone(), p.v_cache.clone(), p.k, p.v, p.seqlens());
  EXPECT_LT(max_diff(got, want), 1e-5);
  // An explicit scale multiplies the scores as 1/√E does by default.
  const Tensor scaled =
      attention_with_kv_cache(p.q * 2.0, p.k_cache.clone(), p.v_cache.clone(), p.k, p.v,
                              p.seqlens(), {.scale = 0.5 / std::sqrt(8.0)});
  EXPECT_LT(max_diff(scaled, want), 1e-5);
}

TEST(KvAttention, Bf16OnCpuWithinRounding) {
  Problem p(DType::bf16);
  const Tensor got = attention_with_kv_cache(p.q, p.k_cache.clone(), p.v_cache.clone(), p.k, p.v,
                                             p.seqlens(), {.key_padding_mask = p.mask});
  EXPECT_EQ(got.dtype(), DType::bf16);
  EXPECT_LT(max_diff(got, reference(p)), 2e-2);
}

TEST(KvAttention, RefusesBadInput) {
  Problem p;
  auto call = [&](const Tensor& q, const Tensor& lengths, const KVCacheAttentionOptions& o = {}) {
    return attention_with_kv_cache(q, p.k_cache, p.v_cache, p.k, p.v, lengths, o);
  };
  EXPECT_NE(error_of([&] {
              call(p.q, from_vector(std::vector<int64_t>{7, 0}, {2}));
            }).find("cache_seqlens[0] is 7 and 3 new positions follow"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              call(p.q, from_vector(std::vector<int64_t>{0, -1}, {2}));
            }).find("cache_seqlens[1] is -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              call(p.q.narrow(1, 0, 3), p.seqlens());
            }).find("3 query heads over 2 key heads"),
            std::string::npos);
  EXPECT_NE(error_of([&] { call(p.q.to(DType::f64), p.seqlens()); }).find("expected all equal"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { call(p.q, p.seqlens().to(DType::f32)); }).find("expected i64 or i32 [B]"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              call(p.q, p.seqlens(), {.key_padding_mask = ones({2, 9})});
            }).find("key_padding_mask [2, 9] f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              call(p.q.reshape({2, 4, 24}), p.seqlens());
            }).find("expected rank 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, Tensor());
            }).find("cache_seqlens"),
            std::string::npos);
  const Tensor q = p.q.clone().requires_grad_();
  EXPECT_NE(error_of([&] { call(q, p.seqlens()); }).find("no backward"), std::string::npos);
  NoGradGuard no_grad;
  EXPECT_NO_THROW(call(q, p.seqlens()));
}

// Rotary tables [Bc, 1, T, E] as a Llama forward makes them: angles position · inv_freq of
// positions past .. past + T - 1 (row b's past from `pasts`), both halves repeated.
std::pair<Tensor, Tensor> rotary_tables(const std::vector<int64_t>& pasts, int64_t T, int64_t E,
                                        DType dtype, Device device) {
  std::vector<float> angle;
  for (const int64_t past : pasts)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t e = 0; e < E / 2; ++e)
          angle.push_back(
              static_cast<float>(past + t) *
              std::pow(10000.0f, -2.0f * static_cast<float>(e) / static_cast<float>(E)));
  const Tensor a = from_vector(angle, {static_cast<int64_t>(pasts.size()), 1, T, E});
  return {cos(a).to(dtype).to(device), sin(a).to(dtype).to(device)};
}

// With rotary tables the call is rotary_embedding of q and k, then the call without them: the
// output and the cache's new rows (written rotated), bit for bit. The CPU composes; on a GPU
// kv_rows_kernel rotates in registers for 16-bit head dims 64 and 128 (Note [Rotary embedding in
// the attention kernel]) and the others compose; both against rotating first on the same device.
TEST(KvAttention, RotaryTablesEqualRotatingFirst) {
  std::vector<std::pair<DType, int64_t>> kinds = {{DType::f32, 8}, {DType::f32, 64}};
  std::vector<Device> devices = {Device::cpu()};
  if (cuda_available()) {
    devices.push_back(Device::cuda(0));
    for (const auto& k : std::vector<std::pair<DType, int64_t>>{{DType::bf16, 64},
                                                                {DType::f16, 64},
                                                                {DType::bf16, 128},
                                                                {DType::f16, 128},
                                                                {DType::bf16, 32},
                                                                {DType::bf16, 96}})
      kinds.push_back(k);
  }
  manual_seed(17);
  const int64_t B = 2, H = 8, Hkv = 2, S = 150;
  for (const Device device : devices) {
    for (const auto& [dtype, E] : kinds) {
      if (device.is_cpu() && dtype != DType::f32) continue;
      const Tensor kc = randn({B, Hkv, S, E}).to(dtype), vc = randn({B, Hkv, S, E}).to(dtype);
      for (const int64_t T : {1, 3}) {
        // q as a view of a fused projection's output, as a decode step passes it.
        const Tensor fused = randn({B, T, (H + 2 * Hkv) * E}).to(dtype).to(device);
        const Tensor q = fused.narrow(2, 0, H * E).reshape({B, T, H, E}).transpose(1, 2);
        const Tensor k = fused.narrow(2, H * E, Hkv * E).reshape({B, T, Hkv, E}).transpose(1, 2);
        const Tensor v = randn({B, Hkv, T, E}).to(dtype).to(device);
        for (const int64_t past : {0, 5, 63, 64, 130}) {
          SCOPED_TRACE(device.str() + " " + std::string(dtype_name(dtype)) + " E " +
                       std::to_string(E) + " T " + std::to_string(T) + " past " +
                       std::to_string(past));
          const std::vector<int64_t> pasts{past, past / 2};
          const Tensor len = from_vector(pasts, {B}, {.device = device});
          // Per-row tables, and one table broadcast over the batch (both rows at `past`).
          for (const bool per_row : {true, false}) {
            const auto [c, s] =
                rotary_tables(per_row ? pasts : std::vector<int64_t>{past}, T, E, dtype, device);
            const Tensor lens = per_row ? len
                                        : full({B}, static_cast<double>(past),
                                               {.dtype = DType::i64, .device = device});
            Tensor kc_want = kc.to(device), vc_want = vc.to(device);
            const Tensor want = attention_with_kv_cache(rotary_embedding(q, c, s), kc_want, vc_want,
                                                        rotary_embedding(k, c, s), v, lens);
            Tensor kc_got = kc.to(device), vc_got = vc.to(device);
            const Tensor got = attention_with_kv_cache(q, kc_got, vc_got, k, v, lens,
                                                       {.rotary_cos = c, .rotary_sin = s});
            EXPECT_EQ(max_diff(got, want), 0.0);
            EXPECT_EQ(max_diff(kc_got, kc_want), 0.0) << "the new keys are cached rotated";
            EXPECT_EQ(max_diff(vc_got, vc_want), 0.0);
          }
        }
      }
    }
  }
}

TEST(KvAttention, RefusesBadRotaryTables) {
  Problem p;
  const auto [c, s] = rotary_tables({4, 2}, p.T, p.E, DType::f32, Device::cpu());
  auto call = [&](const Tensor& cos, const Tensor& sin) {
    return attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, p.seqlens(),
                                   {.rotary_cos = cos, .rotary_sin = sin});
  };
  EXPECT_NE(error_of([&] { call(c, Tensor()); }).find("expected both or neither"),
            std::string::npos);
  EXPECT_NE(error_of([&] { call(c.narrow(2, 0, 2), s.narrow(2, 0, 2)); })
                .find("rotary_cos [2, 1, 2, 8] f32, rotary_sin [2, 1, 2, 8] f32 (expected [2 or 1, "
                      "1, 3, 8]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { call(c.to(DType::f64), s.to(DType::f64)); }).find("in the query's f32"),
            std::string::npos);
  EXPECT_NO_THROW(call(c, s));
}

TEST(KvAttention, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    Problem cpu(dtype), gpu(dtype, Device::cuda(0));
    const Tensor want = attention_with_kv_cache(cpu.q, cpu.k_cache, cpu.v_cache, cpu.k, cpu.v,
                                                cpu.seqlens(), {.key_padding_mask = cpu.mask});
    const Tensor got = attention_with_kv_cache(gpu.q, gpu.k_cache, gpu.v_cache, gpu.k, gpu.v,
                                               gpu.seqlens(), {.key_padding_mask = gpu.mask});
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-2;
    EXPECT_LT(max_diff(got, want), tol) << dtype_name(dtype);
    EXPECT_EQ(max_diff(gpu.k_cache, cpu.k_cache), 0.0) << dtype_name(dtype);
    EXPECT_EQ(max_diff(gpu.v_cache, cpu.v_cache), 0.0) << dtype_name(dtype);
  }
  // Head dim 128 and one query, as a Llama decode step; strided q (a view of a fused output).
  manual_seed(5);
  const Tensor fused = randn({1, 1, 3 * 8 * 128}).to(DType::bf16);
  const Tensor q = fused.narrow(2, 0, 8 * 128).reshape({1, 1, 8, 128}).transpose(1, 2);
  const Tensor k = randn({1, 2, 1, 128}).to(DType::bf16), v = randn({1, 2, 1, 128}).to(DType::bf16);
  Tensor kc = randn({1, 2, 40, 128}).to(DType::bf16), vc = randn({1, 2, 40, 128}).to(DType::bf16);
  const Tensor len = from_vector(std::vector<int64_t>{33}, {1});
  Tensor kc_gpu = kc.to(Device::cuda(0)), vc_gpu = vc.to(Device::cuda(0));
  const Tensor want = attention_with_kv_cache(q, kc, vc, k, v, len);
  const Tensor got =
      attention_with_kv_cache(q.to(Device::cuda(0)), kc_gpu, vc_gpu, k.to(Device::cuda(0)),
                              v.to(Device::cuda(0)), len.to(Device::cuda(0)));
  EXPECT_LT(max_diff(got, want), 1e-2);
}

// Caches longer than one key split (64 keys): the splits' partial results are merged by the
// last split of each query to finish (Note [Decode attention in key splits]). Every length
// around the split edges, a key padding mask that empties whole splits, repeated calls (the
// arrival counters must be back at zero), one query and several; then a launch with more
// queries than the counters hold, merged by the second kernel.
TEST(KvAttention, CudaKeySplitsMatchTheCpuAtEveryLength) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  manual_seed(11);
  const int64_t B = 2, H = 4, Hkv = 2, S = 300;
  std::vector<uint8_t> m(static_cast<size_t>(B * S), 1);
  for (int64_t j = 0; j < 140; ++j) m[static_cast<size_t>(S + j)] = 0;  // row 1: splits 0, 1
  const Tensor mask = from_vector(m, {B, S}).to(DType::boolean);
  // 16-bit rows of head dims 32, 64, 96 and 128 take kv_rows_kernel (Note [Decode attention
  // with its loads up front]); f32 takes kv_split_kernel.
  const std::vector<std::pair<DType, int64_t>> kinds = {{DType::f32, 64},  {DType::bf16, 64},
                                                        {DType::f16, 64},  {DType::bf16, 32},
                                                        {DType::bf16, 96}, {DType::f16, 128}};
  for (const auto& [dtype, E] : kinds) {
    const Tensor kc = randn({B, Hkv, S, E}).to(dtype), vc = randn({B, Hkv, S, E}).to(dtype);
    for (const int64_t T : {1, 3}) {
      const Tensor q = randn({B, H, T, E}).to(dtype), k = randn({B, Hkv, T, E}).to(dtype),
                   v = randn({B, Hkv, T, E}).to(dtype);
      for (const int64_t past : {0, 1, 62, 63, 64, 65, 127, 128, 141, 200, 255, 256, 296}) {
        if (past + T > S) continue;
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " E " + std::to_string(E) + " T " +
                     std::to_string(T) + " past " + std::to_string(past));
        const Tensor len = from_vector(std::vector<int64_t>{past, S - T - past / 3}, {B});
        Tensor kc_cpu = kc.clone(), vc_cpu = vc.clone();
        const Tensor want =
            attention_with_kv_cache(q, kc_cpu, vc_cpu, k, v, len, {.key_padding_mask = mask});
        Tensor kc_gpu = kc.to(gpu), vc_gpu = vc.to(gpu);
        auto run = [&] {
          return attention_with_kv_cache(q.to(gpu), kc_gpu, vc_gpu, k.to(gpu), v.to(gpu),
                                         len.to(gpu), {.key_padding_mask = mask.to(gpu)});
        };
        const Tensor first = run(), again = run();
        EXPECT_LT(max_diff(first, want), dtype == DType::f32 ? 1e-5 : 1e-2);
        EXPECT_EQ(max_diff(again, first), 0.0) << "a second call gives the same bits";
        EXPECT_EQ(max_diff(kc_gpu, kc_cpu), 0.0);
        EXPECT_EQ(max_diff(vc_gpu, vc_cpu), 0.0);
      }
    }
  }
  // 64 heads of 1040 queries: 66,560 queries, past the 65,536 counters.
  const int64_t Hb = 64, T = 1040, Sb = 1100, Eb = 8;
  const Tensor q = randn({1, Hb, T, Eb}), k = randn({1, Hb, T, Eb}), v = randn({1, Hb, T, Eb});
  Tensor kc = randn({1, Hb, Sb, Eb}), vc = randn({1, Hb, Sb, Eb});
  const Tensor len = from_vector(std::vector<int64_t>{50}, {1});
  Tensor kc_gpu = kc.to(gpu), vc_gpu = vc.to(gpu);
  const Tensor got =
      attention_with_kv_cache(q.to(gpu), kc_gpu, vc_gpu, k.to(gpu), v.to(gpu), len.to(gpu));
  EXPECT_LT(max_diff(got, attention_with_kv_cache(q, kc, vc, k, v, len)), 1e-5);
}

TEST(KvAttention, CudaRangeErrorComesAtTheNextSynchronisation) {
  SKIP_WITHOUT_CUDA();
  Problem p(DType::f32, Device::cuda(0));
  const Tensor before = p.k_cache.clone();
  const Tensor bad = from_vector(std::vector<int64_t>{1, 8}, {2}, {.device = Device::cuda(0)});
  const std::string e = error_of([&] {
    attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, bad);
    synchronize(Device::cuda(0));
  });
  EXPECT_NE(e.find("attention_with_kv_cache: cache_seqlens[1] is 8"), std::string::npos) << e;
  // The bad row wrote nothing; the device stays usable.
  EXPECT_EQ(max_diff(p.k_cache.select(0, 1), before.select(0, 1)), 0.0);
  EXPECT_NO_THROW(
      attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, p.seqlens()).to(Device::cpu()));
}

TEST(KvAttention, CapturedReplayReadsTheLengthsOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  // One captured call replayed at growing lengths equals the eager calls at those lengths.
  Problem eager(DType::bf16, Device::cuda(0)), captured(DType::bf16, Device::cuda(0));
  train::CapturedStep step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{attention_with_kv_cache(captured.q, captured.k_cache,
                                                       captured.v_cache, captured.k, captured.v,
                                                       in[0], {.key_padding_mask = captured.mask})};
  });
  for (int64_t past = 0; past + eager.T <= eager.S; past += 2) {
    const Tensor len = from_vector(std::vector<int64_t>{past, past / 2}, {2});
    const Tensor want =
        attention_with_kv_cache(eager.q, eager.k_cache, eager.v_cache, eager.k, eager.v,
                                len.to(Device::cuda(0)), {.key_padding_mask = eager.mask});
    EXPECT_EQ(max_diff(step({len})[0], want), 0.0) << "past " << past;
  }
  EXPECT_EQ(max_diff(captured.k_cache, eager.k_cache), 0.0);
}

}  // namespace

// Whether the backend rotates inside its kernel is a question the op asks the kernel table,
// not device work: a Profiler records the rotations and the attention, not the question.
TEST(KvAttention, TheProfilerDoesNotCountTheRotaryQuestionAsAKernel) {
  Problem p;
  manual_seed(23);
  const Tensor cos = randn({1, 1, p.T, p.E}), sin = randn({1, 1, p.T, p.E});
  Profiler prof;
  (void)attention_with_kv_cache(p.q, p.k_cache, p.v_cache, p.k, p.v, p.seqlens(),
                                {.rotary_cos = cos, .rotary_sin = sin});
  prof.stop();
  int64_t attention = 0;
  for (const auto& k : prof.kernels()) {
    EXPECT_NE(k.name, "kv_cache_rotary_fits");
    attention += k.name == "kv_cache_attention" ? k.calls : 0;
  }
  EXPECT_EQ(attention, 1);
}
