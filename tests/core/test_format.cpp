// printable() / quote(): file-provided strings in one-line messages (core/format.hpp). Expected
// texts are written out by hand from the rule: C0 controls, DEL, C1 controls and bytes that are
// not well-formed UTF-8 (RFC 3629) become \xNN; the rest stays; long strings are cut at a
// character boundary.
#include <gtest/gtest.h>

#include <string>

#include "sinkscope/core/format.hpp"

using sinkscope::printable;
using sinkscope::quote;

// Line ends, escape sequences and DEL cannot reach the terminal raw.
TEST(Printable, ControlCharactersBecomeHex) {
    EXPECT_EQ(printable("ab\ncd"), "ab\\x0acd");
    EXPECT_EQ(printable("\x1b[31mred\r"), "\\x1b[31mred\\x0d");
    EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(printable("\x7f"), "\\x7f");
    EXPECT_EQ(printable("tab\there"), "tab\\x09here");
}

// Well-formed UTF-8 stays as it is; C1 controls (U+0080..U+009F, the 8-bit CSI U+009B among
// them) are escaped byte by byte.
TEST(Printable, Utf8StaysC1IsEscaped) {
    EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80"),
              "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80");
    EXPECT_EQ(printable("\xc2\x9b"
                        "2J"),
              "\\xc2\\x9b2J");
    EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is not a control
}

// Bytes that are not well-formed UTF-8: stray continuation bytes, overlong forms, surrogates,
// code points above U+10FFFF, truncated sequences.
TEST(Printable, IllFormedUtf8BecomesHex) {
    EXPECT_EQ(printable("\xff"), "\\xff");
    EXPECT_EQ(printable("\x80x"), "\\x80x");
    EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
    EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
    EXPECT_EQ(printable("\xe2\x96"), "\\xe2\\x96");
}

// Longer than the limit: cut at a character boundary, the original length said.
TEST(Printable, LongStringsAreCut) {
    EXPECT_EQ(printable(std::string(300, 'a'), 10), "aaaaaaaaaa...(300 bytes)");
    EXPECT_EQ(printable("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 5),
              "\xc3\xa9\xc3\xa9...(10 bytes)");
    EXPECT_EQ(printable("\n\n\n", 8), "\\x0a\\x0a...(3 bytes)");
    EXPECT_EQ(printable(std::string(120, 'b')), std::string(120, 'b'));
    EXPECT_EQ(printable(std::string(121, 'b')), std::string(120, 'b') + "...(121 bytes)");
}

TEST(Printable, QuoteWrapsInSingleQuotes) {
    EXPECT_EQ(quote("w\nx"), "'w\\x0ax'");
    EXPECT_EQ(quote(""), "''");
}
