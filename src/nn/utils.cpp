// src/nn/utils.cpp — parameters_to_vector and vector_to_parameters (ember/nn/utils.hpp).
#include "ember/nn/utils.hpp"

#include <string>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"

namespace ember::nn::utils {
namespace {

// Every parameter defined, and all on the first one's device.
void check_parameters(const char* op, const std::vector<Tensor>& parameters) {
  EMBER_CHECK(!parameters.empty(), op, ": the parameter list is empty (expected at least one)");
  for (size_t i = 0; i < parameters.size(); ++i) {
    EMBER_CHECK(parameters[i].defined(), op, ": parameter ", i, " is an empty handle");
    EMBER_CHECK(parameters[i].device() == parameters[0].device(), op, ": parameter ", i, " is on ",
                parameters[i].device().str(), " but parameter 0 is on ",
                parameters[0].device().str(), " (expected one device)");
  }
}

}  // namespace

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  check_parameters("parameters_to_vector", parameters);
  std::vector<Tensor> flat;
  flat.reserve(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    EMBER_CHECK(parameters[i].dtype() == parameters[0].dtype(), "parameters_to_vector: parameter ",
                i, " is ", dtype_name(parameters[i].dtype()), " but parameter 0 is ",
                dtype_name(parameters[0].dtype()), " (expected one dtype)");
    flat.push_back(parameters[i].reshape({parameters[i].numel()}));
  }
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  check_parameters("vector_to_parameters", parameters);
  EMBER_CHECK(vec.defined(), "vector_to_parameters: vec is an empty handle");
  EMBER_CHECK(vec.dim() == 1, "vector_to_parameters: vec must be 1-D (got shape ",
              vec.shape().to_string(), ")");
  EMBER_CHECK(vec.device() == parameters[0].device(), "vector_to_parameters: vec is on ",
              vec.device().str(), " but the parameters are on ", parameters[0].device().str());
  int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  EMBER_CHECK(vec.numel() == total, "vector_to_parameters: vec has ", vec.numel(),
              " elements but the parameters hold ", total, " (expected equal)");
  NoGradGuard no_grad;
  int64_t at = 0;
  for (const Tensor& p : parameters) {
    const int64_t n = p.numel();
    Tensor(p).copy_(vec.narrow(0, at, n).reshape(p.shape()).to(p.dtype()));
    at += n;
  }
}

}  // namespace ember::nn::utils
