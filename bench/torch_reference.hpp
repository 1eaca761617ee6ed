// bench/torch_reference.hpp — running a benchmark's PyTorch side (bench/torch/*.py) in the
// same run: the script is started with $EMBER_PYTHON (default python3) from
// $EMBER_SOURCE_DIR/bench/torch (default: this source tree), and its last line that is a JSON
// object is the result. The script's other output (progress) is echoed to stderr.
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"

namespace bench {

/// Runs `bench/torch/SCRIPT ARGS`; its JSON result, or null when it failed (said on stderr,
/// naming `who`).
inline nlohmann::json run_torch_script(const char* who, const std::string& script_and_args) {
  const char* src = std::getenv("EMBER_SOURCE_DIR");
  const char* py = std::getenv("EMBER_PYTHON");
  const std::string cmd = std::string(py ? py : "python3") + " " +
                          std::string(src ? src : EMBER_SOURCE_DIR_DEFAULT) + "/bench/torch/" +
                          script_and_args + " 2>&1";
  std::fprintf(stderr, "%s: running %s\n", who, cmd.c_str());
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return nullptr;
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  const size_t line = out.rfind("\n{");
  const size_t brace = line != std::string::npos ? line + 1 : (out.rfind('{', 0) == 0 ? 0 : line);
  if (status != 0 || brace == std::string::npos) {
    std::fprintf(stderr, "%s: the PyTorch reference failed (status %d):\n%s\n", who, status,
                 out.c_str());
    return nullptr;
  }
  if (brace > 0) std::fprintf(stderr, "%s\n", out.substr(0, brace - 1).c_str());
  return nlohmann::json::parse(out.substr(brace), nullptr, /*allow_exceptions=*/false);
}

}  // namespace bench
