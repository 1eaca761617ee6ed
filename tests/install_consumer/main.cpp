// A first program against an installed ember: two tensors, a product, backward, a check.
// Exits non-zero when a value is wrong, so the install test fails loudly.
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include <ember/ember.hpp>

namespace {

bool run() {
  using namespace ember;
  Tensor a = tensor({1.0f, 2.0f, 3.0f}, {3}, {.requires_grad = true});
  Tensor b = tensor({4.0f, 5.0f, 6.0f}, {3});
  Tensor y = (a * b).sum();  // 1*4 + 2*5 + 3*6 = 32
  y.backward();              // dy/da = b

  const float value = y.item<float>();
  const std::vector<float> grad = a.grad().to_vector<float>();
  const std::vector<float> expected = {4.0f, 5.0f, 6.0f};
  bool ok = std::fabs(value - 32.0f) < 1e-5f && grad.size() == expected.size();
  for (size_t i = 0; ok && i < grad.size(); ++i) ok = std::fabs(grad[i] - expected[i]) < 1e-6f;

  std::printf("y = %g, a.grad = [%g, %g, %g]: %s\n", value, grad.size() > 0 ? grad[0] : 0.0f,
              grad.size() > 1 ? grad[1] : 0.0f, grad.size() > 2 ? grad[2] : 0.0f,
              ok ? "ok" : "MISMATCH (expected y = 32, a.grad = [4, 5, 6])");
  return ok;
}

}  // namespace

int main() {
  try {
    return run() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "install consumer: %s\n", e.what());
    return 1;
  }
}
