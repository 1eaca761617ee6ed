// src/nn/py_repr.hpp — Python-style formatting for extra_repr() strings, so a module prints
// as PyTorch prints it: floats as Python's repr (1e-05, 0.1), pairs as tuples "(3, 3)",
// booleans as True/False and an absent optional as None.
#pragma once

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "ember/ops.hpp"
#include "ember/options_fields.hpp"
#include "ember/shape.hpp"

namespace ember::nn::pyrepr {

/// Python's repr(float): the shortest round-trip digits, positional for 1e-4 <= |v| < 1e16,
/// otherwise "d.ddde-05" (two-digit exponent at least).
inline std::string py_float(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  if (ec != std::errc()) return std::to_string(v);
  std::string s(buf, end);  // e.g. "1e-05", "1.5e+00", "-2.5e-01"
  if (s == "inf" || s == "-inf" || s.find("nan") != std::string::npos) return s;
  const size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string mant = s.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {  // Python's positional range
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits +
            std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
            digits.substr(static_cast<size_t>(exp + 1));
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = exp < 0 ? -exp : exp;
    out += std::string("e") + (exp < 0 ? "-" : "+") + (a < 10 ? "0" : "") + std::to_string(a);
  }
  return neg ? "-" + out : out;
}

inline std::string py_bool(bool b) { return b ? "True" : "False"; }

/// "(3, 3)": how PyTorch prints the tuples Conv2d stores.
inline std::string py_pair(Size2d s) {
  return "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")";
}

/// "2" for a square size given as one number, "(2, 3)" otherwise (pools keep what was given).
inline std::string py_size(Size2d s) { return s.h == s.w ? std::to_string(s.h) : py_pair(s); }

/// Python tuple of a shape: "(64,)", "(3, 4)".
inline std::string py_tuple(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

/// One option's value as Python prints it: 3, 0.1, True, (2, 5), None.
template <typename M>
std::string py_value(const M& v) {
  if constexpr (std::is_same_v<M, bool>)
    return py_bool(v);
  else if constexpr (std::is_integral_v<M>)
    return std::to_string(v);
  else if constexpr (std::is_floating_point_v<M>)
    return py_float(v);
  else if constexpr (std::is_same_v<M, Size2d>)
    return py_size(v);
  else if constexpr (std::is_same_v<M, Shape>)
    return py_tuple(v);
  else if constexpr (opts::detail::IsOptional<M>::value)
    return v ? py_value(*v) : "None";
  else
    return std::string(v);
}

/// "key=value, ..." over the fields of O, in their order: the extra_repr of a module whose
/// PyTorch repr is the plain list of its options ("in_features=4, out_features=2, bias=True").
template <opts::HasFields O>
std::string fields_repr(const O& o) {
  std::string s;
  opts::detail::for_each_field(
      [&](const auto& f) {
        if constexpr (requires { f.member; })
          s += (s.empty() ? "" : ", ") + std::string(f.key) + "=" + py_value(o.*(f.member));
      },
      opts::detail::checked_fields<O>());
  return s;
}

}  // namespace ember::nn::pyrepr
