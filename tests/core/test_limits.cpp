// The resource limits table (core/limits.hpp): names, --limit parsing, the one-line message, and
// a bounded read that stops on a file without end.
#include <gtest/gtest.h>

#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/limits.hpp"
#include "testing.hpp"

using namespace sinkscope;

namespace {
// Restores a limit when the test ends.
struct Restore {
    Limit id;
    uint64_t value = limit_value(id);
    ~Restore() { set_limit(id, value); }
};
}  // namespace

// NAME=N sets exactly that limit; anything else is a usage error naming --limit.
TEST(Limits, SetByName) {
    Restore r{Limit::JsonDepth};
    set_limit("json_depth=7");
    EXPECT_EQ(limit_value(Limit::JsonDepth), 7u);
    for (const char* bad : {"json_depth", "json_depth=", "json_depth=-1", "json_depth=1e3",
                            "json_depth=18446744073709551616", "nope=3", "=3"}) {
        try {
            set_limit(bad);
            ADD_FAILURE() << bad;
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("--limit ", 0), 0u) << e.what();
        }
    }
    EXPECT_EQ(limit_value(Limit::JsonDepth), 7u);
}

// Every limit has a distinct name, a default and a description.
TEST(Limits, TableIsComplete) {
    size_t n = 0;
    const LimitInfo* t = limit_table(&n);
    ASSERT_GE(n, 10u);
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(static_cast<size_t>(t[i].id), i);
        EXPECT_GT(t[i].default_value, 0u);
        EXPECT_GT(std::string(t[i].what).size(), 5u);
        for (size_t j = 0; j < i; ++j) EXPECT_NE(std::string(t[i].name), t[j].name);
    }
}

// A limit hit is one input error naming the file, what was counted, the limit and the option.
TEST(Limits, MessageNamesFileLimitAndOption) {
    try {
        throw_limit("a.json", Limit::JsonBytes, "size in bytes", 99);
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()),
                  "a.json: size in bytes 99 exceeds the limit json_bytes = " +
                      std::to_string(limit_value(Limit::JsonBytes)) +
                      " (raise it with --limit json_bytes=N if the file is genuine)");
    }
}

// A regular file is judged by its size before it is read; a device without end (/dev/zero) is
// read only up to the limit.
TEST(Limits, BoundedRead) {
    Restore r{Limit::DataBytes};
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "a.txt", std::string(100, 'x'));
    set_limit(Limit::DataBytes, 100);
    EXPECT_EQ(read_file_limited(tmp / "a.txt", Limit::DataBytes), std::string(100, 'x'));
    set_limit(Limit::DataBytes, 99);
    EXPECT_THROW(read_file_limited(tmp / "a.txt", Limit::DataBytes), InputError);
    set_limit(Limit::DataBytes, 1000);
    try {
        read_file_limited("/dev/zero", Limit::DataBytes);
        ADD_FAILURE() << "/dev/zero read to the end";
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("/dev/zero: size in bytes (read so far) ", 0), 0u)
            << e.what();
    }
    EXPECT_THROW(read_file_limited(tmp / "missing.txt", Limit::DataBytes), IoError);
}
