// src/models/config_json.hpp — reading Hugging Face's config.json fields with errors that name
// the file's field, what came and what was expected (shared by the models' from_json).
#pragma once

#include <string>

#include "ember/nn/module.hpp"

namespace ember::models::detail {

/// The parsed JSON of `path`; ember::Error (naming `op` and the path) when it cannot be read or
/// is not a JSON object.
nn::json read_json_file(const std::string& path, const std::string& op);

/// config[key] when present and not null, else `fallback`; ember::Error naming the key when it
/// has another JSON type (or a non-positive value where `positive`).
int64_t int_field(const nn::json& config, const char* key, int64_t fallback, const std::string& op,
                  bool positive = true);
double number_field(const nn::json& config, const char* key, double fallback,
                    const std::string& op);
bool bool_field(const nn::json& config, const char* key, bool fallback, const std::string& op);
std::string string_field(const nn::json& config, const char* key, const std::string& fallback,
                         const std::string& op);
/// Refuses a config whose model_type is present and not `expected`.
void expect_model_type(const nn::json& config, const std::string& expected, const std::string& op);

}  // namespace ember::models::detail
