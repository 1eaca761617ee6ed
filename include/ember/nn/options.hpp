// ember/nn/options.hpp — nn modules' options declared once (ember/options_fields.hpp): how the
// sizes and shapes of module options read and write as JSON, the field list of
// InterpolateOptions (Upsample's), and the module side of the hooks. Every options struct in
// ember/nn lists its members in a static fields(); a module's options() JSON, its registry
// factory (by name: absent keys keep their defaults, unknown keys are refused), its printed form
// where PyTorch prints a plain list, and its simple range checks come from that list.
//
//   json j = nn::options_json(nn::LinearOptions{.in_features = 4, .out_features = 2});
//   auto o = nn::options_from<nn::LinearOptions>(j, "Linear");      // the same options back
//   nn::options_from<nn::LinearOptions>({{"in_feature", 4}}, "Linear");
//       // throws "Linear options: unknown key 'in_feature' (expected one of in_features, ...)"
#pragma once

#include <string>
#include <vector>

#include "ember/ops.hpp"
#include "ember/options_fields.hpp"

namespace ember::opts {

/// A 2-D size: one integer when square ("kernel_size": 3), else [height, width].
template <>
struct Codec<Size2d> {
  static json write(const Size2d& s) { return s.h == s.w ? json(s.h) : json::array({s.h, s.w}); }
  static void read(const json& v, const char* key, Size2d& out, const std::string& who) {
    EMBER_CHECK(v.is_number_integer() || (v.is_array() && v.size() == 2 &&
                                          v[0].is_number_integer() && v[1].is_number_integer()),
                who, " options: ", key, " is ", v.dump(),
                " (expected an integer or a [height, width] pair)");
    out =
        v.is_array() ? Size2d(v[0].get<int64_t>(), v[1].get<int64_t>()) : Size2d(v.get<int64_t>());
  }
};

/// A 3-D size: one integer when cubic, else [depth, height, width].
template <>
struct Codec<Size3d> {
  static json write(const Size3d& s) {
    return s.d == s.h && s.h == s.w ? json(s.d) : json::array({s.d, s.h, s.w});
  }
  static void read(const json& v, const char* key, Size3d& out, const std::string& who) {
    const bool list = v.is_array() && v.size() == 3 && v[0].is_number_integer() &&
                      v[1].is_number_integer() && v[2].is_number_integer();
    EMBER_CHECK(v.is_number_integer() || list, who, " options: ", key, " is ", v.dump(),
                " (expected an integer or a [depth, height, width] list)");
    out = list ? Size3d(v[0].get<int64_t>(), v[1].get<int64_t>(), v[2].get<int64_t>())
               : Size3d(v.get<int64_t>());
  }
};

/// A shape: a list of sizes (one integer reads as [n]); the empty shape is null.
template <>
struct Codec<Shape> {
  static json write(const Shape& s) { return s.empty() ? json(nullptr) : json(s.vec()); }
  static void read(const json& v, const char* key, Shape& out, const std::string& who) {
    bool ok = v.is_null() || v.is_number_integer() || v.is_array();
    if (v.is_array())
      for (const json& e : v) ok = ok && e.is_number_integer();
    EMBER_CHECK(ok, who, " options: ", key, " is ", v.dump(),
                " (expected an integer, a list of integers or null)");
    out = v.is_null()             ? Shape{}
          : v.is_number_integer() ? Shape{v.get<int64_t>()}
                                  : Shape(v.get<std::vector<int64_t>>());
  }
};

/// A list of numbers (one number reads as [x]); the empty list is null.
template <>
struct Codec<std::vector<double>> {
  static json write(const std::vector<double>& v) { return v.empty() ? json(nullptr) : json(v); }
  static void read(const json& v, const char* key, std::vector<double>& out,
                   const std::string& who) {
    bool ok = v.is_null() || v.is_number() || v.is_array();
    if (v.is_array())
      for (const json& e : v) ok = ok && e.is_number();
    EMBER_CHECK(ok, who, " options: ", key, " is ", v.dump(),
                " (expected a number, a list of numbers or null)");
    out = v.is_null()     ? std::vector<double>{}
          : v.is_number() ? std::vector<double>{v.get<double>()}
                          : v.get<std::vector<double>>();
  }
};

/// Upsample's options are interpolate's (ops.hpp), listed here.
template <>
struct FieldsOf<InterpolateOptions> {
  static constexpr auto get() {
    using O = InterpolateOptions;
    return std::tuple{field("size", &O::size), field("scale_factor", &O::scale_factor),
                      field("mode", &O::mode), field("align_corners", &O::align_corners),
                      field("recompute_scale_factor", &O::recompute_scale_factor)};
  }
};

}  // namespace ember::opts

namespace ember::nn {

using opts::field;

/// The options of a module that works along one dim: Softmax, LogSoftmax, GLU.
struct DimOptions {
  int64_t dim = -1;
  static constexpr auto fields() { return std::tuple{field("dim", &DimOptions::dim)}; }
};

/// A module's options as its config() JSON: {"in_features": 4, "out_features": 2, ...}.
template <opts::HasFields O>
opts::json options_json(const O& o) {
  return opts::fields_json(o);
}

/// Options of type O from the "options" object of a module config (or the options object
/// itself): keys absent keep their defaults; an unknown key or a value of the wrong kind is
/// refused naming the module type and the key.
template <opts::HasFields O>
O options_from(const opts::json& options, const std::string& type) {
  O o{};
  if (!options.is_null()) opts::read_fields(options, o, type, opts::UnknownKeys::refuse);
  return o;
}

/// The range checks listed in O's fields(), worded as nn's other errors:
/// "Dropout: p 1.5 (expected 0 <= p <= 1)".
template <opts::HasFields O>
void check_options(const O& o, const std::string& type) {
  opts::check_fields(o, type, opts::Wording::plain);
}

/// nlohmann's hooks: json(options) and j.get<Options>() for every nn options struct.
template <opts::HasFields O>
void to_json(opts::json& j, const O& o) {
  j = options_json(o);
}
template <opts::HasFields O>
void from_json(const opts::json& j, O& o) {
  opts::read_fields(j, o, "nn", opts::UnknownKeys::refuse);
}

}  // namespace ember::nn
