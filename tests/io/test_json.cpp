// Bounded JSON parsing and typed reads (io/json.hpp): depth and size limits hit while parsing,
// duplicate keys when asked, one-line messages naming the file, values described without
// recursion.
#include <gtest/gtest.h>

#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/json.hpp"

using namespace sinkscope;
using nlohmann::json;

namespace {
std::string error_of(const std::string& text, const io::JsonOptions& o = {}) {
    try {
        io::parse_json(text, "f.json", o);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}
std::string nested(size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}
}  // namespace

// Nesting up to the limit parses; one level more is refused while parsing (1,000,000 levels
// would otherwise be a deep value whose later dump or copy recurses).
TEST(Json, DepthLimit) {
    const uint64_t max = limit_value(Limit::JsonDepth);
    EXPECT_NO_THROW(io::parse_json(nested(max), "f.json"));
    EXPECT_NO_THROW(io::parse_json("{\"a\": " + nested(max - 1) + "}", "f.json"));
    const std::string want = "f.json: JSON nesting depth (at least) " + std::to_string(max + 1) +
                             " exceeds the limit json_depth = " + std::to_string(max) +
                             " (raise it with --limit json_depth=N if the file is genuine)";
    EXPECT_EQ(error_of(nested(max + 1)), want);
    EXPECT_EQ(error_of(nested(1000000)), want);
    EXPECT_EQ(error_of("{\"a\": " + nested(max) + "}"), want);
}

TEST(Json, SizeLimit) {
    const uint64_t saved = limit_value(Limit::JsonBytes);
    set_limit(Limit::JsonBytes, 5);
    EXPECT_NO_THROW(io::parse_json("[1,2]", "f.json"));
    EXPECT_EQ(error_of("[1, 2]", {.what = "header"}),
              "f.json: header JSON size in bytes 6 exceeds the limit json_bytes = 5 (raise it "
              "with --limit json_bytes=N if the file is genuine)");
    set_limit(Limit::JsonBytes, saved);
}

// Repeated keys: last-wins by default (as every JSON reader), an error when asked, per object.
TEST(Json, DuplicateKeys) {
    const std::string text = R"({"a": 1, "b": {"a": 2}, "a": 3})";
    EXPECT_EQ(io::parse_json(text, "f.json")["a"], 3);
    EXPECT_EQ(error_of(text, {.reject_duplicate_keys = true, .what = {}}),
              "f.json: key 'a' appears twice in one object");
    EXPECT_NO_THROW(io::parse_json(R"({"a": {"x": 1}, "b": {"x": 2}})", "f.json",
                                   {.reject_duplicate_keys = true, .what = {}}));
}

// Invalid JSON: one line naming the file; the offending bytes the library quotes are escaped.
TEST(Json, SyntaxErrorIsOneLine) {
    const std::string msg = error_of("[\"a\x01\n");
    EXPECT_EQ(msg.rfind("f.json: not valid JSON: [json.exception.parse_error.101]", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x01'), std::string::npos) << msg;
}

// brief(): scalars as JSON, strings printable, short arrays of scalars, nesting elided.
TEST(Json, BriefIsShortAndFlat) {
    EXPECT_EQ(io::brief(json(5)), "5");
    EXPECT_EQ(io::brief(json("a\nb")), "\"a\\x0ab\"");
    EXPECT_EQ(io::brief(json::parse("[1, [2], {}, {\"a\": 1}]")), "[1, [...], {}, {...}]");
    EXPECT_EQ(io::brief(json::parse("[0,1,2,3,4,5,6,7,8,9]")),
              "[0, 1, 2, 3, 4, 5, 6, 7, ... (10 elements)]");
    EXPECT_EQ(io::brief(io::parse_json(nested(60), "f.json")), "[[...]]");
    EXPECT_EQ(io::brief(json::parse(R"({"a": 1})")), "{...} (object)");
}

// Typed reads name the file and the key, and what was found.
TEST(Json, TypedReads) {
    const json j =
        json::parse(R"({"s": 5, "b": "yes", "i": 1.5, "n": null, "big": 18446744073709551615})");
    auto err = [&](auto f) {
        try {
            f();
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(err([&] { io::json_string(j, "s", "c.json"); }),
              "c.json: key 's' must be a string, found integer 5");
    EXPECT_EQ(err([&] { io::json_bool_or(j, "b", false, "c.json"); }),
              "c.json: key 'b' must be true or false, found string \"yes\"");
    EXPECT_EQ(err([&] { io::json_int_or(j, "i", 0, "c.json"); }),
              "c.json: key 'i' must be an integer, found number 1.5");
    EXPECT_EQ(err([&] { io::json_int_or(j, "big", 0, "c.json"); }),
              "c.json: key 'big' must be an integer, found integer 18446744073709551615");
    EXPECT_EQ(err([&] { io::json_string(j, "x", "c.json"); }), "c.json: missing string key 'x'");
    EXPECT_EQ(io::json_int_or(j, "n", 7, "c.json"), 7);
    EXPECT_EQ(io::json_number_or(j, "absent", 2.5, "c.json"), 2.5);
}
