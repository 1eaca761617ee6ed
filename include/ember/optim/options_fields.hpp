// ember/optim/options_fields.hpp — optimizer and scheduler options declared once: the field
// lists of ember/options_fields.hpp under the names optim has always used, and the JSON hooks
// of optimizer options (keys PyTorch adds, such as "foreach", are ignored).
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
#pragma once

#include "ember/options_fields.hpp"

namespace ember::optim {

using json = nlohmann::json;

using opts::above;
using opts::at_least;
using opts::Check;
using opts::closed;
using opts::Field;
using opts::field;
using opts::fields_json;
using opts::half_open;
using opts::HasFields;
using opts::not_nan;
namespace options_detail = opts::detail;

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
  opts::read_fields(j, o, who, opts::UnknownKeys::ignore);
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
  opts::check_fields(o, who);
}

/// check_fields; an options struct with checks across fields (SGD's nesterov) declares its
/// own validate_options, which calls check_fields first.
template <HasFields O>
void validate_options(const O& o, const std::string& who) {
  check_fields(o, who);
}

}  // namespace ember::optim
