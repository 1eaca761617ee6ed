// tests/test_op_cases_linalg.cpp — the op test driver's cases for issue 32's linear algebra
// (see tests/op_cases.hpp): eigh, LU, triangular and least-squares solves, pinv, matrix_rank,
// matrix_power/exp, householder_product, the norms, cond, cross, kron, tensordot, multi_dot.
#include <cmath>
#include <limits>
#include <vector>

#include "op_cases.hpp"
#include "tensor_values.hpp"

namespace ember_test {

using ember::Tensor;

namespace {
using ember_test::kInf;

// (A + Aᵀ)/2: eigh reads one triangle, so the differentiable cases symmetrise their input
// (as the reference does), and finite differences see PyTorch's symmetric gradient.
Tensor sym(const Tensor& a) { return (a + a.transpose(-2, -1)) * 0.5; }

// The fixture stores pivots as i64; lu_solve takes lu_factor's i32 (an undefined handle is
// passed on for lu_solve to refuse).
Tensor pivots_of(Fixture& f) {
  Tensor p = f["pivots"];
  return p.defined() ? p.to(ember::DType::i32) : p;
}

std::vector<Tensor> operands(Fixture& f, int count) {
  std::vector<Tensor> xs;
  for (int i = 0; i < count; ++i) xs.push_back(f["x" + std::to_string(i)]);
  return xs;
}

}  // namespace

void add_linalg_cases(OpTable& t) {
  // ---- eigh, eigvalsh
  t["eigh_values"] = [](Fixture& f) { return ember::eigh(sym(f["a"])).eigenvalues; };
  t["eigh_vectors_batched"] = [](Fixture& f) {
    // v[i, j]·v[0, j]: independent of each eigenvector's sign.
    const Tensor v = ember::eigh(sym(f["a"])).eigenvectors;
    return v * v.narrow(-2, 0, 1);
  };
  t["eigh_upper"] = [](Fixture& f) { return ember::eigh(f["a"], "U").eigenvalues; };
  t["eigvalsh"] = [](Fixture& f) { return ember::eigvalsh(sym(f["a"])); };
  // ---- LU and determinants
  t["slogdet"] = [](Fixture& f) { return ember::slogdet(f["a"]).logabsdet; };
  t["slogdet_sign"] = [](Fixture& f) { return ember::slogdet(f["a"]).sign; };
  t["lu_factor"] = t["lu_factor_wide"] =
      t["lu_factor_tall_batched"] = [](Fixture& f) { return ember::lu_factor(f["a"]).LU; };
  t["lu_factor_pivots"] = [](Fixture& f) {
    return ember::lu_factor(f["a"]).pivots.to(ember::DType::i64);
  };
  t["lu_l"] = [](Fixture& f) { return ember::lu(f["a"]).L; };
  t["lu_u"] = [](Fixture& f) { return ember::lu(f["a"]).U; };
  t["lu_p_wide"] = [](Fixture& f) { return ember::lu(f["a"]).P; };
  t["lu_solve"] = [](Fixture& f) { return ember::lu_solve(f["lu"], pivots_of(f), f["b"]); };
  t["lu_solve_adjoint_right"] = [](Fixture& f) {
    return ember::lu_solve(f["lu"], pivots_of(f), f["b"], /*left=*/false, /*adjoint=*/true);
  };
  // ---- solves
  t["solve_triangular_lower"] = [](Fixture& f) {
    return ember::solve_triangular(f["a"], f["b"], /*upper=*/false);
  };
  t["solve_triangular_upper_right_unit"] = [](Fixture& f) {
    return ember::solve_triangular(f["a"], f["b"], /*upper=*/true, /*left=*/false,
                                   /*unitriangular=*/true);
  };
  t["triangular_solve_transpose"] = [](Fixture& f) {
    return ember::triangular_solve(f["b"], f["a"], /*upper=*/true, /*transpose=*/true).solution;
  };
  t["cholesky_solve"] = [](Fixture& f) { return ember::cholesky_solve(f["b"], f["l"]); };
  t["cholesky_solve_upper"] = [](Fixture& f) {
    return ember::cholesky_solve(f["b"], f["l"], /*upper=*/true);
  };
  t["lstsq_tall"] = [](Fixture& f) { return ember::lstsq(f["a"], f["b"]).solution; };
  t["lstsq_wide_batched"] = [](Fixture& f) { return ember::lstsq(f["a"], f["b"]).solution; };
  // ---- pseudo-inverse, rank, powers, exponential, Householder products
  t["pinv"] = t["pinv_wide_batched"] = [](Fixture& f) { return ember::pinv(f["a"]); };
  t["matrix_rank"] =
      t["matrix_rank_batched"] = [](Fixture& f) { return ember::matrix_rank(f["a"]); };
  t["matrix_power_3"] = [](Fixture& f) { return ember::matrix_power(f["a"], 3); };
  t["matrix_power_neg2"] = [](Fixture& f) { return ember::matrix_power(f["a"], -2); };
  t["matrix_exp"] =
      t["matrix_exp_scaled_batched"] = [](Fixture& f) { return ember::matrix_exp(f["a"]); };
  t["householder_product"] = t["householder_product_batched"] = [](Fixture& f) {
    return ember::householder_product(f["a"], f["tau"]);
  };
  // ---- norms and condition numbers
  t["vector_norm_2_dim"] = [](Fixture& f) { return ember::vector_norm(f["x"], 2.0, {1}); };
  t["vector_norm_3_keepdim"] = [](Fixture& f) {
    return ember::vector_norm(f["x"], 3.0, {0, 2}, /*keepdim=*/true);
  };
  t["matrix_norm_fro"] = [](Fixture& f) { return ember::matrix_norm(f["a"]); };
  t["matrix_norm_nuc"] = [](Fixture& f) { return ember::matrix_norm(f["a"], "nuc"); };
  t["matrix_norm_2"] = [](Fixture& f) { return ember::matrix_norm(f["a"], 2.0); };
  t["matrix_norm_neg2_dims"] = [](Fixture& f) { return ember::matrix_norm(f["a"], -2.0, {0, 2}); };
  t["matrix_norm_1_keepdim"] = [](Fixture& f) {
    return ember::matrix_norm(f["a"], 1.0, {-2, -1}, /*keepdim=*/true);
  };
  t["matrix_norm_neginf_dims"] = [](Fixture& f) {
    return ember::matrix_norm(f["a"], -kInf, {2, 0});
  };
  t["cond"] = [](Fixture& f) { return ember::cond(f["a"]); };
  t["cond_fro"] = [](Fixture& f) { return ember::cond(f["a"], "fro"); };
  t["cond_inf"] = [](Fixture& f) { return ember::cond(f["a"], kInf); };
  // ---- products
  t["cross"] = [](Fixture& f) { return ember::cross(f["a"], f["b"]); };
  t["cross_dim0_broadcast"] = [](Fixture& f) { return ember::cross(f["a"], f["b"], 0); };
  t["kron"] = t["kron_ranks"] = [](Fixture& f) { return ember::kron(f["a"], f["b"]); };
  t["tensordot_2"] = [](Fixture& f) { return ember::tensordot(f["a"], f["b"], 2); };
  t["tensordot_pairs"] = [](Fixture& f) {
    return ember::tensordot(f["a"], f["b"], {0, 2}, {1, 0});
  };
  t["multi_dot"] = [](Fixture& f) { return ember::multi_dot(operands(f, 5)); };
  t["multi_dot_matrices"] = [](Fixture& f) { return ember::multi_dot(operands(f, 2)); };
  t["chain_matmul"] = [](Fixture& f) { return ember::chain_matmul(operands(f, 3)); };
}

}  // namespace ember_test
