// bench/bench_util.hpp — what every bench/bench_*.cpp shares: timing, validation, JSON output.
//
// A benchmark validates first (ember against its reference, exit 1 on mismatch), then times
// ember and the reference in the same run (warm-up, then the median of several repetitions),
// then prints one JSON line per figure on stdout
//
//   {"bench": "gemm_f32_1024", "ember": 120.5, "reference": 125.0, "unit": "GFLOP/s",
//    "speedup": 0.964, ...}
//
// where speedup > 1 means ember wins (reference time / ember time, or ember throughput /
// reference throughput), and a human-readable line with the napkin math on stderr. Lines on
// stderr never start with '{': bench/run_all.sh collects every such line as a result.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

/// Keeps the compiler from discarding a value or the writes behind a pointer.
template <typename T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

/// Timings of one measured function, in seconds.
struct Timing {
  double median = 0.0;
  double best = 0.0;
  int reps = 0;
};

/// Times several functions in turns (a, b, a, b, ...) so that load from other processes on
/// a shared machine falls on all of them alike: `warmup` untimed rounds, then `reps` timed.
inline std::vector<Timing> time_interleaved(const std::vector<std::function<void()>>& fns,
                                            int warmup, int reps) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  std::vector<std::vector<double>> seconds(fns.size(), std::vector<double>(reps));
  for (int i = 0; i < reps; ++i)
    for (size_t f = 0; f < fns.size(); ++f) {
      const auto start = Clock::now();
      fns[f]();
      seconds[f][i] = std::chrono::duration<double>(Clock::now() - start).count();
    }
  std::vector<Timing> out;
  for (auto& s : seconds) {
    std::sort(s.begin(), s.end());
    Timing t;
    t.reps = reps;
    t.best = s.front();
    t.median = reps % 2 ? s[reps / 2] : 0.5 * (s[reps / 2 - 1] + s[reps / 2]);
    out.push_back(t);
  }
  return out;
}

/// Median and best of `blocks` blocks of `per_block` calls, in ms per call; `wait` (the
/// device's synchronisation) runs before each block starts and before it ends, so a block
/// counts the work it queued (GPU benchmarks).
inline Timing time_blocks(const std::function<void()>& fn, int warmup, int blocks, int per_block,
                          const std::function<void()>& wait) {
  for (int i = 0; i < warmup; ++i) fn();
  wait();
  std::vector<double> ms;
  for (int b = 0; b < blocks; ++b) {
    const auto start = Clock::now();
    for (int i = 0; i < per_block; ++i) fn();
    wait();
    ms.push_back(std::chrono::duration<double>(Clock::now() - start).count() * 1e3 / per_block);
  }
  std::sort(ms.begin(), ms.end());
  return {.median = blocks % 2 ? ms[blocks / 2] : 0.5 * (ms[blocks / 2 - 1] + ms[blocks / 2]),
          .best = ms.front(),
          .reps = blocks};
}

/// Nanoseconds `hook` adds to one iteration of a loop: 10^8 iterations calling it against the
/// same loop without it (interleaved, median of 7), each with a compiler barrier. For the cost
/// of a check that is off (bench_profiler_off, bench_anomaly).
template <typename Hook>
inline double ns_per_call(Hook hook) {
  constexpr int64_t kIters = 100'000'000;
  const auto with_hook = [&] {
    for (int64_t i = 0; i < kIters; ++i) {
      hook();
      do_not_optimize(i);
    }
  };
  const auto without = [] {
    for (int64_t i = 0; i < kIters; ++i) do_not_optimize(i);
  };
  const auto t = time_interleaved({with_hook, without}, 1, 7);
  return (t[0].median - t[1].median) * 1e9 / kIters;
}

/// Runs `fn` `warmup` times untimed, then `reps` times timed; returns median and best.
inline Timing time_it(const std::function<void()>& fn, int warmup, int reps) {
  return time_interleaved({fn}, warmup, reps)[0];
}

/// Result of comparing two float arrays elementwise: |got - want| <= atol + rtol·|want|.
struct Compare {
  bool ok = true;
  int64_t mismatches = 0;
  int64_t first_bad = -1;
  double max_abs_err = 0.0;
  double got_at_first = 0.0, want_at_first = 0.0;
};

template <typename A, typename B>
Compare compare(const A* got, const B* want, int64_t n, double atol, double rtol) {
  Compare c;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::fabs(g - w);
    if (!(err <= atol + rtol * std::fabs(w))) {  // also catches NaN
      if (c.first_bad < 0) {
        c.first_bad = i;
        c.got_at_first = g;
        c.want_at_first = w;
      }
      ++c.mismatches;
      c.ok = false;
    }
    if (err > c.max_abs_err || std::isnan(err)) c.max_abs_err = err;
  }
  return c;
}

/// Prints the verdict of a comparison on stderr; returns its ok.
inline bool report(const char* bench, const char* what, const Compare& c, int64_t n) {
  if (c.ok) {
    std::fprintf(stderr, "%s: validated %s (%lld elements, max |err| %.3g)\n", bench, what,
                 static_cast<long long>(n), c.max_abs_err);
  } else {
    std::fprintf(stderr,
                 "%s: VALIDATION FAILED for %s: %lld of %lld elements differ; first at %lld: "
                 "got %.9g, expected %.9g (max |err| %.3g)\n",
                 bench, what, static_cast<long long>(c.mismatches), static_cast<long long>(n),
                 static_cast<long long>(c.first_bad), c.got_at_first, c.want_at_first,
                 c.max_abs_err);
  }
  return c.ok;
}

/// A number as JSON text (null when not finite).
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
inline std::string json_number(std::optional<double> v) { return v ? json_number(*v) : "null"; }

/// Extra "key": value pairs appended to a result line (values are JSON text).
struct Field {
  std::string key;
  std::string json;
};
inline Field num(const std::string& key, double v) { return {key, json_number(v)}; }
inline Field str(const std::string& key, const std::string& v) { return {key, "\"" + v + "\""}; }

/// One result line on stdout. `reference` is absent (null) when the reference could not run;
/// speedup is then null too. `higher_is_better` says how speedup is formed from the values.
inline void emit(const std::string& name, double ember, std::optional<double> reference,
                 const std::string& unit, bool higher_is_better, double target,
                 const std::vector<Field>& extra = {}) {
  std::optional<double> speedup;
  if (reference && ember > 0 && *reference > 0)
    speedup = higher_is_better ? ember / *reference : *reference / ember;
  std::string met = speedup ? (*speedup >= target ? "true" : "false") : "null";
  std::string line = "{\"bench\": \"" + name + "\", \"ember\": " + json_number(ember) +
                     ", \"reference\": " + json_number(reference) + ", \"unit\": \"" + unit +
                     "\", \"speedup\": " + json_number(speedup) +
                     ", \"target\": " + json_number(target) + ", \"met\": " + met;
  for (const Field& f : extra) line += ", \"" + f.key + "\": " + f.json;
  line += "}";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// ---- machine peak ----

namespace detail {

// Independent FMA chains, enough to cover latency × throughput of two FMA pipes. GCC vector
// extensions with a per-function target, so the bench needs no -march flag; the loop is
// force-inlined so that it is compiled for each caller's target.
typedef float F32x16 __attribute__((vector_size(64)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef float F32x4 __attribute__((vector_size(16)));

template <typename V>
__attribute__((always_inline)) inline double fma_loop(int64_t iters) {
  constexpr int kChains = 12;
  constexpr int kLanes = sizeof(V) / sizeof(float);
  V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V{} + (1.0f + c * 1e-3f);
  const V mul = V{} + 0.999999f, add = V{} + 1e-7f;
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;
  float s = 0.0f;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < kLanes; ++l) s += acc[c][l];
  do_not_optimize(s);
  return 2.0 * kLanes * kChains * static_cast<double>(iters);  // flops
}

__attribute__((target("avx512f,fma"))) inline double fma_avx512(int64_t iters) {
  return fma_loop<F32x16>(iters);
}
__attribute__((target("avx2,fma"))) inline double fma_avx2(int64_t iters) {
  return fma_loop<F32x8>(iters);
}
inline double fma_sse(int64_t iters) { return fma_loop<F32x4>(iters); }

}  // namespace detail

/// Measured f32 FMA peak of this machine with `threads` threads, in GFLOP/s (the widest
/// vector ISA the CPU has; a ~0.1 s measurement, best of three).
inline double measured_peak_gflops(int threads, std::string* isa = nullptr) {
  double (*kernel)(int64_t) = detail::fma_sse;
  const char* name = "sse";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    kernel = detail::fma_avx512;
    name = "avx512";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernel = detail::fma_avx2;
    name = "avx2";
  }
  if (isa) *isa = name;
  constexpr int64_t kIters = 2'000'000;
  double best = 0.0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> flops(threads);
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { flops[t] = kernel(kIters); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    double total = 0.0;
    for (double f : flops) total += f;
    best = std::max(best, total / s * 1e-9);
  }
  return best;
}

}  // namespace bench
