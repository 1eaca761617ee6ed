// src/data/image_io.cpp — JPEG (TurboJPEG) and PNG (libpng) decoding to u8 RGB, behind dlopen;
// the PNG writer (zlib) and the JPEG writer (TurboJPEG).
//
// Note [Image libraries behind dlopen]
// libember.so must load on machines without libjpeg-turbo or libpng (the GPU machines have
// neither dev package, perhaps not the runtime either), so neither is linked: the few entry
// points used are declared here, with the C ABI both libraries have kept stable for years
// (TurboJPEG's tj* API of 1.x-3.x; libpng 1.6), and looked up with dlsym at the first
// decode. A missing library is an ember::Error at that point, naming the library and the
// package that has it; nothing else in ember depends on them.
//
// Note [PNG errors through longjmp]
// libpng reports a fatal error by calling our error function, which records the message
// and longjmps back to the setjmp in the step that called libpng. Each step (header, rows)
// is its own function whose locals are trivially destructible, so the jump skips no
// destructor; the tensor the rows go into is allocated between the steps. libpng never
// prints (the warning function ignores warnings) and never exits.
#include "ember/data/image_io.hpp"

#include <dlfcn.h>
#include <setjmp.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <vector>

#include "ember/error.hpp"

namespace ember::data {

namespace {

// PIL refuses images over twice its MAX_IMAGE_PIXELS (DecompressionBombError).
constexpr uint64_t kMaxPixels = 178956970;

[[noreturn]] void fail(const char* op, const std::string& name, const std::string& what) {
  ember::detail::throw_error(ember::detail::concat(op, ": ", name, ": ", what));
}

// Opens the file $`variable` names when set, else the first of `sonames` that loads; null and
// the last dlerror() otherwise.
void* open_library(const char* variable, std::initializer_list<const char*> sonames,
                   std::string& why) {
  if (const char* path = std::getenv(variable); path != nullptr && *path != '\0') {
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* e = dlerror();
    why = std::string(variable) + "=" + path + ": " + (e ? e : "dlopen failed");
    return nullptr;
  }
  for (const char* soname : sonames) {
    if (void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* e = dlerror();
    why = e ? e : "dlopen failed";
  }
  return nullptr;
}

template <typename Fn>
bool bind(void* lib, Fn& fn, const char* symbol, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (!fn) why = std::string("the library lacks ") + symbol;
  return fn != nullptr;
}

// ---- TurboJPEG (turbojpeg.h, the API of libjpeg-turbo 1.4 and later) ----

using TjHandle = void*;
constexpr int kTjRgb = 0, kTjGray = 6, kTjCmyk = 11;  // TJPF_*
constexpr int kTjCsCmyk = 3, kTjCsYcck = 4;           // TJCS_*
constexpr int kTjSamp420 = 2, kTjSampGray = 3;        // TJSAMP_*
constexpr int kTjErrWarning = 0;                      // TJERR_WARNING

struct TurboJpeg {
  TjHandle (*init_decompress)() = nullptr;
  TjHandle (*init_compress)() = nullptr;
  int (*decompress_header)(TjHandle, const unsigned char*, unsigned long, int*, int*, int*,
                           int*) = nullptr;
  int (*decompress)(TjHandle, const unsigned char*, unsigned long, unsigned char*, int, int, int,
                    int, int) = nullptr;
  int (*compress)(TjHandle, const unsigned char*, int, int, int, int, unsigned char**,
                  unsigned long*, int, int, int) = nullptr;
  char* (*error_string)(TjHandle) = nullptr;
  int (*error_code)(TjHandle) = nullptr;
  void (*free_buffer)(unsigned char*) = nullptr;
  int (*destroy)(TjHandle) = nullptr;
  std::string missing;  // why it could not be loaded; empty once loaded
};

// Loads TurboJPEG once; api.missing says why it could not be.
const TurboJpeg& load_turbojpeg() {
  static TurboJpeg api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string why;
    void* lib =
        open_library("EMBER_TURBOJPEG_LIBRARY", {"libturbojpeg.so.0", "libturbojpeg.so"}, why);
    bool ok = lib != nullptr;
    ok = ok && bind(lib, api.init_decompress, "tjInitDecompress", why);
    ok = ok && bind(lib, api.init_compress, "tjInitCompress", why);
    ok = ok && bind(lib, api.decompress_header, "tjDecompressHeader3", why);
    ok = ok && bind(lib, api.decompress, "tjDecompress2", why);
    ok = ok && bind(lib, api.compress, "tjCompress2", why);
    ok = ok && bind(lib, api.error_string, "tjGetErrorStr2", why);
    ok = ok && bind(lib, api.error_code, "tjGetErrorCode", why);
    ok = ok && bind(lib, api.free_buffer, "tjFree", why);
    ok = ok && bind(lib, api.destroy, "tjDestroy", why);
    if (!ok) api.missing = why;
  });
  return api;
}

const TurboJpeg& turbojpeg(const char* op, const std::string& name) {
  const TurboJpeg& api = load_turbojpeg();
  if (!api.missing.empty())
    throw ImageLibraryMissing(detail::concat(
        op, ": ", name,
        ": JPEG needs libjpeg-turbo's TurboJPEG library (libturbojpeg.so.0), which could not be "
        "loaded (",
        api.missing, "); install it (Debian/Ubuntu: apt-get install libturbojpeg0)"));
  return api;
}

// One decompressor and one compressor per thread, destroyed with the thread.
struct TjThreadHandles {
  TjHandle decompressor = nullptr;
  TjHandle compressor = nullptr;
  const TurboJpeg* api = nullptr;
  ~TjThreadHandles() {
    if (decompressor) api->destroy(decompressor);
    if (compressor) api->destroy(compressor);
  }
};

TjHandle tj_handle(const TurboJpeg& api, bool compress) {
  thread_local TjThreadHandles handles;
  handles.api = &api;
  TjHandle& h = compress ? handles.compressor : handles.decompressor;
  if (!h) h = compress ? api.init_compress() : api.init_decompress();
  EMBER_CHECK(h != nullptr, "image_io: TurboJPEG could not create a ",
              compress ? "compressor" : "decompressor", " (out of memory?)");
  return h;
}

// Whether the JPEG has an Adobe APP14 marker (PIL then reads CMYK as inverted, "CMYK;I").
bool has_adobe_marker(std::span<const uint8_t> b) {
  size_t p = 2;  // after SOI
  while (p + 4 <= b.size() && b[p] == 0xFF) {
    const uint8_t marker = b[p + 1];
    if (marker == 0xDA || marker == 0xD9) break;  // start of scan, end of image
    const size_t length = (size_t{b[p + 2]} << 8) | b[p + 3];
    if (marker == 0xEE && length >= 7 && p + 9 <= b.size() &&
        std::memcmp(&b[p + 4], "Adobe", 5) == 0)
      return true;
    p += 2 + length;
  }
  return false;
}

// PIL's cmyk2rgb (Pillow 9): r = (255 - k) - (c * (255 - k)) / 255, rounded as MULDIV255.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t pixels, bool inverted) {
  for (int64_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const int k = inverted ? 255 - cmyk[3] : cmyk[3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int v = inverted ? 255 - cmyk[c] : cmyk[c];
      const int t = v * nk + 128;
      rgb[c] = static_cast<uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
    }
  }
}

Tensor decode_jpeg(std::span<const uint8_t> b, const std::string& name) {
  constexpr const char* op = "read_image";
  const TurboJpeg& api = turbojpeg(op, name);
  TjHandle h = tj_handle(api, false);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (api.decompress_header(h, b.data(), static_cast<unsigned long>(b.size()), &width, &height,
                            &subsampling, &colorspace) != 0)
    fail(op, name, std::string("corrupt JPEG header (") + api.error_string(h) + ")");
  if (width <= 0 || height <= 0) fail(op, name, "corrupt JPEG header (no image size)");
  if (uint64_t(width) * uint64_t(height) > kMaxPixels)
    fail(op, name,
         detail::concat("JPEG of ", width, "x", height, " pixels (expected 1 to ", kMaxPixels,
                        " pixels, PIL's decompression-bomb limit)"));
  const bool cmyk = colorspace == kTjCsCmyk || colorspace == kTjCsYcck;
  const int64_t pixels = int64_t{width} * height;
  Tensor out = empty({height, width, 3}, {.dtype = DType::u8, .device = Device::cpu()});
  std::vector<uint8_t> cmyk_pixels(cmyk ? static_cast<size_t>(pixels) * 4 : 0);
  uint8_t* dst = cmyk ? cmyk_pixels.data() : out.data<uint8_t>();
  const int format = cmyk ? kTjCmyk : kTjRgb;
  if (api.decompress(h, b.data(), static_cast<unsigned long>(b.size()), dst, width, 0, height,
                     format, 0) != 0) {
    const std::string message = api.error_string(h);
    // A warning leaves a usable image, except when the data ended early (PIL refuses those:
    // "image file is truncated"); other warnings (extraneous bytes) PIL ignores too.
    const bool truncated = message.find("Premature end") != std::string::npos;
    if (api.error_code(h) != kTjErrWarning || truncated)
      fail(op, name, (truncated ? "truncated JPEG (" : "corrupt JPEG (") + message + ")");
  }
  if (cmyk) cmyk_to_rgb(cmyk_pixels.data(), out.data<uint8_t>(), pixels, has_adobe_marker(b));
  return out;
}

// ---- libpng 1.6 (png.h), Note [PNG errors through longjmp] ----

using PngStruct = void*;
using PngInfo = void*;
using PngLongjmp = void (*)(jmp_buf, int);
using PngErrorFn = void (*)(PngStruct, const char*);
using PngReadFn = void (*)(PngStruct, unsigned char*, size_t);
constexpr int kPngColorPalette = 3, kPngColorMaskAlpha = 4, kPngColorMaskColor = 2;

struct LibPng {
  PngStruct (*create_read)(const char*, void*, PngErrorFn, PngErrorFn) = nullptr;
  PngInfo (*create_info)(PngStruct) = nullptr;
  void (*destroy_read)(PngStruct*, PngInfo*, PngInfo*) = nullptr;
  jmp_buf* (*set_longjmp_fn)(PngStruct, PngLongjmp, size_t) = nullptr;
  void (*longjmp_)(PngStruct, int) = nullptr;
  void (*set_read_fn)(PngStruct, void*, PngReadFn) = nullptr;
  void* (*get_io_ptr)(PngStruct) = nullptr;
  void* (*get_error_ptr)(PngStruct) = nullptr;
  void (*error)(PngStruct, const char*) = nullptr;
  void (*read_info)(PngStruct, PngInfo) = nullptr;
  uint32_t (*get_ihdr)(PngStruct, PngInfo, uint32_t*, uint32_t*, int*, int*, int*, int*,
                       int*) = nullptr;
  void (*set_palette_to_rgb)(PngStruct) = nullptr;
  void (*set_expand_gray)(PngStruct) = nullptr;
  void (*set_strip_16)(PngStruct) = nullptr;
  void (*set_strip_alpha)(PngStruct) = nullptr;
  void (*set_gray_to_rgb)(PngStruct) = nullptr;
  int (*set_interlace_handling)(PngStruct) = nullptr;
  void (*read_update_info)(PngStruct, PngInfo) = nullptr;
  size_t (*get_rowbytes)(PngStruct, PngInfo) = nullptr;
  void (*read_image)(PngStruct, unsigned char**) = nullptr;
  std::string missing;
};

LibPng png_api;  // filled once by libpng()

// Loads libpng once into png_api; png_api.missing says why it could not be.
const LibPng& load_libpng() {
  LibPng& api = png_api;
  static std::once_flag once;
  std::call_once(once, [&api] {
    std::string why;
    void* lib = open_library("EMBER_LIBPNG_LIBRARY", {"libpng16.so.16", "libpng16.so"}, why);
    bool ok = lib != nullptr;
    ok = ok && bind(lib, api.create_read, "png_create_read_struct", why);
    ok = ok && bind(lib, api.create_info, "png_create_info_struct", why);
    ok = ok && bind(lib, api.destroy_read, "png_destroy_read_struct", why);
    ok = ok && bind(lib, api.set_longjmp_fn, "png_set_longjmp_fn", why);
    ok = ok && bind(lib, api.longjmp_, "png_longjmp", why);
    ok = ok && bind(lib, api.set_read_fn, "png_set_read_fn", why);
    ok = ok && bind(lib, api.get_io_ptr, "png_get_io_ptr", why);
    ok = ok && bind(lib, api.get_error_ptr, "png_get_error_ptr", why);
    ok = ok && bind(lib, api.error, "png_error", why);
    ok = ok && bind(lib, api.read_info, "png_read_info", why);
    ok = ok && bind(lib, api.get_ihdr, "png_get_IHDR", why);
    ok = ok && bind(lib, api.set_palette_to_rgb, "png_set_palette_to_rgb", why);
    ok = ok && bind(lib, api.set_expand_gray, "png_set_expand_gray_1_2_4_to_8", why);
    ok = ok && bind(lib, api.set_strip_16, "png_set_strip_16", why);
    ok = ok && bind(lib, api.set_strip_alpha, "png_set_strip_alpha", why);
    ok = ok && bind(lib, api.set_gray_to_rgb, "png_set_gray_to_rgb", why);
    ok = ok && bind(lib, api.set_interlace_handling, "png_set_interlace_handling", why);
    ok = ok && bind(lib, api.read_update_info, "png_read_update_info", why);
    ok = ok && bind(lib, api.get_rowbytes, "png_get_rowbytes", why);
    ok = ok && bind(lib, api.read_image, "png_read_image", why);
    if (!ok) api.missing = why;
  });
  return api;
}

const LibPng& libpng(const char* op, const std::string& name) {
  const LibPng& api = load_libpng();
  if (!api.missing.empty())
    throw ImageLibraryMissing(detail::concat(
        op, ": ", name, ": PNG needs libpng (libpng16.so.16), which could not be loaded (",
        api.missing, "); install it (Debian/Ubuntu: apt-get install libpng16-16)"));
  return api;
}

// What the callbacks see: the bytes, the read position and the error message.
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t position;
  char message[200];
};

void png_on_error(PngStruct png, const char* message) {
  auto* src = static_cast<PngSource*>(png_api.get_error_ptr(png));
  std::snprintf(src->message, sizeof(src->message), "%s", message ? message : "unknown error");
  png_api.longjmp_(png, 1);
}

void png_on_warning(PngStruct, const char*) {}  // PIL ignores libpng's warnings too

void png_on_read(PngStruct png, unsigned char* out, size_t n) {
  auto* src = static_cast<PngSource*>(png_api.get_io_ptr(png));
  if (src->size - src->position < n) png_api.error(png, "truncated PNG (the data ends early)");
  std::memcpy(out, src->data + src->position, n);
  src->position += n;
}

// Reads the header and sets up the conversion to 8-bit RGB; 0 on success, -1 after an error
// (message in src). Only trivially destructible locals: see the Note.
int png_read_header(PngStruct png, PngInfo info, uint32_t* width, uint32_t* height) {
  if (setjmp(*png_api.set_longjmp_fn(png, ::longjmp, sizeof(jmp_buf)))) return -1;
  png_api.read_info(png, info);
  int depth = 0, color = 0, interlace = 0, compression = 0, filter = 0;
  png_api.get_ihdr(png, info, width, height, &depth, &color, &interlace, &compression, &filter);
  if (uint64_t{*width} * uint64_t{*height} > kMaxPixels) return 1;
  if (color == kPngColorPalette) png_api.set_palette_to_rgb(png);
  if (!(color & kPngColorMaskColor) && depth < 8) png_api.set_expand_gray(png);
  if (depth == 16) png_api.set_strip_16(png);  // the high byte, as PIL's "RGB;16B"
  png_api.set_strip_alpha(png);  // an alpha channel, or the one tRNS would expand into
  if (!(color & kPngColorMaskColor)) png_api.set_gray_to_rgb(png);
  png_api.set_interlace_handling(png);
  png_api.read_update_info(png, info);
  if (png_api.get_rowbytes(png, info) != size_t{*width} * 3) return 2;
  return 0;
}

int png_read_rows(PngStruct png, unsigned char** rows) {
  if (setjmp(*png_api.set_longjmp_fn(png, ::longjmp, sizeof(jmp_buf)))) return -1;
  png_api.read_image(png, rows);
  return 0;
}

// Owns the read and info structs.
struct PngReader {
  PngStruct png = nullptr;
  PngInfo info = nullptr;
  ~PngReader() {
    if (png) png_api.destroy_read(&png, info ? &info : nullptr, nullptr);
  }
};

Tensor decode_png(std::span<const uint8_t> b, const std::string& name) {
  constexpr const char* op = "read_image";
  libpng(op, name);
  PngSource src{b.data(), b.size(), 0, {0}};
  PngReader reader;
  // Any 1.6.x library accepts a 1.6 version string (libpng compares major.minor).
  reader.png = png_api.create_read("1.6.39", &src, png_on_error, png_on_warning);
  EMBER_CHECK(reader.png != nullptr, op, ": ", name, ": libpng could not start (out of memory?)");
  reader.info = png_api.create_info(reader.png);
  EMBER_CHECK(reader.info != nullptr, op, ": ", name, ": libpng could not start (out of memory?)");
  png_api.set_read_fn(reader.png, &src, png_on_read);
  uint32_t width = 0, height = 0;
  const int header = png_read_header(reader.png, reader.info, &width, &height);
  // A truncated file says so itself (png_on_read); libpng's own messages get "corrupt PNG".
  const auto png_fault = [&] {
    const std::string m = src.message;
    return m.rfind("truncated", 0) == 0 ? m : "corrupt PNG (" + m + ")";
  };
  if (header < 0) fail(op, name, png_fault());
  if (header == 1)
    fail(op, name,
         detail::concat("PNG of ", width, "x", height, " pixels (expected at most ", kMaxPixels,
                        " pixels, PIL's decompression-bomb limit)"));
  if (header == 2) fail(op, name, "PNG layout libpng could not convert to 8-bit RGB");
  Tensor out =
      empty({int64_t{height}, int64_t{width}, 3}, {.dtype = DType::u8, .device = Device::cpu()});
  std::vector<unsigned char*> rows(height);
  for (uint32_t y = 0; y < height; ++y) rows[y] = out.data<uint8_t>() + size_t{y} * width * 3;
  if (png_read_rows(reader.png, rows.data()) < 0) fail(op, name, png_fault());
  return out;
}

// "GIF", "BMP", ... for the error about an unsupported file.
std::string describe_format(std::span<const uint8_t> b) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (starts("GIF8", 4)) return "a GIF image";
  if (starts("BM", 2)) return "a BMP image";
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return "a WebP image";
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return "a TIFF image";
  std::string hex = "a file starting with bytes";
  for (size_t i = 0; i < std::min<size_t>(b.size(), 4); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof(byte), " %02x", b[i]);
    hex += byte;
  }
  return hex;
}

}  // namespace

bool jpeg_supported() { return load_turbojpeg().missing.empty(); }
bool png_supported() { return load_libpng().missing.empty(); }

Tensor decode_image(std::span<const uint8_t> bytes, const std::string& name) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.empty()) fail("read_image", name, "empty file (expected a JPEG or PNG image)");
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return decode_jpeg(bytes, name);
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return decode_png(bytes, name);
  fail("read_image", name,
       "unsupported image format (got " + describe_format(bytes) + ", expected JPEG or PNG)");
}

Tensor read_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("read_image", path, std::string("cannot open (") + std::strerror(errno) + ")");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) fail("read_image", path, "read failed");
  return decode_image(bytes, path);
}

// ---- writers ----

namespace {

// Checks a u8 [H, W] / [H, W, C] CPU image and returns (H, W, C) and its contiguous bytes.
std::vector<uint8_t> image_bytes(const char* op, const std::string& path, const Tensor& image,
                                 std::initializer_list<int64_t> channels, const char* expected,
                                 int64_t& h, int64_t& w, int64_t& c) {
  EMBER_CHECK(
      image.defined() && image.dtype() == DType::u8 && (image.dim() == 2 || image.dim() == 3), op,
      ": ", path, ": image ",
      image.defined() ? image.shape().to_string() + " " + std::string(dtype_name(image.dtype()))
                      : std::string("undefined"),
      " (expected u8 [H, W] or [H, W, C])");
  h = image.size(0);
  w = image.size(1);
  c = image.dim() == 3 ? image.size(2) : 1;
  EMBER_CHECK(std::find(channels.begin(), channels.end(), c) != channels.end(), op, ": ", path,
              ": ", c, " channels (expected ", expected, ")");
  EMBER_CHECK(h >= 1 && w >= 1 && h <= 65535 && w <= 65535, op, ": ", path, ": image of ", h, "x",
              w, " pixels (expected 1 to 65535 on each side)");
  return image.to(Device::cpu()).contiguous().to_vector<uint8_t>();
}

void write_file(const char* op, const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) fail(op, path, std::string("cannot write (") + std::strerror(errno) + ")");
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, static_cast<uint32_t>(
                   crc32(0, out.data() + start, static_cast<uInt>(out.size() - start))));
}

}  // namespace

void write_png(const std::string& path, const Tensor& image) {
  int64_t h = 0, w = 0, c = 0;
  const std::vector<uint8_t> pixels =
      image_bytes("write_png", path, image, {1, 3, 4}, "1, 3 or 4", h, w, c);
  std::vector<uint8_t> raw;  // each row: filter byte 0, then the row
  raw.reserve(static_cast<size_t>(h * (w * c + 1)));
  for (int64_t y = 0; y < h; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + y * w * c, pixels.begin() + (y + 1) * w * c);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packed_size);
  EMBER_CHECK(
      compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 6) == Z_OK,
      "write_png: ", path, ": zlib could not compress the image");
  packed.resize(packed_size);
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(w));
  put_u32(ihdr, static_cast<uint32_t>(h));
  const uint8_t color = c == 1 ? 0 : (c == 3 ? 2 : 6);
  ihdr.insert(ihdr.end(), {8, color, 0, 0, 0});  // depth, color type, deflate, filter, no interlace
  std::vector<uint8_t> file = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  put_chunk(file, "IHDR", ihdr);
  put_chunk(file, "IDAT", packed);
  put_chunk(file, "IEND", {});
  write_file("write_png", path, file.data(), file.size());
}

void write_jpeg(const std::string& path, const Tensor& image, int quality) {
  EMBER_CHECK(quality >= 1 && quality <= 100, "write_jpeg: ", path, ": quality ", quality,
              " (expected 1 to 100)");
  int64_t h = 0, w = 0, c = 0;
  const std::vector<uint8_t> pixels =
      image_bytes("write_jpeg", path, image, {1, 3}, "1 or 3", h, w, c);
  const TurboJpeg& api = turbojpeg("write_jpeg", path);
  TjHandle tj = tj_handle(api, true);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const bool gray = c == 1;
  const int rc = api.compress(tj, pixels.data(), static_cast<int>(w), 0, static_cast<int>(h),
                              gray ? kTjGray : kTjRgb, &jpeg, &size,
                              gray ? kTjSampGray : kTjSamp420, quality, 0);
  if (rc != 0) {
    if (jpeg) api.free_buffer(jpeg);
    fail("write_jpeg", path, std::string("TurboJPEG failed (") + api.error_string(tj) + ")");
  }
  try {
    write_file("write_jpeg", path, jpeg, size);
  } catch (...) {
    api.free_buffer(jpeg);
    throw;
  }
  api.free_buffer(jpeg);
}

}  // namespace ember::data
