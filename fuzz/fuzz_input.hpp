// fuzz/fuzz_input.hpp — what the libFuzzer targets share: each input written to a file of this
// process ($EMBER_FUZZ_DIR, else /tmp), since the readers under test read files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember_fuzz {

/// Writes the input to /tmp/ember_fuzz_input.PID`suffix` (the same file every call) and returns
/// its path; "" when the file cannot be written.
inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("EMBER_FUZZ_DIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/ember_fuzz_input." +
           std::to_string(::getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return "";
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace ember_fuzz
