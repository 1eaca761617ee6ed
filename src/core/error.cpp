// src/core/error.cpp — out-of-line throw helpers, so EMBER_CHECK stays small at call sites.
#include "ember/error.hpp"

namespace ember::detail {

void throw_error(const std::string& message) { throw Error(message); }

void throw_internal(const char* file, int line, const std::string& message) {
  throw Error(concat("ember internal error (a bug in ember, please report it) at ", file, ":", line,
                     ": ", message));
}

}  // namespace ember::detail
