// ember/data/image_io.hpp — JPEG and PNG files to u8 RGB tensors, and back (docs/data.md).
//
// Decoding gives what PIL's Image.open(path).convert("RGB") gives, as a CPU tensor u8
// [H, W, 3] (rows, columns, channels): grayscale is repeated into three channels, a palette
// is looked up, alpha is dropped (not composited), 16-bit samples keep their high byte, a
// CMYK JPEG is converted with PIL's formula. JPEG goes through libjpeg-turbo's TurboJPEG
// library and PNG through libpng, both opened with dlopen at first use (libturbojpeg.so.0,
// libpng16.so.16, or the files EMBER_TURBOJPEG_LIBRARY and EMBER_LIBPNG_LIBRARY name), so
// libember.so loads on machines that have neither; decoding there says which library is
// missing and how to install it.
//
//   Tensor img = data::read_image("cats/001.jpg");          // u8 [H, W, 3]
//   data::write_png("out.png", img);                        // lossless
//   data::write_jpeg("out.jpg", img, 90);                   // quality 1 to 100, 4:2:0
//
// Decoding is thread-safe (each thread keeps its own TurboJPEG handle; libpng errors come
// back through setjmp/longjmp and become ember::Error). A corrupt, truncated or unsupported
// file throws ember::Error naming the file and what is wrong; nothing is printed.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ember/tensor.hpp"

namespace ember::data {

/// What read_image, decode_image and write_jpeg throw when the library a format needs cannot
/// be loaded: a fault of the machine, not of the file (ImageFolder's skip_bad never skips it).
class ImageLibraryMissing : public Error {
 public:
  using Error::Error;
};

/// Decodes a JPEG or PNG file (recognised by its first bytes, not its name) to u8 [H, W, 3].
/// Throws when the file cannot be read, is neither format, is corrupt or truncated, or has more
/// than 178,956,970 pixels (PIL's decompression-bomb limit). Example:
///   Tensor img = data::read_image("train/cat/1.png");   // img.size(2) == 3
Tensor read_image(const std::string& path);

/// Decodes JPEG or PNG bytes held in memory; `name` stands for the source in errors.
/// Example: Tensor img = data::decode_image(bytes, "upload 3");
Tensor decode_image(std::span<const uint8_t> bytes, const std::string& name);

/// Whether JPEG can be decoded and written here: libjpeg-turbo's TurboJPEG library loads.
/// Example: if (!data::jpeg_supported()) std::cerr << "apt-get install libturbojpeg0\n";
bool jpeg_supported();
/// Whether PNG can be decoded here: libpng loads (write_png needs only zlib).
bool png_supported();

/// Writes a u8 image [H, W] (gray), [H, W, 1], [H, W, 3] (RGB) or [H, W, 4] (RGBA) as an 8-bit
/// PNG (zlib, no filtering). Example: data::write_png("mask.png", mask);
void write_png(const std::string& path, const Tensor& image);

/// Writes a u8 image [H, W], [H, W, 1] (gray) or [H, W, 3] (RGB) as a baseline JPEG of
/// `quality` 1 to 100 (RGB with 4:2:0 chroma subsampling, as PIL's default). Needs TurboJPEG.
/// Example: data::write_jpeg("photo.jpg", img, 95);
void write_jpeg(const std::string& path, const Tensor& image, int quality = 90);

}  // namespace ember::data
