// src/cpu/rnn.cpp — the fused LSTM step and its backward on the CPU: the cells of
// src/kernels/rnn.hpp over the thread pool, with the CPU's exp and tanh (HostMath).
#include "kernels/rnn.hpp"

#include <type_traits>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/parallel.hpp"
#include "cpu/vec_math.hpp"

namespace ember::cpu {
namespace {

template <typename Args>
void run_cells(const Args& a, const char* name) {
  dispatch_float(a.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallel_for(a.batch * a.hidden, kGrainMath / 4, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        if constexpr (std::is_same_v<Args, LstmStepArgs>)
          kernels::lstm_step_cell<HostMath, T>(a, e);
        else
          kernels::lstm_step_backward_cell<HostMath, T>(a, e);
      }
    });
  });
}

}  // namespace

void lstm_step(const LstmStepArgs& a) { run_cells(a, "lstm_step"); }
void lstm_step_backward(const LstmStepBackwardArgs& a) { run_cells(a, "lstm_step_backward"); }

}  // namespace ember::cpu
