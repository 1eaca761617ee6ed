// fuzz/fuzz_pth.cpp — libFuzzer target for the torch.save reader (io::load_pth,
// io::pth_catalogue; src/io/pth*.cpp).
//
// Each input is written to a file and read as a catalogue, then loaded whole with CRC checks
// off (so mutations reach the pickle interpreter and the views instead of stopping at the
// zip's CRC-32) and with them on, and by key "model". Refusals must be ember::Error; any other
// exception escapes and, like any ASan/UBSan report, is a crash. Seed it with the committed
// fixtures: ninja -C build-fuzz fuzz_pth && ./build-fuzz/fuzz_pth CORPUS tests/data/pth
#include <cstdint>
#include <cstdio>
#include <string>

#include "ember/error.hpp"
#include "ember/io/pth.hpp"
#include "fuzz_input.hpp"

namespace {

template <typename Fn>
void attempt(Fn&& fn) {
  try {
    fn();
  } catch (const ember::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ember_fuzz::write_input(data, size, ".pth");
  if (path.empty()) return 0;
  using namespace ember;  // NOLINT: harness
  attempt([&] { (void)io::pth_catalogue(path); });
  attempt([&] { (void)io::load_pth(path, {.verify_crc = false}); });
  attempt([&] { (void)io::load_pth(path); });
  attempt([&] { (void)io::load_pth(path, {.key = "model", .verify_crc = false}); });
  return 0;
}
