// The Llama model of ../shared/zoo/gguf/quant in its ten quantization formats: loaded from the GGUF
// (weights dequantized to float32 on load) each reproduces its golden (a float32 forward on
// gguf-py's dequantization), and corrupt copies of a quant file fail with one line naming file and
// tensor.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_quant_types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

fs::path quant_file(const fs::path& shared, const std::string& type) {
    return shared / "zoo" / "gguf" / "quant" / type / ("llama_q-" + type + ".gguf");
}

std::string read_bytes(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// Byte position of tensor `name`'s n_dims field in a GGUF file: the tensor description is
// u64 name length, the name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset (GGUF spec).
size_t tensor_info_at(const std::string& bytes, const std::string& name) {
    std::string key(8, '\0');
    const uint64_t len = name.size();
    std::memcpy(key.data(), &len, 8);
    key += name;
    const size_t at = bytes.find(key);
    EXPECT_NE(at, std::string::npos) << name;
    return at + key.size();
}

}  // namespace

class GgufQuantModel : public ::testing::TestWithParam<const char*> {};

// load_model on quant/<TYPE>/llama_q-<TYPE>.gguf matches golden/robot (ids, logits, attention,
// scores, hidden states within the float32 zoo tolerances: the golden is a float32 forward on the
// same dequantized values).
TEST_P(GgufQuantModel, MatchesGolden) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const std::string type = GetParam();
    const Model m = load_model(quant_file(shared, type));
    testutil::check_zoo_input(m, shared / "zoo" / "gguf" / "quant" / type / "golden" / "robot");
}

INSTANTIATE_TEST_SUITE_P(Quant, GgufQuantModel, ::testing::ValuesIn(k_quant_types),
                         [](const auto& info) { return std::string(info.param); });

// Corrupt copies of a quant GGUF: load_model throws one line naming the file and the tensor (and
// the type where it is the problem), and the CLI prints exactly that line on stderr, nothing else.
struct BadQuant {
    const char* label;
    const char* type;    // which quant file is copied
    const char* tensor;  // whose description is changed
    int field;           // 0: ne[0], 1: ne[1], 2: the type id
    uint64_t value;
    const char* expect;  // a phrase of the message
    bool unsupported;    // UnsupportedError (else InputError)
};

class GgufQuantBadInput : public ::testing::TestWithParam<BadQuant> {};

TEST_P(GgufQuantBadInput, OneLineNamingFileAndTensor) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const BadQuant& c = GetParam();
    std::string bytes = read_bytes(quant_file(shared, c.type));
    const size_t at = tensor_info_at(bytes, c.tensor);
    uint32_t n_dims = 0;
    std::memcpy(&n_dims, bytes.data() + at, 4);
    ASSERT_EQ(n_dims, 2u);
    if (c.field < 2) {
        std::memcpy(bytes.data() + at + 4 + 8 * c.field, &c.value, 8);
    } else {
        const uint32_t id = uint32_t(c.value);
        std::memcpy(bytes.data() + at + 4 + 8 * n_dims, &id, 4);
    }
    testutil::ScratchDir tmp;
    const fs::path bad = tmp / (std::string(c.label) + ".gguf");
    testutil::write_text(bad, bytes);
    std::string what;
    try {
        load_model(bad);
        FAIL() << c.label << " was accepted";
    } catch (const UnsupportedError& e) {
        EXPECT_TRUE(c.unsupported) << e.what();
        what = e.what();
    } catch (const InputError& e) {
        EXPECT_FALSE(c.unsupported) << e.what();
        what = e.what();
    }
    EXPECT_EQ(what.rfind(bad.string() + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(c.tensor), std::string::npos) << what;
    EXPECT_NE(what.find(c.expect), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;

    const auto r = testutil::run_cli({"inspect", "--model", bad.string()});
    EXPECT_EQ(r.exit_code, c.unsupported ? 4 : 3) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Quant, GgufQuantBadInput,
    ::testing::Values(
        // ne[1] 512 -> 513 rows: 144 more bytes than the space before the next tensor.
        BadQuant{"size", "Q4_K", "token_embd.weight", 1, 513, "overlaps tensor", false},
        // The last tensor in the file (output.weight) grows past the end of the file.
        BadQuant{"past_end", "Q8_0", "output.weight", 1, 600, "beyond the end", false},
        // ne[0] 256 -> 128: a row of half a Q4_K super-block (refused before the size check).
        BadQuant{"row", "Q4_K", "blk.0.attn_v.weight", 0, 128, "not a whole number of Q4_K", false},
        BadQuant{"row32", "Q5_1", "blk.0.ffn_up.weight", 0, 240,
                 "not a whole number of Q5_1 blocks (32)", false},
        // A type id ggml does not define, and one it defines but sinkscope does not read.
        BadQuant{"type99", "Q6_K", "blk.0.attn_q.weight", 2, 99, "GGML type 99", true},
        BadQuant{"iq2_xxs", "Q2_K", "token_embd.weight", 2, 16, "IQ2_XXS in 'token_embd.weight'",
                 true}),
    [](const auto& info) { return std::string(info.param.label); });
