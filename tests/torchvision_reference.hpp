// tests/torchvision_reference.hpp — torchvision models with seeded weights as references for
// ember's vision zoo, written at test time by tests/gen_resnet_fixtures.py (the weights are
// too big to commit) into a folder removed at exit. Without /usr/bin/python3 or torchvision
// the tests that ask skip, saying why; another failure of the script fails them.
//
//   const ember_test::TorchvisionReference r = ember_test::torchvision_reference("resnet18");
//   EMBER_SKIP_WITHOUT_REFERENCE(r);
//   io::load_state(net, r.weights.string());          // its state_dict
//   io::SafetensorsFile want(r.expected.string());    // x, y, logits_eval, ... (the script's doc)
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "fixtures.hpp"

namespace ember_test {

struct TorchvisionReference {
  std::filesystem::path weights, expected;  // ARCH.weights.safetensors, ARCH.expected.safetensors
  std::string skip;                         // non-empty: why there is none
};

class TorchvisionReferenceFolder {
 public:
  ~TorchvisionReferenceFolder() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // The reference of `arch` made with the script's extra `args` (once per architecture: the
  // first call's arguments make it).
  TorchvisionReference get(const std::string& arch, const std::string& args) {
    if (auto it = made_.find(arch); it != made_.end()) return it->second;
    TorchvisionReference r;
    const std::string python = "/usr/bin/python3";
    if (!std::filesystem::exists(python)) {
      r.skip = "no " + python +
               " (Debian's python3-torch and python3-torchvision make the torchvision reference)";
      return made_[arch] = r;
    }
    if (dir_.empty()) {
      dir_ = std::filesystem::temp_directory_path() /
             ("ember_torchvision_ref_" + std::to_string(getpid()));
      std::filesystem::create_directories(dir_);
    }
    const std::string script = data_dir() + "/../gen_resnet_fixtures.py";
    const std::string cmd = python + " " + script + " --out " + dir_.string() + " --arch " + arch +
                            " " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf;
    while (pipe != nullptr) {
      const size_t n = fread(buf.data(), 1, buf.size(), pipe);
      if (n == 0) break;
      out.append(buf.data(), n);
    }
    const int status = pipe != nullptr ? pclose(pipe) : -1;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      r.skip = out + " (install python3-torchvision: make test does)";
    } else if (status != 0) {
      ADD_FAILURE() << cmd << " failed (status " << status << "):\n" << out;
      r.skip = "the reference script failed";
    }
    r.weights = dir_ / (arch + ".weights.safetensors");
    r.expected = dir_ / (arch + ".expected.safetensors");
    return made_[arch] = r;
  }

 private:
  std::filesystem::path dir_;
  std::map<std::string, TorchvisionReference> made_;
};

inline TorchvisionReference torchvision_reference(const std::string& arch,
                                                  const std::string& args = "") {
  static TorchvisionReferenceFolder folder;
  return folder.get(arch, args);
}

}  // namespace ember_test

#define EMBER_SKIP_WITHOUT_REFERENCE(r) \
  if (!(r).skip.empty()) GTEST_SKIP() << (r).skip
