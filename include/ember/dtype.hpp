// ember/dtype.hpp — element types, their sizes and names, and 16-bit float conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace ember {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, boolean };
inline constexpr int kNumDTypes = 8;

/// Bytes per element.
constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

/// "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool".
std::string_view dtype_name(DType t);
constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
/// True for the types CPU kernels compute in (f32, f64); f16/bf16 are storage types there.
constexpr bool is_compute_float(DType t) { return t == DType::f32 || t == DType::f64; }

/// IEEE binary16 stored as bits. Converts to and from float with round-to-nearest-even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT: implicit like a built-in float type
  operator float() const;
};

/// bfloat16 stored as bits (the top half of an f32), rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// Maps a C++ element type to its DType: dtype_of<float>() == DType::f32.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}

}  // namespace ember
