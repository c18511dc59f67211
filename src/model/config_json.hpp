// Internal: typed reads of config.json keys for the family config readers. Each throws InputError
// naming `origin` and the key when the value has the wrong type.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sinkscope::model {

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin);
int64_t json_int_or(const nlohmann::json& j, const char* key, int64_t fallback,
                    const std::string& origin);
double json_float_or(const nlohmann::json& j, const char* key, double fallback,
                     const std::string& origin);
bool json_bool_or(const nlohmann::json& j, const char* key, bool fallback,
                  const std::string& origin);
// bos/eos ids: an integer, null/absent (-1), or a list (its first entry).
int64_t json_token_id_or(const nlohmann::json& j, const char* key, const std::string& origin);

}  // namespace sinkscope::model
