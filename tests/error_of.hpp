// tests/error_of.hpp — the helpers every error test uses: run a callable that must throw
// ember::Error and get its message back, and look for the parts a message must name.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

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

/// Expects `fn` to throw an ember::Error whose message contains every one of `parts`.
template <typename Fn>
std::string expect_error(Fn&& fn, const std::vector<std::string>& parts,
                         const std::string& what = "") {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << what << ": '" << p << "' not in: " << msg;
    return msg;
  }
  ADD_FAILURE() << what << ": no ember::Error thrown";
  return "";
}

/// Whether `message` contains `part`.
inline bool contains(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

/// Expects `message` to contain `part` (each of `parts`), naming what is missing.
inline void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_TRUE(contains(message, part)) << "missing '" << part << "' in: " << message;
}
inline void expect_contains_all(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) expect_contains(message, part);
}

}  // namespace ember::test_util
