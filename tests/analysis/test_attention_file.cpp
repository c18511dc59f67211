// Reading attention dumps (spec 0, 10.p): shapes, dtypes, masking detection, padding lengths,
// scores validation.
#include <gtest/gtest.h>

#include <cmath>

#include "sinkscope/analysis/attention_file.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/metrics/head.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;
using namespace sinkscope::analysis;

namespace {
std::vector<float> to_f32(const std::vector<double>& v) {
    return {v.begin(), v.end()};
}
AttentionFileOptions options_for(const std::filesystem::path& attention) {
    AttentionFileOptions o;
    o.attention = attention;
    return o;
}
}  // namespace

// A 4-D file is one input; f4 values widen exactly (read in place); causal masking is detected.
TEST(AttentionFile, FourDimensionalCausal) {
    testutil::ScratchDir dir;
    auto x = testutil::random_input(1, 2, 3, 5, Masking::Causal, false);
    io::write_npy(dir / "a.npy", io::make_npy_f32({2, 3, 5, 5}, to_f32(x.pattern)));
    AttentionFile f(options_for(dir / "a.npy"));
    EXPECT_EQ(f.n_inputs(), 1);
    EXPECT_EQ(f.n_layers(), 2);
    EXPECT_EQ(f.masking(), Masking::Causal);
    EXPECT_TRUE(f.masking_detected());
    AttentionInput y;
    f.load(0, y);
    ASSERT_FALSE(y.stored());
    EXPECT_TRUE(y.source->holds_all_rows());
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t h = 0; h < 3; ++h)
            for (int64_t i = 0; i < 5; ++i)
                for (int64_t j = 0; j < 5; ++j)
                    EXPECT_EQ(y.row(l, h, i)[j], double(float(x.pattern[x.offset(l, h, i) + j])));
}

// Explicit masking overrides detection; a window needs causal masking.
TEST(AttentionFile, ExplicitMaskingAndWindow) {
    testutil::ScratchDir dir;
    auto x = testutil::random_input(2, 1, 1, 4, Masking::Bidirectional, false);
    io::write_npy(dir / "a.npy", io::make_npy_f64({1, 1, 1, 4, 4}, x.pattern));
    AttentionFileOptions o = options_for(dir / "a.npy");
    EXPECT_EQ(AttentionFile(o).masking(), Masking::Bidirectional);
    o.window = 2;
    EXPECT_THROW(AttentionFile{o}, UsageError);
}

// Padded encoder inputs: with --lengths the padding keys are absent parts and padding queries
// are skipped, so the results equal those of the unpadded input.
TEST(AttentionFile, LengthsMatchUnpaddedInput) {
    testutil::ScratchDir dir;
    auto small = testutil::random_input(3, 2, 2, 5, Masking::Bidirectional, false, 1);
    const int64_t t = 7;  // pad 5 -> 7 with junk that is not a probability row
    std::vector<double> padded(size_t(2 * 2 * t * t), 0.3);
    for (int64_t r = 0; r < 2 * 2; ++r)
        for (int64_t i = 0; i < 5; ++i)
            for (int64_t j = 0; j < 5; ++j)
                padded[size_t((r * t + i) * t + j)] = small.pattern[size_t((r * 5 + i) * 5 + j)];
    io::write_npy(dir / "a.npy", io::make_npy_f64({1, 2, 2, t, t}, padded));
    io::write_npy(dir / "len.npy", io::make_npy_i64({1}, {5}));
    AttentionFileOptions o = options_for(dir / "a.npy");
    o.lengths = dir / "len.npy";
    o.masking = Masking::Bidirectional;
    AttentionFile f(o);
    AttentionInput y;
    f.load(0, y);
    HeadOptions h;
    h.sink = parse_sink_policy("1");
    HeadAccumulator a(2, 2, h), b(2, 2, h);
    a.add(y);
    b.add(small);
    HeadResults ra = a.finish(), rb = b.finish();
    for (const char* name : kDistanceNames)
        // the same rows through the same code (one loaded from the file): only a few operations
        // on float64 values may be ordered differently
        EXPECT_ERROR_WITHIN((ra.distances.at(name) - rb.distances.at(name)).cwiseAbs().maxCoeff(),
                            testutil::kFewOps)
            << name;
    EXPECT_EQ(ra.counts.rows_total, rb.counts.rows_total);
    io::write_npy(dir / "bad.npy", io::make_npy_i64({1}, {8}));
    o.lengths = dir / "bad.npy";
    EXPECT_THROW(AttentionFile{o}, InputError);
}

// Scores must match the attention's shape, be finite where visible, and their softmax must
// agree with the attention within the tolerance.
TEST(AttentionFile, ScoresValidation) {
    testutil::ScratchDir dir;
    auto x = testutil::random_input(4, 1, 2, 4, Masking::Causal, true);
    io::write_npy(dir / "a.npy", io::make_npy_f64({1, 2, 4, 4}, x.pattern));
    io::write_npy(dir / "z.npy", io::make_npy_f64({1, 2, 4, 4}, x.scores));
    AttentionFileOptions o = options_for(dir / "a.npy");
    o.scores = dir / "z.npy";
    AttentionInput y;
    AttentionFile(o).load(0, y);
    EXPECT_TRUE(y.has_scores());
    auto z = x.scores;
    z[x.offset(0, 1, 3) + 2] += 1.0;  // softmax no longer matches A
    io::write_npy(dir / "z.npy", io::make_npy_f64({1, 2, 4, 4}, z));
    try {
        AttentionFile(o).load(0, y);
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("(0, 0, 1, 3,"), std::string::npos) << e.what();
        EXPECT_EQ(e.file(), (dir / "z.npy").string());
    }
}

// f2 attention is accepted (rows then sum to 1 only within ~1e-3).
TEST(AttentionFile, HalfPrecision) {
    testutil::ScratchDir dir;
    auto x = testutil::random_input(5, 1, 1, 6, Masking::Causal, false);
    io::NpyArray a;
    a.dtype = io::DType::F16;
    a.shape = {1, 1, 6, 6};
    for (double v : x.pattern) {
        uint16_t h = io::float_to_half(float(v));
        a.data.push_back(uint8_t(h & 0xff));
        a.data.push_back(uint8_t(h >> 8));
    }
    io::write_npy(dir / "a.npy", a);
    AttentionFile f(options_for(dir / "a.npy"));
    AttentionInput y;
    EXPECT_NO_THROW(f.load(0, y));
}
