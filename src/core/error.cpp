// src/core/error.cpp — out-of-line throw helpers, so EMBER_CHECK stays small at call sites, and
// the error scopes of Note [Errors name the op the user called] (ember/error.hpp).
#include "ember/error.hpp"

#include <cstring>

namespace ember::detail {

namespace {
thread_local const ErrorScope* t_scope = nullptr;

// Whether `message` already starts with "op:" or "Tensor::op:".
bool names(const std::string& message, const char* op) {
  const size_t n = std::strlen(op);
  for (const char* prefix : {"", "Tensor::"}) {
    const size_t p = std::strlen(prefix);
    if (message.compare(0, p, prefix) == 0 && message.compare(p, n, op) == 0 &&
        message.size() > p + n && message[p + n] == ':')
      return true;
  }
  return false;
}
}  // namespace

ErrorScope::ErrorScope(const char* op) noexcept : op_(op), outermost_(t_scope == nullptr) {
  if (outermost_) t_scope = this;
}

ErrorScope::~ErrorScope() {
  if (outermost_) t_scope = nullptr;
}

const char* current_error_scope_op() { return t_scope ? t_scope->op() : nullptr; }

void throw_error(const std::string& message) {
  const ErrorScope* scope = t_scope;
  if (scope == nullptr || names(message, scope->op())) throw Error(message);
  t_scope = nullptr;  // describe() may itself run code that checks
  std::string context;
  try {
    context = scope->describe();
  } catch (...) {
  }
  t_scope = scope;
  throw Error(concat(scope->op(), ": ", context.empty() ? "" : context + ": ", message));
}

void throw_internal(const char* file, int line, const std::string& message) {
  throw Error(concat("ember internal error (a bug in ember, please report it) at ", file, ":", line,
                     ": ", message));
}

}  // namespace ember::detail
