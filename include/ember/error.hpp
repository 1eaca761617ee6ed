// ember/error.hpp — the exceptions ember throws and the checks that raise them.
//
// User errors (bad shapes, bad arguments, bad files) throw ember::Error with a message
// of the form "op: what (got X, expected Y)". Internal invariants use EMBER_ASSERT,
// which also throws (library code never aborts) but says the bug is ours.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

/// Every error ember reports to its user. `what()` names the op and says what to fix.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An allocation failed after cached blocks were released and the request retried.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& message) : Error(message) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void throw_error(const std::string& message);
[[noreturn]] void throw_internal(const char* file, int line, const std::string& message);

/// Note [Errors name the op the user called]
/// A composite op (addcmul, conv1d, stack, ...) runs other ops, whose checks name
/// themselves and their own operands ("mul: shapes [3, 4, 5] and [4] ..."). The op the user
/// called opens an ErrorScope: while the outermost scope of this thread is open, an
/// ember::Error raised below it that does not already name its op is prefixed with the op and
/// the user's inputs ("addcmul: inputs [3, 4], [3, 4, 5], [4]: mul: shapes ..."). Nested
/// scopes defer to the outermost; opening one costs a thread-local read and write.
class ErrorScope {
 public:
  explicit ErrorScope(const char* op) noexcept;
  ErrorScope(const ErrorScope&) = delete;
  ErrorScope& operator=(const ErrorScope&) = delete;
  /// The user's inputs, for the message ("inputs [3, 4] f32, [4] f32").
  virtual std::string describe() const = 0;
  const char* op() const { return op_; }

 protected:
  ~ErrorScope();

 private:
  const char* op_;
  bool outermost_;
};
/// The op of this thread's outermost open ErrorScope, or null.
const char* current_error_scope_op();
}  // namespace detail

}  // namespace ember

/// Throws ember::Error built from the remaining arguments when `cond` is false.
/// Example: EMBER_CHECK(a.dim() == 2, "matmul: expected a matrix (got rank ", a.dim(), ")");
#define EMBER_CHECK(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::ember::detail::throw_error(::ember::detail::concat(__VA_ARGS__)); \
  } while (0)

/// Internal invariant: a failure is a bug in ember, never the user's input.
#define EMBER_ASSERT(cond, ...)                                                            \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::ember::detail::throw_internal(__FILE__, __LINE__,                                  \
                                      ::ember::detail::concat(#cond, " ", ##__VA_ARGS__)); \
  } while (0)
