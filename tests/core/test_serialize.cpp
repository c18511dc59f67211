// Binary state files: values come back bit for bit; truncation and misordered sections throw.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sinkscope/core/serialize.hpp"

using namespace sinkscope;

// Doubles (including NaN payloads and -0.0), strings and vectors round-trip exactly.
TEST(Serialize, RoundTripBitExact) {
    BinaryWriter w;
    w.tag("head");
    w.put<double>(-0.0);
    w.put<double>(0.1 + 0.2);
    w.put_string("layer 3");
    w.put_vector(std::vector<int64_t>{1, -2, 3});
    std::vector<double> d = {1e-300, std::nan(""), 3.5};
    w.put_doubles(d.data(), d.size());
    BinaryReader r(w.bytes(), "state.bin");
    r.expect_tag("head");
    double z = r.get<double>();
    EXPECT_TRUE(std::signbit(z));
    EXPECT_EQ(r.get<double>(), 0.1 + 0.2);
    EXPECT_EQ(r.get_string(), "layer 3");
    EXPECT_EQ(r.get_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
    std::vector<double> back(3);
    r.get_doubles(back.data(), 3);
    EXPECT_EQ(back[0], 1e-300);
    EXPECT_TRUE(std::isnan(back[1]));
    EXPECT_TRUE(r.at_end());
}

// Raw bytes (put_bytes) are written as a string of them is, and read back in place (get_bytes)
// or as a string; a length beyond the end is refused.
TEST(Serialize, RawBytesAreAString) {
    const std::string text("a\0b\xff", 4);
    BinaryWriter w, as_string;
    w.put_bytes(text.data(), text.size());
    w.put_bytes(nullptr, 0);
    as_string.put_string(text);
    as_string.put_string("");
    EXPECT_EQ(w.bytes(), as_string.bytes());
    BinaryReader r(w.bytes(), "s.bin");
    EXPECT_EQ(r.get_bytes(), text);
    EXPECT_EQ(r.get_string(), "");
    EXPECT_TRUE(r.at_end());
    const std::string cut = w.bytes().substr(0, 8 + 3);  // the length, then 3 of its 4 bytes
    BinaryReader short_read(cut, "s.bin");
    EXPECT_THROW(short_read.get_bytes(), InputError);
}

// A truncated or out-of-step state file is an InputError naming the file.
TEST(Serialize, CorruptStateThrows) {
    BinaryWriter w;
    w.tag("a");
    w.put<int64_t>(7);
    std::string cut = w.bytes().substr(0, w.bytes().size() - 1);
    BinaryReader r1(cut, "s.bin");
    r1.expect_tag("a");
    EXPECT_THROW(r1.get<int64_t>(), InputError);
    BinaryReader r2(w.bytes(), "s.bin");
    try {
        r2.expect_tag("b");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("s.bin"), std::string::npos);
    }
}

// Found by fuzz_state: a flag byte other than 0 / 1 is refused (reading it as a bool would be
// undefined behaviour), and a section name from the file is escaped in the message.
TEST(Serialize, BadFlagByteAndEscapedSectionName) {
    BinaryWriter w;
    w.put<uint8_t>(2);
    BinaryReader r1(w.bytes(), "s.bin");
    try {
        (void)r1.get<bool>();
        FAIL();
    } catch (const InputError& e) {
        EXPECT_STREQ(e.what(),
                     "s.bin: corrupt or incompatible state file: byte 2 where a flag (0 "
                     "or 1) belongs");
    }
    BinaryWriter w2;
    w2.put_string("a\x1b[2J\nb");
    BinaryReader r2(w2.bytes(), "s.bin");
    try {
        r2.expect_tag("head");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_STREQ(e.what(),
                     "s.bin: corrupt or incompatible state file: expected section "
                     "'head', found 'a\\x1b[2J\\x0ab'");
    }
    BinaryWriter w3;
    w3.put<uint8_t>(1);
    BinaryReader r3(w3.bytes(), "s.bin");
    EXPECT_TRUE(r3.get<bool>());
}

namespace {

struct Item {
    int64_t id = 0;
    std::string name;
    std::vector<double> values;
};
void fields(FieldIo& io, Item& x) {
    io(x.id), io(x.name), io(x.values);
}

struct State {
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> counts;
    std::vector<Item> items;
    std::vector<std::string> notes;
    bool flag = false;
};
void visit(FieldIo& io, State& s) {
    io.tag("state");
    io(s.counts), io(s.items), io(s.notes), io(s.flag);
}

}  // namespace

// One visit saves and loads a state of nested maps, pairs, vectors, strings and user types: the
// state read back equals the one written, and the bytes are the layout the writer's own calls
// give (a map as its length then each key and value, a pair as its two members).
TEST(FieldIo, OneVisitSavesAndLoads) {
    State a;
    a.counts[{0, 1}] = {{"<s>", 3}, {"the", 1}};
    a.counts[{2, -1}] = {};
    a.items = {{7, "x", {0.1, -0.0, 1e300}}, {8, "", {}}};
    a.notes = {"one", "two"};
    a.flag = true;
    BinaryWriter w;
    FieldIo out(w);
    visit(out, a);

    BinaryWriter by_hand;
    by_hand.tag("state");
    by_hand.put<uint64_t>(2);
    by_hand.put<int64_t>(0), by_hand.put<int64_t>(1), by_hand.put<uint64_t>(2);
    by_hand.put_string("<s>"), by_hand.put<int64_t>(3);
    by_hand.put_string("the"), by_hand.put<int64_t>(1);
    by_hand.put<int64_t>(2), by_hand.put<int64_t>(-1), by_hand.put<uint64_t>(0);
    by_hand.put<uint64_t>(2);
    by_hand.put<int64_t>(7), by_hand.put_string("x"), by_hand.put_vector(a.items[0].values);
    by_hand.put<int64_t>(8), by_hand.put_string(""), by_hand.put_vector(std::vector<double>{});
    by_hand.put<uint64_t>(2), by_hand.put_string("one"), by_hand.put_string("two");
    by_hand.put(true);
    EXPECT_EQ(w.bytes(), by_hand.bytes());

    State b;
    BinaryReader r(w.bytes(), "state.bin");
    FieldIo in(r);
    visit(in, b);
    EXPECT_TRUE(r.at_end());
    EXPECT_EQ(b.counts, a.counts);
    ASSERT_EQ(b.items.size(), 2u);
    EXPECT_EQ(b.items[0].id, 7);
    EXPECT_EQ(b.items[0].name, "x");
    EXPECT_EQ(b.items[0].values, a.items[0].values);
    EXPECT_TRUE(std::signbit(b.items[0].values[1]));
    EXPECT_EQ(b.notes, a.notes);
    EXPECT_TRUE(b.flag);

    // A length beyond the bytes fails when the reads run out, naming the file.
    std::string cut = w.bytes();
    cut.resize(cut.size() - 5);
    BinaryReader rc(cut, "state.bin");
    FieldIo ic(rc);
    State c;
    try {
        visit(ic, c);
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("state.bin"), std::string::npos);
    }
}
