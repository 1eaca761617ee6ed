// src/nn/dropout.cpp — Dropout (ember/nn/dropout.hpp).
#include "ember/nn/dropout.hpp"

#include <sstream>

namespace ember::nn {

DropoutImpl::DropoutImpl(DropoutOptions o) : options_(o) { check_options(o, "Dropout"); }

std::string DropoutImpl::extra_repr() const {
  std::ostringstream s;  // "p=0.5, inplace=False", p as the stream prints it
  s << "p=" << options_.p << ", inplace=False";
  return s.str();
}

}  // namespace ember::nn
