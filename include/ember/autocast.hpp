// ember/autocast.hpp — mixed precision: an autocast scope (PyTorch's torch.autocast) that
// picks the dtype of each op from one table (docs/mixed_precision.md).
//
//   {
//     ember::AutocastGuard autocast(ember::DType::bf16);
//     Tensor loss = cross_entropy(model(x), y);  // Linear runs in bf16, the loss in f32
//   }
//   loss.backward();                              // parameters' gradients come back in f32
//
// Inside the scope, GEMM-class ops (matmul, linear, convolutions, attention) cast their
// floating inputs to the scope's dtype (f32 accumulation inside the kernels); ops that need
// range or accuracy (softmax, log_softmax, norms, losses, exp/log/pow, sums) cast 16-bit
// inputs to f32; every other op runs in the dtype it receives. Parameters and optimizer state
// stay f32 (master weights): a parameter's cast is made once per scope and reused.
#pragma once

#include <cstdint>

#include "ember/catalogue.hpp"
#include "ember/dtype.hpp"

namespace ember {

/// What an op does with its inputs' dtypes under autocast (the table: autocast_policy).
enum class AutocastPolicy : uint8_t {
  none,     ///< runs in the dtype it receives
  lower,    ///< f32/f16/bf16 inputs cast to the scope's dtype (f64 left alone)
  f32,      ///< f16/bf16 inputs cast to f32
  promote,  ///< floating inputs cast to the widest floating dtype among them
};

/// The policy of `op` (one table for every op; docs/mixed_precision.md lists it).
AutocastPolicy autocast_policy(Op op);
/// "none", "lower", "f32", "promote".
const char* autocast_policy_name(AutocastPolicy policy);

/// While alive, ops on this thread follow autocast_policy with `dtype` (f16 or bf16) as the
/// low precision; `enabled = false` turns autocast off inside an enclosing scope. Scopes
/// nest; when the outermost enabled scope ends, the cache of parameter casts is dropped.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::bf16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_enabled_;
  DType previous_dtype_;
  bool counted_;
};

/// Whether an autocast scope is active on this thread, and its low dtype.
bool autocast_enabled();
DType autocast_dtype();
/// Number of parameter casts held in this thread's cache (for tests and diagnostics).
int64_t autocast_cache_size();

}  // namespace ember
