// src/ops/catalogue.cpp — the catalogue's table (include/ember/catalogue.hpp) and supports().
#include "ember/catalogue.hpp"

#include <array>

#include "ember/error.hpp"

namespace ember {
namespace {

#define EMBER_ROW_(name, family, grad, cpu, cuda) \
  OpInfo{Op::name, #name, OpFamily::family, grad, cpu, cuda},
#define EMBER_ROW_OTHER_(name, family, grad, cpu, cuda, kernel) \
  EMBER_ROW_(name, family, grad, cpu, cuda)

constexpr std::array<OpInfo, static_cast<size_t>(Op::count)> kTable = {
    EMBER_OPS_UNARY(EMBER_ROW_) EMBER_OPS_BINARY(EMBER_ROW_) EMBER_OPS_REDUCE(EMBER_ROW_)
        EMBER_OPS_OTHER(EMBER_ROW_OTHER_)};

#undef EMBER_ROW_OTHER_
#undef EMBER_ROW_

constexpr bool rows_in_order() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].op) != i) return false;
  return true;
}
static_assert(rows_in_order(), "the catalogue table must list ops in Op order");

constexpr bool differentiable_ops_are_float() {
  for (const OpInfo& row : kTable)
    if (row.differentiable && !row.cpu.contains(DType::f64)) return false;
  return true;
}
static_assert(differentiable_ops_are_float(),
              "a differentiable op must support f64 on the CPU (its gradcheck tier runs in f64)");

}  // namespace

std::string DTypeSet::to_string() const {
  std::string out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (!contains(static_cast<DType>(i))) continue;
    if (!out.empty()) out += ", ";
    out += dtype_name(static_cast<DType>(i));
  }
  return out.empty() ? "none" : out;
}

const OpInfo& op_info(Op op) {
  const auto i = static_cast<size_t>(op);
  EMBER_CHECK(i < kTable.size(), "op_info: op ", i, " is not in the catalogue (", kTable.size(),
              " ops)");
  return kTable[i];
}

std::span<const OpInfo> catalogue() { return kTable; }

Op op_by_name(std::string_view name) {
  for (const OpInfo& row : kTable)
    if (name == row.name) return row.op;
  return Op::count;
}

bool supports(Op op, DType dtype, Device device) {
#if !defined(EMBER_WITH_CUDA)
  if (device.type == DeviceType::cuda) return false;
#endif
  return op_info(op).dtypes(device.type).contains(dtype);
}

std::string_view family_name(OpFamily family) {
  switch (family) {
    case OpFamily::elementwise: return "elementwise";
    case OpFamily::reduce: return "reduce";
    case OpFamily::sort: return "sort";
    case OpFamily::softmax: return "softmax";
    case OpFamily::linalg: return "linalg";
    case OpFamily::shape: return "shape";
    case OpFamily::index: return "index";
    case OpFamily::random: return "random";
    case OpFamily::norm: return "norm";
    case OpFamily::conv: return "conv";
    case OpFamily::loss: return "loss";
    case OpFamily::rnn: return "rnn";
    case OpFamily::attention: return "attention";
  }
  return "?";
}

}  // namespace ember
