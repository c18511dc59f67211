// Tables produced on demand (io::Table::generated): the same bytes on disk as the same rows held
// in memory, written in pieces (a table of several MiB crosses the writer's 1 MiB pieces), and a
// source that makes another number of rows than it announced is an internal error, not a
// silently short file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

using namespace sinkscope;

namespace {

const std::vector<std::string> kColumns = {"name", "i", "value"};

// Row k of the test table: a string that needs CSV quoting now and then, an integer, and a
// double that is sometimes not finite (written "nan" / "inf").
std::vector<io::Cell> row_of(int64_t k) {
    const double v = k % 97 == 0   ? std::numeric_limits<double>::quiet_NaN()
                     : k % 89 == 0 ? -std::numeric_limits<double>::infinity()
                                   : std::sqrt(double(k)) / 7.0;
    return {k % 13 == 0 ? std::string("a,\"b\"") : std::string("h") + std::to_string(k % 5), k, v};
}

io::Table generated(int64_t n, int64_t announced) {
    return io::Table::generated(kColumns, size_t(announced), [n] {
        return [n, k = int64_t(0)](std::vector<io::Cell>& cells) mutable {
            if (k >= n) return false;
            cells = row_of(k++);
            return true;
        };
    });
}

// The same rows with a text source (Table::generated's fourth argument) that writes `lines`
// rows, a few rows a call, as append_csv_line writes their cells.
io::Table generated_with_text(int64_t n, int64_t lines) {
    auto cells = [n] {
        return [n, k = int64_t(0)](std::vector<io::Cell>& cells) mutable {
            if (k >= n) return false;
            cells = row_of(k++);
            return true;
        };
    };
    auto text = [lines] {
        return [lines, k = int64_t(0)](std::string& out) mutable {
            if (k >= lines) return false;
            for (int64_t stop = std::min(lines, k + 7); k < stop; ++k)
                io::append_csv_line(out, row_of(k));
            return true;
        };
    };
    return io::Table::generated(kColumns, size_t(n), cells, text);
}

io::Table held(int64_t n) {
    io::Table t(kColumns);
    for (int64_t k = 0; k < n; ++k) t.add_row(row_of(k));
    return t;
}

}  // namespace

TEST(GeneratedTable, WritesTheSameBytesAsHeldRows) {
    const int64_t n = 150000;  // ~3.5 MB of CSV: several pieces
    testutil::ScratchDir dir;
    const io::Table g = generated(n, n), h = held(n);
    EXPECT_EQ(g.size(), size_t(n));
    g.write(dir.path(), "gen", true);
    h.write(dir.path(), "held", true);
    const std::string csv = read_file(dir / "gen.csv");
    EXPECT_GT(csv.size(), size_t(3) << 20);
    EXPECT_EQ(csv, read_file(dir / "held.csv"));
    EXPECT_EQ(csv, h.to_csv());
    EXPECT_EQ(read_file(dir / "gen.jsonl"), read_file(dir / "held.jsonl"));
    EXPECT_EQ(g.to_jsonl(), h.to_jsonl());
    // Reading the rows builds them once; they equal the held ones, and writing still agrees.
    ASSERT_EQ(g.rows().size(), size_t(n));
    EXPECT_EQ(std::get<int64_t>(g.rows()[12345][1]), 12345);
    g.write(dir.path(), "again", false);
    EXPECT_EQ(read_file(dir / "again.csv"), csv);
}

TEST(GeneratedTable, EmptyTableIsTheHeaderOnly) {
    testutil::ScratchDir dir;
    const io::Table g = generated(0, 0);
    EXPECT_TRUE(g.empty());
    g.write(dir.path(), "e", false);
    EXPECT_EQ(read_file(dir / "e.csv"), "name,i,value\n");
}

TEST(GeneratedTable, WrongRowCountIsAnErrorAndLeavesNoFile) {
    testutil::ScratchDir dir;
    EXPECT_THROW(generated(10, 11).write(dir.path(), "short", false), InternalError);
    EXPECT_THROW(generated(12, 11).write(dir.path(), "long", false), InternalError);
    EXPECT_FALSE(std::filesystem::exists(dir / "short.csv"));
    EXPECT_FALSE(std::filesystem::exists(dir / "long.csv"));
    // Only the two targets' temporary files could have been left: none is.
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A text source writes the .csv (the same bytes as the cells), and a wrong number of lines from
// it is an internal error that leaves no file; rows added afterwards are written from the cells.
TEST(GeneratedTable, TextSourceWritesTheSameBytesAndIsChecked) {
    const int64_t n = 150000;
    testutil::ScratchDir dir;
    const io::Table g = generated_with_text(n, n), h = held(n);
    g.write(dir.path(), "text", true);
    EXPECT_EQ(read_file(dir / "text.csv"), h.to_csv());
    EXPECT_EQ(read_file(dir / "text.jsonl"), h.to_jsonl());
    EXPECT_EQ(g.to_csv(), h.to_csv());
    EXPECT_THROW(generated_with_text(n, n - 1).write(dir.path(), "short", false), InternalError);
    EXPECT_THROW(generated_with_text(n, n + 1).write(dir.path(), "long", false), InternalError);
    EXPECT_FALSE(std::filesystem::exists(dir / "short.csv"));
    EXPECT_FALSE(std::filesystem::exists(dir / "long.csv"));
    io::Table more = generated_with_text(10, 10);
    more.add_row(row_of(10));
    more.write(dir.path(), "more", false);
    EXPECT_EQ(read_file(dir / "more.csv"), held(11).to_csv());
}

// CSV injection (OWASP; issue 46 item 10): a text cell starting with =, +, -, @, a tab or a
// carriage return gets one single quote before it, as does one of quotes followed by such a
// character; numbers are never quoted (-0.5 and -3 stay numbers); read_csv takes the quote off
// and gives back the cells written.
TEST(Table, FormulaLikeTextCellsAreNeutralisedAndReadBack) {
    testutil::ScratchDir tmp;
    io::Table t({"text", "number", "integer"});
    const std::vector<std::string> texts = {"=1+2", "+x",  "-x",    "@SUM(A1)", "\tx", "\rx",
                                            "'=x",  "''+", "plain", "-",        "a=b", "'quoted"};
    for (const std::string& s : texts) t.add_row({s, -0.5, int64_t(-3)});
    const std::string want =
        "text,number,integer\n"
        "'=1+2,-0.5,-3\n'+x,-0.5,-3\n'-x,-0.5,-3\n'@SUM(A1),-0.5,-3\n'\tx,-0.5,-3\n"
        "\"'\rx\",-0.5,-3\n''=x,-0.5,-3\n'''+,-0.5,-3\nplain,-0.5,-3\n'-,-0.5,-3\n"
        "a=b,-0.5,-3\n'quoted,-0.5,-3\n";
    EXPECT_EQ(t.to_csv(), want);
    t.write(tmp.path(), "t", false);
    EXPECT_EQ(read_file(tmp / "t.csv"), want);
    const io::Table back = io::Table::read_csv(tmp / "t.csv");
    ASSERT_EQ(back.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
        EXPECT_EQ(std::get<std::string>(back.rows()[i][0]), texts[i]) << i;
        EXPECT_EQ(std::get<double>(back.rows()[i][1]), -0.5);
        EXPECT_EQ(std::get<double>(back.rows()[i][2]), -3.0);
    }
}
