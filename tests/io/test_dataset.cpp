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

// Each sample knows its 0-based row in the file (text and JSONL: the line, blank lines counted;
// CSV: the record after the header, a record with an empty text counted; .npy: the row), and
// carries the --keep-columns values: CSV fields, JSONL fields (numbers as their JSON text).
TEST(Dataset, RowsAndKeptColumns) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.txt") << "one\n\n  \nfour\nfive";
    auto t = load_dataset(tmp / "a.txt");
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].row, 0);
    EXPECT_EQ(t[1].row, 3);
    EXPECT_EQ(t[2].row, 4);

    // Record 2 (row 1) spans two lines and record 3 (row 2) has no text: rows are records.
    std::ofstream(tmp / "a.csv") << "text,field,p\nalpha,physics,0.5\n\"b\nc\",math,1\n,x,2\n"
                                    "delta,\"geo, graphy\",0.25\n";
    auto c = load_dataset(tmp / "a.csv", {.keep_columns = {"p", "field"}});
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0].row, 0);
    EXPECT_EQ(c[1].row, 1);
    EXPECT_EQ(c[2].row, 3);
    EXPECT_EQ(c[2].kept, (std::vector<std::string>{"0.25", "geo, graphy"}));
    EXPECT_EQ(c[1].kept, (std::vector<std::string>{"1", "math"}));
    EXPECT_TRUE(load_dataset(tmp / "a.csv")[0].kept.empty());

    std::ofstream(tmp / "a.jsonl") << "{\"text\": \"x\", \"field\": \"bio\", \"p\": 0.5}\n\n"
                                      "{\"ids\": [1, 2], \"field\": \"chem\", \"p\": 2}\n";
    auto j = load_dataset(tmp / "a.jsonl", {.keep_columns = {"field", "p"}});
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[1].row, 2);
    EXPECT_EQ(j[0].kept, (std::vector<std::string>{"bio", "0.5"}));
    EXPECT_EQ(j[1].kept, (std::vector<std::string>{"chem", "2"}));

    write_npy(tmp / "ids.npy", make_npy_i64({3, 2}, {-1, -1, 5, 6, 7, 8}));
    auto n = load_dataset(tmp / "ids.npy");
    ASSERT_EQ(n.size(), 2u);
    EXPECT_EQ(n[0].row, 1);
    EXPECT_EQ(n[1].row, 2);
}

// A kept column the file lacks is one error naming the file and the column (the CSV header's
// names listed); text and .npy files have no columns to keep.
TEST(Dataset, UnknownKeptColumnNamed) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.csv") << "text,field\nalpha,physics\n";
    std::ofstream(tmp / "a.jsonl") << "{\"text\": \"x\", \"field\": \"bio\"}\n{\"text\": \"y\"}\n";
    std::ofstream(tmp / "a.txt") << "x\n";
    auto message = [&](const std::string& file) {
        try {
            load_dataset(tmp / file, {.keep_columns = {"field", "predictability"}});
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string csv = message("a.csv");
    EXPECT_NE(csv.find((tmp / "a.csv").string()), std::string::npos) << csv;
    EXPECT_NE(csv.find("'predictability'"), std::string::npos) << csv;
    EXPECT_NE(csv.find("'field'"), std::string::npos) << csv;  // the columns there are
    EXPECT_EQ(csv.find('\n'), std::string::npos) << csv;
    const std::string jsonl = message("a.jsonl");
    EXPECT_NE(jsonl.find("line 1: no field 'predictability'"), std::string::npos) << jsonl;
    const std::string txt = message("a.txt");
    EXPECT_NE(txt.find("--keep-columns needs a CSV or JSONL"), std::string::npos) << txt;
}
