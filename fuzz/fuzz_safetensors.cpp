// fuzz/fuzz_safetensors.cpp — libFuzzer target for the checkpoint loader (ARCHITECTURE §7).
//
// Each input is written to a file and read every way ember reads checkpoints
// (tests/io_load_all.hpp: SafetensorsFile + checksum + every tensor, inspect, load_model,
// strict and non-strict load_state, load_checkpoint). Refusals must be ember::Error; any
// other exception escapes and, like any ASan/UBSan report, is a crash.
//
// Resource limit of the harness, not a safety check: load_model builds whatever module the
// file's architecture declares (a Linear(10^6, 10^6) is 4 TB) before matching it against
// the tensors, as torch does. The harness builds only architectures whose integer options
// are at most 4096, so the fuzzer spends its time on parsing and validation, not on
// allocating and initialising huge modules. Build and run: `make fuzz` (see Makefile).
#include <cstdint>
#include <cstdio>
#include <string>

#include "../tests/io_load_all.hpp"
#include "fuzz_input.hpp"

namespace {

bool small_numbers(const ember::nn::json& j) {
  if (j.is_number_integer()) return j.get<int64_t>() <= 4096;
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= 4096;
  if (j.is_structured())
    for (const auto& v : j)
      if (!small_numbers(v)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ember_fuzz::write_input(data, size, ".safetensors");
  if (path.empty()) return 0;
  (void)ember_test::load_all(path, [](const ember::nn::json& arch) {
    if (!small_numbers(arch)) ember::detail::throw_error("fuzz harness: architecture too large to build");
    return ember::nn::build(arch);
  });
  return 0;
}
