// tests/plugin_throws.cpp — a plugin library whose static initialiser throws (issue 27 item
// 5): tests/test_cli_plugin.cpp passes it to `ember ... --plugin` and expects one clear
// error line naming the library and the exception, and exit status 1 (not std::terminate).
// EMBER_TEST_PLUGIN_THROW=int makes it throw a value that is not a std::exception.
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace {

struct ThrowsWhenLoaded {
  ThrowsWhenLoaded() {
    const char* kind = std::getenv("EMBER_TEST_PLUGIN_THROW");
    if (kind != nullptr && std::strcmp(kind, "int") == 0) throw 42;
    throw std::runtime_error("plugin_throws: the registry it needs is missing");
  }
};

const ThrowsWhenLoaded throws_when_loaded;

}  // namespace
