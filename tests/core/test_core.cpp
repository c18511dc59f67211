// Core utilities: SHA-256 against FIPS 180-4 test vectors, errors, progress.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/core/sha256.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

// SHA-256 matches the FIPS 180-4 example digests (one block, two blocks, empty).
TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // A million 'a' (FIPS 180-4 long message), fed in uneven chunks.
    Sha256 h;
    std::string chunk(999, 'a');
    size_t left = 1000000;
    while (left) {
        size_t n = std::min(left, chunk.size());
        h.update(chunk.data(), n);
        left -= n;
    }
    EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Input errors name the file first and carry the input exit code.
TEST(Errors, InputErrorNamesFile) {
    try {
        SS_CHECK_INPUT(1 + 1 == 3, "model.bin", "tensor ", "w", " has shape ", 3);
        FAIL() << "no throw";
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()), "model.bin: tensor w has shape 3");
        EXPECT_EQ(e.exit_code(), 3);
    }
}

// Durations print compactly for the progress line.
TEST(Progress, FormatDuration) {
    EXPECT_EQ(format_duration(5), "5s");
    EXPECT_EQ(format_duration(185), "3m05s");
    EXPECT_EQ(format_duration(3720), "1h02m");
}

// The progress line shows the stage inside the current sample, and drops it after the sample.
TEST(Progress, StageInsideSample) {
    Progress p("analyze", 2, Progress::Mode::Always);
    testing::internal::CaptureStderr();
    p.stage("head metrics", 50, 100);  // first draw: not throttled
    p.stage("head metrics", 100, 100);
    p.update(2, 300);  // last sample: drawn, stage cleared
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("0/2 samples"), std::string::npos) << err;
    EXPECT_NE(err.find("sample 1: head metrics 50%"), std::string::npos) << err;
    EXPECT_NE(err.find("sample 1: head metrics 100%"), std::string::npos) << err;
    const std::string last = err.substr(err.rfind('\r'));
    EXPECT_NE(last.find("2/2 samples"), std::string::npos) << last;
    EXPECT_EQ(last.find("head metrics"), std::string::npos) << last;
    EXPECT_FALSE(Progress("x", 1, Progress::Mode::Never).stage_reporter());
}

// sample_indices: k distinct sorted indices of [0, n), reproducible per seed, and uniform: over
// many seeds every index is drawn with probability k/n (a binomial count per index; 5 standard
// deviations over 20 indices keeps a false alarm below 1e-5).
TEST(Random, SampleIndicesAreAUniformSubset) {
    const size_t n = 20, k = 5, trials = 4000;
    std::vector<int> count(n, 0);
    for (uint64_t seed = 0; seed < trials; ++seed) {
        const auto idx = sinkscope::sample_indices(n, k, seed);
        ASSERT_EQ(idx.size(), k);
        for (size_t i = 0; i < k; ++i) {
            ASSERT_LT(idx[i], n);
            if (i) {
                ASSERT_LT(idx[i - 1], idx[i]);  // sorted, hence distinct
            }
            ++count[idx[i]];
        }
        if (seed < 3) {
            EXPECT_EQ(idx, sinkscope::sample_indices(n, k, seed));
        }
    }
    const double p = double(k) / double(n), mean = trials * p;
    const double sd = std::sqrt(trials * p * (1 - p));
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(count[i], mean, 5 * sd) << "index " << i;
    EXPECT_EQ(sinkscope::sample_indices(3, 7, 1), (std::vector<size_t>{0, 1, 2}));
}
