// src/nn/flatten.cpp — Flatten and Unflatten (ember/nn/flatten.hpp).
#include "ember/nn/flatten.hpp"

#include "nn/py_repr.hpp"

namespace ember::nn {

std::string FlattenImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

UnflattenImpl::UnflattenImpl(UnflattenOptions options) : options_(std::move(options)) {
  const Shape& sizes = options_.unflattened_size;
  EMBER_CHECK(!sizes.empty(), "Unflatten: unflattened_size is empty (expected at least one size)");
  int inferred = 0;
  for (int64_t s : sizes) {
    EMBER_CHECK(s > 0 || s == -1, "Unflatten: unflattened_size ", sizes.to_string(),
                " (expected sizes > 0, or one -1)");
    inferred += s == -1;
  }
  EMBER_CHECK(inferred <= 1, "Unflatten: unflattened_size ", sizes.to_string(),
              " has more than one -1");
}

Tensor UnflattenImpl::forward(const Tensor& x) {
  const int64_t dim = options_.dim;
  const Shape& sizes = options_.unflattened_size;
  EMBER_CHECK(x.defined() && x.dim() > 0, "Unflatten: input is undefined or 0-d");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  EMBER_CHECK(d >= 0 && d < x.dim(), "Unflatten(dim=", dim, "): input shape ",
              x.shape().to_string(), " has no dim ", dim);
  int64_t known = 1;
  bool infer = false;
  for (int64_t s : sizes) {
    if (s == -1)
      infer = true;
    else
      known *= s;
  }
  const int64_t n = x.size(d);
  EMBER_CHECK(infer ? n % known == 0 : n == known, "Unflatten(dim=", dim,
              ", unflattened_size=", pyrepr::py_tuple(sizes), "): input shape ",
              x.shape().to_string(), " has ", n, " elements in dim ", dim, " (expected ",
              infer ? "a multiple of " : "", known, ")");
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i != d) {
      shape.push_back(x.size(i));
      continue;
    }
    for (int64_t s : sizes) shape.push_back(s == -1 ? n / known : s);
  }
  return x.reshape(Shape(shape));
}

std::string UnflattenImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

}  // namespace ember::nn
