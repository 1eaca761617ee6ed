// ember/options_fields.hpp — an options struct declared once, for nn modules and optimizers
// alike: next to its members it lists each one with its JSON key and its check, in a static
// fields(), and its JSON (both ways, by name, never by position), its validation and (in nn)
// its printed form and registry factory come from that list.
//
//   struct DropoutOptions {
//     double p = 0.5;
//     static constexpr auto fields() {
//       return std::tuple{opts::field("p", &DropoutOptions::p, opts::closed(0, 1))};
//     }
//   };
//   json j = opts::fields_json(DropoutOptions{.p = 0.1});   // {"p": 0.1}
//   DropoutOptions o;
//   opts::read_fields(j, o, "Dropout", opts::UnknownKeys::refuse);  // absent keys keep defaults
//   opts::check_fields(o, "Dropout");  // "Dropout: invalid p 2 (expected 0 <= p <= 1)"
//
// fields() is a static member function, so the struct stays an aggregate and designated
// initialisers keep working; a member left out of fields() breaks the build (the list's length
// is checked against the struct's). A struct that cannot carry fields() (it belongs to another
// layer) gets its list from a specialisation of FieldsOf; a member type that JSON does not know
// (Size2d, Shape) gets its conversion from a specialisation of Codec.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "ember/error.hpp"

namespace ember::opts {

using json = nlohmann::json;

/// The check of a number field (each element of a pair): bounds, finiteness, and the names its
/// message uses. Without bounds and without finite() a number only has to be a number (not
/// NaN) when not_nan() asked for it; a default Check accepts anything.
struct Check {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool must_be_finite = false, must_be_number = false;
  const char* label = nullptr;                              // "invalid <label> ..." (default: key)
  std::array<const char*, 2> element = {nullptr, nullptr};  // a pair's names: beta1, beta2

  constexpr Check named(const char* l) const {
    Check c = *this;
    c.label = l;
    return c;
  }
  constexpr Check elements(const char* first, const char* second) const {
    Check c = *this;
    c.element = {first, second};
    return c;
  }
  constexpr Check finite() const {
    Check c = *this;
    c.must_be_finite = true;
    return c;
  }
  constexpr bool checks() const {
    return must_be_finite || must_be_number || lo > -std::numeric_limits<double>::infinity() ||
           hi < std::numeric_limits<double>::infinity();
  }
};

/// x >= lo;  x > lo;  lo <= x < hi;  lo <= x <= hi;  not NaN.
constexpr Check at_least(double lo) { return {.lo = lo}; }
constexpr Check above(double lo) { return {.lo = lo, .lo_open = true}; }
constexpr Check half_open(double lo, double hi) { return {.lo = lo, .hi = hi, .hi_open = true}; }
constexpr Check closed(double lo, double hi) { return {.lo = lo, .hi = hi}; }
constexpr Check not_nan() { return {.must_be_number = true}; }

/// One member of options struct O: its JSON key and its check.
template <typename O, typename M>
struct Field {
  const char* key;
  M O::*member;
  Check check = {};
};

template <typename O, typename M>
constexpr Field<O, M> field(const char* key, M O::*member, Check check = {}) {
  return {key, member, check};
}

/// One JSON key that stands for `covers` members together, written and read by hand: a
/// convolution's "padding" is a size or the string "same"/"valid" (members padding and
/// padding_preset).
template <typename O>
struct CustomField {
  const char* key;
  json (*write)(const O&);
  void (*read)(const json& value, O& out, const std::string& who);
  size_t covers = 1;
};

template <typename O>
constexpr CustomField<O> custom_field(const char* key, json (*write)(const O&),
                                      void (*read)(const json&, O&, const std::string&),
                                      size_t covers) {
  return {key, write, read, covers};
}

/// Where O's field list comes from: O::fields(), or a specialisation for a struct of another
/// layer (nn lists ember::InterpolateOptions' fields this way).
template <typename O>
struct FieldsOf {
  static constexpr auto get() requires requires { O::fields(); }
  { return O::fields(); }
};

template <typename O>
concept HasFields = requires {
  FieldsOf<O>::get();
};

/// How a member type JSON does not know is written and read: specialise with
///   static json write(const M&);
///   static void read(const json& v, const char* key, M& out, const std::string& who);
template <typename M>
struct Codec {};

template <typename M>
concept HasCodec = requires(const M& m, M& out, const json& v, const std::string& who) {
  Codec<M>::write(m);
  Codec<M>::read(v, "key", out, who);
};

/// What read_fields does with a key O does not have: optimizers ignore PyTorch's extra keys
/// ("foreach", "params"); nn modules refuse them.
enum class UnknownKeys { ignore, refuse };

/// How a failed check reads: "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)" (invalid) or
/// "Dropout: p 1.5 (expected 0 <= p <= 1)" (plain, nn's form).
enum class Wording { invalid, plain };

namespace detail {

// How many members aggregate T has: the most initialisers T{...} takes.
struct AnyMember {
  template <typename T>
  operator T() const;  // never defined: only used unevaluated
};
template <typename T, typename... A>
consteval size_t member_count() {
  if constexpr (requires { T{A{}..., AnyMember{}}; })
    return member_count<T, A..., AnyMember>();
  else
    return sizeof...(A);
}

template <typename F>
constexpr size_t covers(const F&) {
  return 1;
}
template <typename O>
constexpr size_t covers(const CustomField<O>& f) {
  return f.covers;
}

template <typename O>
constexpr auto checked_fields() {
  constexpr auto list = FieldsOf<O>::get();
  constexpr size_t listed =
      std::apply([](const auto&... f) { return (size_t{0} + ... + covers(f)); }, list);
  static_assert(listed == member_count<O>(),
                "every member of an options struct must be listed in its fields()");
  return list;
}

template <typename F>
void for_each_field(F&& f, auto list) {
  std::apply([&](const auto&... field) { (f(field), ...); }, list);
}

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

inline std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// "lr >= 0", "0 <= beta1 < 1", "a finite lambd >= 0", "a number".
inline std::string expected_text(const Check& c, const char* name) {
  const bool has_lo = c.lo > -std::numeric_limits<double>::infinity();
  const bool has_hi = c.hi < std::numeric_limits<double>::infinity();
  std::string s = c.must_be_finite ? std::string("a finite ") + name : std::string(name);
  if (has_lo && has_hi)
    return number_text(c.lo) + (c.lo_open ? " < " : " <= ") + s + (c.hi_open ? " < " : " <= ") +
           number_text(c.hi);
  if (has_lo) return s + (c.lo_open ? " > " : " >= ") + number_text(c.lo);
  if (has_hi) return s + (c.hi_open ? " < " : " <= ") + number_text(c.hi);
  return c.must_be_finite ? s : "a number";
}

inline void check_number(double v, const Check& c, const char* name, const std::string& who,
                         Wording wording = Wording::invalid) {
  const bool ok = (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi) &&
                  (!c.must_be_finite || std::isfinite(v)) && !std::isnan(v);
  EMBER_CHECK(ok, who, ": ", wording == Wording::invalid ? "invalid " : "",
              c.label && !c.element[0] ? c.label : name, " ", v, " (expected ",
              expected_text(c, name), ")");
}

template <typename M>
void check_member(const M& v, const Check& c, const char* key, const std::string& who,
                  Wording wording) {
  if (!c.checks()) return;
  if constexpr (std::is_same_v<M, std::array<double, 2>>) {
    check_number(v[0], c, c.element[0] ? c.element[0] : key, who, wording);
    check_number(v[1], c, c.element[1] ? c.element[1] : key, who, wording);
  } else if constexpr (IsOptional<M>::value) {
    if (v) check_member(*v, c, key, who, wording);
  } else if constexpr (std::is_arithmetic_v<M>) {
    check_number(static_cast<double>(v), c, key, who, wording);
  }  // other members (an enum, a string) have no bounds to check
}

template <typename M>
void read_member(const json& v, const char* key, M& out, const std::string& who,
                 UnknownKeys unknown);

template <HasFields O>
void read_object(const json& j, O& o, const std::string& who, UnknownKeys unknown);

template <typename M>
void read_member(const json& v, const char* key, M& out, const std::string& who,
                 UnknownKeys unknown) {
  if constexpr (HasCodec<M>) {
    Codec<M>::read(v, key, out, who);
  } else if constexpr (std::is_same_v<M, bool>) {
    EMBER_CHECK(v.is_boolean(), who, " options: ", key, " must be true or false (got ", v.dump(),
                ")");
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<M>) {
    EMBER_CHECK(v.is_number_integer() ||
                    (v.is_number_float() && v.get<double>() == std::floor(v.get<double>())),
                who, " options: ", key, " must be a whole number (got ", v.dump(), ")");
    out = v.is_number_integer() ? v.get<M>() : static_cast<M>(v.get<double>());
  } else if constexpr (std::is_arithmetic_v<M>) {
    EMBER_CHECK(v.is_number(), who, " options: ", key, " must be a number (got ", v.dump(), ")");
    out = v.get<M>();
  } else if constexpr (std::is_same_v<M, std::string>) {
    EMBER_CHECK(v.is_string(), who, " options: ", key, " must be a string (got ", v.dump(), ")");
    out = v.get<std::string>();
  } else if constexpr (std::is_same_v<M, std::array<double, 2>>) {
    EMBER_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), who,
                " options: ", key, " must be a list of two numbers (got ", v.dump(), ")");
    out = {v[0].get<double>(), v[1].get<double>()};
  } else if constexpr (std::is_same_v<M, std::optional<int64_t>>) {
    EMBER_CHECK(v.is_null() || v.is_number_integer(), who, " options: ", key,
                " must be null or a whole number (got ", v.dump(), ")");
    out = v.is_null() ? std::nullopt : std::optional<int64_t>(v.get<int64_t>());
  } else if constexpr (IsOptional<M>::value) {
    if (v.is_null()) {
      out = std::nullopt;
    } else {
      typename M::value_type inner = out ? *out : typename M::value_type(1);
      read_member(v, key, inner, who, unknown);
      out = std::move(inner);
    }
  } else if constexpr (HasFields<M>) {
    read_object(v, out, who + " " + key, unknown);
  } else {
    out = v.get<M>();  // the member type's own from_json (an enum's)
  }
}

template <typename M>
json member_json(const M& v) {
  if constexpr (HasCodec<M>) {
    return Codec<M>::write(v);
  } else if constexpr (IsOptional<M>::value) {
    return v ? member_json(*v) : json(nullptr);
  } else if constexpr (HasFields<M>) {
    json j = json::object();
    for_each_field(
        [&](const auto& f) {
          if constexpr (requires { f.member; })
            j[f.key] = member_json(v.*(f.member));
          else
            j[f.key] = f.write(v);
        },
        checked_fields<M>());
    return j;
  } else {
    return v;
  }
}

template <HasFields O>
void read_object(const json& j, O& o, const std::string& who, UnknownKeys unknown) {
  EMBER_CHECK(j.is_object(), who, " options: expected a JSON object (got ", j.dump(), ")");
  std::string known;
  for_each_field(
      [&](const auto& f) {
        known += (known.empty() ? "" : ", ") + std::string(f.key);
        if (!j.contains(f.key)) return;
        if constexpr (requires { f.member; })
          read_member(j[f.key], f.key, o.*(f.member), who, unknown);
        else
          f.read(j[f.key], o, who);
      },
      checked_fields<O>());
  if (unknown == UnknownKeys::ignore) return;
  for (const auto& item : j.items()) {
    bool listed = false;
    for_each_field([&](const auto& f) { listed = listed || item.key() == f.key; },
                   checked_fields<O>());
    EMBER_CHECK(listed, who, " options: unknown key '", item.key(), "' (",
                known.empty() ? std::string("it takes no options") : "expected one of " + known,
                ")");
  }
}

}  // namespace detail

/// The keys of O's fields() with their values (a pair as a two-number list, an optional as
/// null or its value, a nested options struct as an object).
template <HasFields O>
json fields_json(const O& o) {
  return detail::member_json(o);
}

/// Reads the keys of O's fields() present in `j`; the others keep their value. Keys O does
/// not have are ignored or refused (`unknown`); a value of the wrong kind is refused naming
/// `who` and the key: "Rprop options: etas must be a list of two numbers (got [0.5])".
template <HasFields O>
void read_fields(const json& j, O& o, const std::string& who,
                 UnknownKeys unknown = UnknownKeys::ignore) {
  detail::read_object(j, o, who, unknown);
}

/// Throws ember::Error naming the first field that fails its check:
/// "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)".
template <HasFields O>
void check_fields(const O& o, const std::string& who, Wording wording = Wording::invalid) {
  detail::for_each_field(
      [&](const auto& f) {
        if constexpr (requires { f.member; })
          detail::check_member(o.*(f.member), f.check, f.key, who, wording);
      },
      detail::checked_fields<O>());
}

}  // namespace ember::opts
