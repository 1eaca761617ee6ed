// tests/cli_test_util.hpp — what the tests of the `ember` command (tests/test_cli_*.cpp) share:
// running it as a child process and reading what it printed and its exit status, the check
// that a bad input ends in a short error rather than a trace, and writing small text files.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "io_test_util.hpp"

#ifndef EMBER_CLI_PATH
#define EMBER_CLI_PATH ""
#endif

/// Skips a test when the build has no `ember` command (EMBER_BUILD_TOOLS=OFF).
#define SKIP_WITHOUT_CLI()                 \
  if (std::string(EMBER_CLI_PATH).empty()) \
  GTEST_SKIP() << "built without tools (EMBER_BUILD_TOOLS=OFF): no ember command to run"

namespace ember_test {

/// Where a command's stderr goes: into `output` with stdout (2>&1), or apart into `err`.
enum class Stderr { merged, apart };

struct CliRun {
  int status = 0;      // the exit status; 128 + the signal when a signal ended it
  std::string output;  // stdout (and stderr, when merged)
  std::string err;     // stderr (Stderr::apart only)
};

/// Runs a shell command and waits for it.
inline CliRun run_command(const std::string& command, Stderr stderr_to = Stderr::merged) {
  std::optional<ScratchDir> scratch;
  std::string cmd = command;
  if (stderr_to == Stderr::apart) {
    scratch.emplace();
    cmd += " 2>" + scratch->file("stderr.txt");
  } else {
    cmd += " 2>&1";
  }
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << cmd;
  CliRun r;
  if (!pipe) return {-1, "", ""};
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (scratch) {
    std::ifstream in(scratch->file("stderr.txt"), std::ios::binary);
    r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return r;
}

/// Runs `ember <args>`.
inline CliRun run_cli(const std::string& args, Stderr stderr_to = Stderr::merged) {
  return run_command(std::string(EMBER_CLI_PATH) + " " + args, stderr_to);
}

/// `ember <args>` fails as a user error should: a non-zero status (not a signal), `says` in
/// its messages (stderr when apart), no trace, and at most `max_lines` lines. Returns the run.
inline CliRun expect_cli_error(const std::string& args, const std::string& says, int max_lines = 11,
                               Stderr stderr_to = Stderr::merged) {
  const CliRun r = run_cli(args, stderr_to);
  const std::string& text = stderr_to == Stderr::apart ? r.err : r.output;
  EXPECT_NE(r.status, 0) << args;
  EXPECT_LT(r.status, 128) << args << ": killed by a signal\n" << text;
  EXPECT_NE(text.find(says), std::string::npos)
      << args << "\nexpected: " << says << "\ngot: " << text;
  EXPECT_EQ(text.find("terminate called"), std::string::npos) << text;
  EXPECT_EQ(text.find("what():"), std::string::npos) << text;
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), max_lines) << "short:\n" << text;
  return r;
}

}  // namespace ember_test
