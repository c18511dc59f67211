// Dataset readers: every format yields the samples written, with errors naming file and line.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/dataset.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

// Plain text: one sample per non-blank line; CRLF tolerated; max_samples honoured.
TEST(Dataset, PlainText) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.txt") << "first line\r\n\n  \nsecond, line\nthird";
    auto s = load_dataset(tmp / "a.txt");
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].text, "first line");
    EXPECT_EQ(s[2].text, "third");
    EXPECT_EQ(load_dataset(tmp / "a.txt", {.max_samples = 2}).size(), 2u);
}

// CSV: quoted fields with commas, doubled quotes and newlines are one field.
TEST(Dataset, CsvQuoting) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.csv") << "id,text\n1,\"a, b \"\"c\"\"\nd\"\n2,plain\n";
    auto s = load_dataset(tmp / "a.csv");
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].text, "a, b \"c\"\nd");
    EXPECT_EQ(s[1].text, "plain");
    EXPECT_THROW(load_dataset(tmp / "a.csv", {.text_column = "body"}), InputError);
    std::ofstream(tmp / "b.csv") << "id,text\n1,x,extra\n";
    EXPECT_THROW(load_dataset(tmp / "b.csv"), InputError);
}

// JSONL: text or ids per line; a broken line is reported by number.
TEST(Dataset, Jsonl) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.jsonl") << "{\"text\": \"hello\"}\n{\"ids\": [1, 2, 3]}\n";
    auto s = load_dataset(tmp / "a.jsonl");
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].text, "hello");
    EXPECT_EQ(s[1].ids, (std::vector<int64_t>{1, 2, 3}));
    std::ofstream(tmp / "b.jsonl") << "{\"text\": \"ok\"}\n{oops\n";
    try {
        load_dataset(tmp / "b.jsonl");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
}

// .npy ids: (N, T) rows with trailing negative padding become ragged samples.
TEST(Dataset, NpyIds) {
    testutil::ScratchDir tmp;
    write_npy(tmp / "ids.npy", make_npy_i64({2, 3}, {5, 6, 7, 8, -1, -1}));
    auto s = load_dataset(tmp / "ids.npy");
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[1].ids, (std::vector<int64_t>{8}));
    write_npy(tmp / "f.npy", make_npy_f64({2}, {1, 2}));
    EXPECT_THROW(load_dataset(tmp / "f.npy"), InputError);
}

// The built-in prompt set has at least 200 distinct sentences.
TEST(Dataset, BuiltinPrompts) {
    auto s = builtin_prompts();
    EXPECT_GE(s.size(), 200u);
    std::set<std::string> distinct;
    for (auto& x : s) distinct.insert(x.text);
    EXPECT_EQ(distinct.size(), s.size());
    EXPECT_EQ(builtin_prompts(10).size(), 10u);
}

// The shared STEM prompt set (811 rows, quoted commas) reads fully through the CSV path.
TEST(Dataset, SharedStemSentences) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto s = load_dataset(shared / "data/stem_sentences.csv");
    EXPECT_EQ(s.size(), 811u);
}
