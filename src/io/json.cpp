// Bounded JSON parsing and typed reads (json.hpp).
#include "sinkscope/io/json.hpp"

#include <unordered_set>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"

namespace sinkscope::io {

using nlohmann::json;

namespace {

std::string prefix(const JsonOptions& o) {
    return o.what.empty() ? std::string() : o.what + " ";
}

// Thrown from the parser callback to stop parsing at once (caught in parse_json).
struct Refused {
    std::string message;
    bool depth = false;
    uint64_t found = 0;
};

}  // namespace

json parse_json(std::string_view text, const std::string& file, const JsonOptions& options) {
    check_limit(file, Limit::JsonBytes, prefix(options) + "JSON size in bytes", text.size());
    const uint64_t max_depth = limit_value(Limit::JsonDepth);
    // Keys seen in each open object, innermost last (only when duplicates are refused).
    std::vector<std::unordered_set<std::string>> keys;
    // nlohmann's parser is iterative; the callback sees every container as it opens (depth =
    // enclosing containers), so the depth is bounded before any value nests deeper.
    const json::parser_callback_t callback = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (uint64_t(depth) + 1 > max_depth) throw Refused{"", true, uint64_t(depth) + 1};
                if (event == json::parse_event_t::object_start && options.reject_duplicate_keys)
                    keys.emplace_back();
                break;
            case json::parse_event_t::key:
                if (options.reject_duplicate_keys && !keys.empty() &&
                    !keys.back().insert(parsed.get<std::string>()).second)
                    throw Refused{"key " + quote(parsed.get<std::string>()) +
                                  " appears twice in one object"};
                break;
            case json::parse_event_t::object_end:
                if (options.reject_duplicate_keys && !keys.empty()) keys.pop_back();
                break;
            default:
                break;
        }
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), callback);
    } catch (const Refused& r) {
        if (r.depth)
            throw_limit(file, Limit::JsonDepth, prefix(options) + "JSON nesting depth (at least)",
                        r.found);
        throw InputError(file, prefix(options) + r.message);
    } catch (const json::exception& e) {
        // nlohmann's text quotes the offending token: printable, cut.
        throw InputError(file, prefix(options) + "not valid JSON: " + printable(e.what(), 240));
    }
}

json read_json_file(const std::filesystem::path& path, const JsonOptions& options) {
    return parse_json(read_file_limited(path, Limit::JsonBytes), path.string(), options);
}

const char* json_type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::string:
            return "string";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            return "integer";
        case json::value_t::number_float:
            return "number";
        case json::value_t::boolean:
            return "boolean";
        case json::value_t::null:
            return "null";
        case json::value_t::array:
            return "array";
        case json::value_t::object:
            return "object";
        default:
            return "binary";
    }
}

std::string brief(const json& v) {
    constexpr size_t kMaxElements = 8;
    auto scalar = [](const json& s) -> std::string {
        if (s.is_string()) return "\"" + printable(s.get_ref<const std::string&>()) + "\"";
        if (s.is_array()) return s.empty() ? "[]" : "[...]";
        if (s.is_object()) return s.empty() ? "{}" : "{...}";
        return s.dump();  // a number, boolean or null: short
    };
    if (v.is_array()) {
        std::string out = "[";
        size_t i = 0;
        for (const json& e : v) {
            if (i == kMaxElements) {
                out += ", ... (" + std::to_string(v.size()) + " elements)";
                break;
            }
            out += (i++ ? ", " : "") + scalar(e);
        }
        return out + "]";
    }
    if (v.is_object()) return v.empty() ? "{}" : "{...} (object)";
    return scalar(v);
}

namespace {

const json* find(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& file, const char* key, const char* want,
                             const json& found) {
    throw InputError(file, std::string("key '") + key + "' must be " + want + ", found " +
                               json_type_name(found) + " " + brief(found));
}

}  // namespace

std::string json_string(const json& obj, const char* key, const std::string& file) {
    const json* v = find(obj, key);
    if (!v) throw InputError(file, std::string("missing string key '") + key + "'");
    if (!v->is_string()) wrong_type(file, key, "a string", *v);
    return v->get<std::string>();
}

std::string json_string_or(const json& obj, const char* key, const std::string& fallback,
                           const std::string& file) {
    return find(obj, key) ? json_string(obj, key, file) : fallback;
}

bool json_bool_or(const json& obj, const char* key, bool fallback, const std::string& file) {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong_type(file, key, "true or false", *v);
    return v->get<bool>();
}

int64_t json_int_or(const json& obj, const char* key, int64_t fallback, const std::string& file) {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)))
        wrong_type(file, key, "an integer", *v);
    return v->get<int64_t>();
}

double json_number_or(const json& obj, const char* key, double fallback, const std::string& file) {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_number()) wrong_type(file, key, "a number", *v);
    return v->get<double>();
}

}  // namespace sinkscope::io
