// tools/cli_common.cpp — checks every `ember` subcommand shares (tools/cli_common.hpp).
#include "cli_common.hpp"

#include <unistd.h>

#include <filesystem>

#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember_cli {

using namespace ember;
namespace fs = std::filesystem;

/// `path` is a regular file this process can read.
void check_input_file(const char* flag, const std::string& path) {
  std::error_code ec;
  EMBER_CHECK(fs::is_regular_file(path, ec), "ember: ", flag, " ", path, ": no such file",
              fs::exists(path, ec) ? " (it is a folder)" : "");
  EMBER_CHECK(::access(path.c_str(), R_OK) == 0, "ember: ", flag, " ", path, ": not readable");
}

/// The device exists on this machine (Device::parse checks the spelling).
Device check_device(const std::string& name) {
  const Device d = Device::parse(name);
#if defined(EMBER_WITH_CUDA)
  const char* build = "";
#else
  const char* build = "; this ember was built without CUDA";
#endif
  if (!d.is_cuda()) return d;
  const int count = cuda_device_count();  // only now: it starts the CUDA runtime
  EMBER_CHECK(d.index < count, "ember: --device ", name, ": no such device (this machine has ",
              count, " CUDA device", count == 1 ? "" : "s", build, ")");
  return d;
}

}  // namespace ember_cli
