// src/models/config_json.cpp — see config_json.hpp.
#include "models/config_json.hpp"

#include <fstream>
#include <sstream>

#include "ember/error.hpp"

namespace ember::models::detail {

nn::json read_json_file(const std::string& path, const std::string& op) {
  std::ifstream in(path);
  EMBER_CHECK(in.good(), op, ": cannot open ", path, " (expected a Hugging Face config.json)");
  std::stringstream text;
  text << in.rdbuf();
  nn::json j = nn::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EMBER_CHECK(!j.is_discarded() && j.is_object(), op, ": ", path,
              " is not a JSON object (expected a Hugging Face config.json)");
  return j;
}

namespace {
const nn::json* present(const nn::json& config, const char* key) {
  auto it = config.find(key);
  return it == config.end() || it->is_null() ? nullptr : &*it;
}
}  // namespace

int64_t int_field(const nn::json& config, const char* key, int64_t fallback, const std::string& op,
                  bool positive) {
  const nn::json* v = present(config, key);
  if (!v) return fallback;
  EMBER_CHECK(v->is_number_integer() && (!positive || v->get<int64_t>() > 0), op,
              ": config field \"", key, "\" is ", v->dump(), " (expected ",
              positive ? "a positive" : "an", " integer)");
  return v->get<int64_t>();
}

double number_field(const nn::json& config, const char* key, double fallback,
                    const std::string& op) {
  const nn::json* v = present(config, key);
  if (!v) return fallback;
  EMBER_CHECK(v->is_number(), op, ": config field \"", key, "\" is ", v->dump(),
              " (expected a number)");
  return v->get<double>();
}

bool bool_field(const nn::json& config, const char* key, bool fallback, const std::string& op) {
  const nn::json* v = present(config, key);
  if (!v) return fallback;
  EMBER_CHECK(v->is_boolean(), op, ": config field \"", key, "\" is ", v->dump(),
              " (expected true or false)");
  return v->get<bool>();
}

std::string string_field(const nn::json& config, const char* key, const std::string& fallback,
                         const std::string& op) {
  const nn::json* v = present(config, key);
  if (!v) return fallback;
  EMBER_CHECK(v->is_string(), op, ": config field \"", key, "\" is ", v->dump(),
              " (expected a string)");
  return v->get<std::string>();
}

void expect_model_type(const nn::json& config, const std::string& expected, const std::string& op) {
  const std::string type = string_field(config, "model_type", expected, op);
  EMBER_CHECK(type == expected, op, ": config model_type \"", type, "\" (expected \"", expected,
              "\")");
}

}  // namespace ember::models::detail
