// ember/optim/options_fields.hpp — an options struct declared once: next to its members it
// lists each one with its PyTorch key and its check, in a static fields(), and its JSON (both
// ways, by name, never by position) and its validation come from that list.
//
//   struct SGDOptions {
//     double lr = 1e-3;
//     double momentum = 0.0;
//     static constexpr auto fields() {
//       return std::tuple{field("lr", &SGDOptions::lr, at_least(0).named("learning rate")),
//                         field("momentum", &SGDOptions::momentum, at_least(0))};
//     }
//   };
//   json j = SGDOptions{.lr = 0.1};          // {"lr": 0.1, "momentum": 0.0}
//   auto o = j.get<SGDOptions>();            // keys absent keep their default
//   validate_options(o, "SGD");              // "SGD: invalid learning rate -1 (expected lr >= 0)"
//
// fields() is a static member function, so the struct stays an aggregate and designated
// initialisers keep working; a member left out of fields() breaks the build (the list's length
// is checked against the struct's).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "ember/error.hpp"

namespace ember::optim {

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

template <typename O>
concept HasFields = requires {
  O::fields();
};

namespace options_detail {

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

template <typename O>
constexpr auto checked_fields() {
  constexpr auto list = O::fields();
  static_assert(std::tuple_size_v<decltype(list)> == member_count<O>(),
                "every member of an options struct must be listed in its fields()");
  return list;
}

template <typename F>
void for_each_field(F&& f, auto list) {
  std::apply([&](const auto&... field) { (f(field), ...); }, list);
}

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

inline void check_number(double v, const Check& c, const char* name, const std::string& who) {
  const bool ok = (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi) &&
                  (!c.must_be_finite || std::isfinite(v)) && !std::isnan(v);
  EMBER_CHECK(ok, who, ": invalid ", c.label && !c.element[0] ? c.label : name, " ", v,
              " (expected ", expected_text(c, name), ")");
}

template <typename M>
void check_member(const M& v, const Check& c, const char* key, const std::string& who) {
  if (!c.checks()) return;
  if constexpr (std::is_same_v<M, std::array<double, 2>>) {
    check_number(v[0], c, c.element[0] ? c.element[0] : key, who);
    check_number(v[1], c, c.element[1] ? c.element[1] : key, who);
  } else if constexpr (std::is_same_v<M, std::optional<int64_t>>) {
    if (v) check_number(static_cast<double>(*v), c, key, who);
  } else if constexpr (std::is_arithmetic_v<M>) {
    check_number(static_cast<double>(v), c, key, who);
  }  // other members (an enum) have no bounds to check
}

// Reads j[key] into `out`, refusing a value of the wrong kind with the key's name.
template <typename M>
void read_member(const json& v, const char* key, M& out, const std::string& who) {
  if constexpr (std::is_same_v<M, bool>) {
    EMBER_CHECK(v.is_boolean(), who, " options: ", key, " must be true or false (got ", v.dump(),
                ")");
    out = v.get<bool>();
  } else if constexpr (std::is_arithmetic_v<M>) {
    EMBER_CHECK(v.is_number(), who, " options: ", key, " must be a number (got ", v.dump(), ")");
    out = v.get<M>();
  } else if constexpr (std::is_same_v<M, std::array<double, 2>>) {
    EMBER_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), who,
                " options: ", key, " must be a list of two numbers (got ", v.dump(), ")");
    out = {v[0].get<double>(), v[1].get<double>()};
  } else if constexpr (std::is_same_v<M, std::optional<int64_t>>) {
    EMBER_CHECK(v.is_null() || v.is_number_integer(), who, " options: ", key,
                " must be null or a whole number (got ", v.dump(), ")");
    out = v.is_null() ? std::nullopt : std::optional<int64_t>(v.get<int64_t>());
  } else {
    out = v.get<M>();  // the member type's own from_json (an enum's)
  }
}

template <typename M>
json member_json(const M& v) {
  if constexpr (std::is_same_v<M, std::optional<int64_t>>)
    return v ? json(*v) : json(nullptr);
  else
    return v;
}

}  // namespace options_detail

/// The keys of O's fields() with their values (a pair as a two-number list, an optional as
/// null or its value).
template <HasFields O>
json fields_json(const O& o) {
  json j = json::object();
  options_detail::for_each_field(
      [&](const auto& f) { j[f.key] = options_detail::member_json(o.*(f.member)); },
      options_detail::checked_fields<O>());
  return j;
}

/// nlohmann's hook: json(options) is fields_json(options).
template <HasFields O>
void to_json(json& j, const O& o) {
  j = fields_json(o);
}

/// Reads the keys of O's fields() present in `j`; the others keep their value, and keys O
/// does not have (PyTorch's "foreach", "params", ...) are ignored. A value of the wrong kind
/// is refused naming `who` and the key: "Rprop options: etas must be a list of two numbers
/// (got [0.5])".
template <HasFields O>
void read_fields(const json& j, O& o, const std::string& who) {
  EMBER_CHECK(j.is_object(), who, " options: expected a JSON object (got ", j.dump(), ")");
  options_detail::for_each_field(
      [&](const auto& f) {
        if (j.contains(f.key)) options_detail::read_member(j[f.key], f.key, o.*(f.member), who);
      },
      options_detail::checked_fields<O>());
}

/// nlohmann's hook: j.get<O>() is read_fields(j, o, "optimizer").
template <HasFields O>
void from_json(const json& j, O& o) {
  read_fields(j, o, "optimizer");
}

/// Throws ember::Error naming the first field that fails its check:
/// "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)".
template <HasFields O>
void check_fields(const O& o, const std::string& who) {
  options_detail::for_each_field(
      [&](const auto& f) { options_detail::check_member(o.*(f.member), f.check, f.key, who); },
      options_detail::checked_fields<O>());
}

/// check_fields; an options struct with checks across fields (SGD's nesterov) declares its
/// own validate_options, which calls check_fields first.
template <HasFields O>
void validate_options(const O& o, const std::string& who) {
  check_fields(o, who);
}

}  // namespace ember::optim
