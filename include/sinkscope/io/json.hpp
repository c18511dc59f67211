// Every JSON document sinkscope reads (config.json, tokenizer.json, tokenizer_config.json, a
// safetensors header, shard indexes, preprocessor_config.json, run.json, frame.json, prune
// state, JSONL lines) is parsed here: at most Limit::JsonBytes bytes, nesting at most
// Limit::JsonDepth (checked while parsing, so a hostile file never makes anything recurse), and
// errors are one InputError line naming the file. Typed reads name the file and the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sinkscope::io {

struct JsonOptions {
    // A key repeated in one object is an error instead of "last one wins" (safetensors headers
    // and shard indexes, where two entries for one tensor would be resolved silently).
    bool reject_duplicate_keys = false;
    // What the document is, for the messages ("header", "index", ...); empty: nothing.
    std::string what;
};

// Parses `text`, which came from `file`.
nlohmann::json parse_json(std::string_view text, const std::string& file,
                          const JsonOptions& options = {});
// Reads (at most Limit::JsonBytes bytes) and parses a file.
nlohmann::json read_json_file(const std::filesystem::path& path, const JsonOptions& options = {});

// A value from a file in a message: scalars as JSON text (strings through printable()), arrays
// of scalars with at most a few elements, anything nested as [...] or {...}. Never recursive.
std::string brief(const nlohmann::json& v);
// "string", "integer", "number", "boolean", "null", "array", "object".
const char* json_type_name(const nlohmann::json& v);

// Typed reads of key `key` of object `obj` from `file`; a wrong type is an InputError naming the
// file and the key ("key 'hidden_act' must be a string, found 5"). The *_or forms return the
// fallback when the key is absent or null.
std::string json_string(const nlohmann::json& obj, const char* key, const std::string& file);
std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& fallback,
                           const std::string& file);
bool json_bool_or(const nlohmann::json& obj, const char* key, bool fallback,
                  const std::string& file);
int64_t json_int_or(const nlohmann::json& obj, const char* key, int64_t fallback,
                    const std::string& file);
double json_number_or(const nlohmann::json& obj, const char* key, double fallback,
                      const std::string& file);

}  // namespace sinkscope::io
