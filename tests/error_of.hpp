// tests/error_of.hpp — the one helper every error test uses: run a callable that must throw
// ember::Error and get its message back.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "ember/error.hpp"

namespace ember::test_util {

/// Runs `fn`, expecting an ember::Error; returns its message. Another exception, or none,
/// records a test failure (naming `what` when given) and returns "".
template <typename Fn>
std::string error_of(Fn&& fn, const std::string& what = "") {
  const std::string prefix = what.empty() ? "" : what + ": ";
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << prefix << "threw a non-ember exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << prefix << "did not throw";
  return "";
}

/// Expects an op's error `message` to start with "op:" (every op names itself first) and to
/// contain `part`.
inline void expect_op_error(const std::string& message, const std::string& op,
                            const std::string& part) {
  EXPECT_EQ(message.rfind(op + ":", 0), 0u) << message;
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

}  // namespace ember::test_util
