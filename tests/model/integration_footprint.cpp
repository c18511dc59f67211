// Metadata-only loads and the memory check before a load (issue 47, item 3). The footprint of a
// metadata-only build is checked against the real model's own tensors: the parameter count, the
// values converted into memory of the model's own, and the values used in the file's mapped
// pages (found independently, from /proc/self/maps).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include "mapped_ranges.hpp"
#include "narrow_copy.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using sinkscope::testutil::inside;
using sinkscope::testutil::mappings_of;
namespace fs = std::filesystem;

namespace {

// Every checkpoint of ../shared the loader reads: the zoo's HF folders and GGUF files (twins,
// quantization types) and the trained tiny models in their three formats.
std::vector<fs::path> checkpoints(const fs::path& shared) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(shared / "zoo"))
        if (fs::exists(e.path() / "config.json")) out.push_back(e.path());
    for (const auto& e : fs::recursive_directory_iterator(shared / "zoo/gguf"))
        if (e.path().extension() == ".gguf") out.push_back(e.path());
    for (const char* p : {"models/tinystories656K", "models/stories260K/stories260K.gguf",
                          "models/stories260K/stories260K.bin"})
        out.push_back(shared / p);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

// A metadata-only build counts what the real build holds: the same parameters, the values it
// converted (every parameter value not in the file's pages) and the values it uses in the
// file's pages (float32 on the CPU), and its tensors have no storage.
TEST(Footprint, MetadataOnlyCountsWhatTheRealLoadHolds) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    int loaded = 0;
    for (const fs::path& path : checkpoints(shared)) {
        SCOPED_TRACE(path.string());
        LoadOptions meta_options;
        meta_options.metadata_only = true;
        std::optional<Model> meta;
        try {
            meta.emplace(load_model(path, meta_options));
        } catch (const UnsupportedError& e) {
            // A quantization type sinkscope does not read: the real load refuses it alike.
            EXPECT_THROW(load_model(path), UnsupportedError) << e.what();
            continue;
        }
        const Model real = load_model(path);
        ++loaded;
        EXPECT_EQ(meta->n_params(), real.n_params());
        const WeightFootprint& f = meta->footprint;
        EXPECT_EQ(f.n_params, real.n_params());
        EXPECT_EQ(f.numel_copied + f.numel_in_place + f.numel_deferred, real.n_params());
        // Deferred: exactly the bf16 / f16 / quantized file values of mapped files (the Llama
        // and Gemma-2 families' matrices); none when every value is float32.
        const bool narrow = std::any_of(f.tensor_types.begin(), f.tensor_types.end(),
                                        [](const auto& t) { return t.first != "F32"; });
        if (!narrow) EXPECT_EQ(f.numel_deferred, 0);
        if (narrow &&
            (real.config().architecture == "llama" || real.config().architecture == "qwen2"))
            EXPECT_GT(f.numel_deferred, 0);

        std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
        for (const fs::path& file : real.files)
            for (const auto& r : mappings_of(file)) ranges.push_back(r);
        int64_t mapped = 0, largest = 0;
        for (const Parameter& p : real.parameters()) {
            if (inside(p.tensor, ranges)) mapped += p.tensor.numel();
            largest = std::max(largest, p.tensor.numel());
        }
        EXPECT_EQ(f.numel_in_place, mapped);
        // a fused tensor is read whole, then split
        EXPECT_GE(std::max(f.largest_numel, f.largest_deferred), largest);
        for (const Parameter& p : meta->parameters()) EXPECT_TRUE(p.tensor.is_meta());

        int64_t file_bytes = 0;
        for (const fs::path& file : real.files) file_bytes += int64_t(fs::file_size(file));
        EXPECT_EQ(f.file_bytes, file_bytes);
        EXPECT_EQ(f.n_files, int64_t(real.files.size()));
        EXPECT_FALSE(f.tensor_types.empty());
    }
    EXPECT_GT(loaded, 20);
}

// The peak a load may reach, as WeightFootprint::load_bytes defines it (model/footprint.hpp).
TEST(Footprint, LoadBytesFormula) {
    WeightFootprint f;
    f.numel_copied = 1000;
    f.numel_in_place = 300;  // the file's pages: not counted
    f.numel_deferred = 700;  // the file's pages, widened one tensor at a time
    f.largest_numel = 50;
    f.largest_deferred = 70;
    f.value_bytes = 4;
    EXPECT_EQ(f.load_bytes(), 4 * 1000 + 8 * 50 + 8 * 70);
    f.value_bytes = 2;
    EXPECT_EQ(f.load_bytes(), 2 * 1000 + 8 * 50 + 10 * 70);
    f.value_bytes = 8;
    EXPECT_EQ(f.load_bytes(), 8 * 1000 + 8 * 50 + 16 * 70);
}

// A load whose footprint exceeds the memory budget is refused in one line before any weight
// data is read, naming --dtype bfloat16 when that fits; nothing is written. Within the budget,
// the same command runs.
TEST(Footprint, LoadBeyondTheBudgetIsRefused) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    // A bf16 checkpoint: at bfloat16 its matrices are used as they lie, at float32 they stay in
    // the file and the largest is widened at each use, so bfloat16 takes less.
    testutil::ScratchDir tmp;
    const fs::path model = tmp / "qwen2_bf16";
    testutil::write_narrow_copy(shared / "zoo/qwen2", model, at::kBFloat16);
    LoadOptions meta;
    meta.metadata_only = true;
    const Model m = load_model(model, meta);
    const int64_t f32 = m.load_memory.at(ComputeDType::Float32);
    const int64_t bf16 = m.load_memory.at(ComputeDType::BFloat16);
    EXPECT_EQ(m.footprint.load_bytes(), f32);
    ASSERT_LT(bf16, f32);
    const std::string between = "SINKSCOPE_MEMORY_LIMIT=" + std::to_string((f32 + bf16) / 2);
    const auto args = [&](const std::string& out, const std::string& dtype) {
        return std::vector<std::string>{"analyze", "--model",           model.string(), "--samples",
                                        "1",       "--no-report",       "--dtype",      dtype,
                                        "--out",   (tmp / out).string()};
    };
    const auto refused = testutil::run_cli(args("f32", "float32"), {"env", between});
    EXPECT_EQ(refused.exit_code, 4) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_NE(
        refused.err.find(model.string() + ": not supported: loading this model at --dtype float32"),
        std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("SINKSCOPE_MEMORY_LIMIT"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("with --dtype bfloat16 it needs about"), std::string::npos)
        << refused.err;
    EXPECT_FALSE(fs::exists(tmp / "f32"));

    const auto runs = testutil::run_cli(args("bf16", "bfloat16"), {"env", between});
    EXPECT_EQ(runs.exit_code, 0) << runs.err;

    const auto tiny =
        testutil::run_cli(args("tiny", "bfloat16"), {"env", "SINKSCOPE_MEMORY_LIMIT=1K"});
    EXPECT_EQ(tiny.exit_code, 4) << tiny.err;
    EXPECT_NE(tiny.err.find("a smaller model, a quantized GGUF file of it"), std::string::npos)
        << tiny.err;
    EXPECT_FALSE(fs::exists(tmp / "tiny"));

    for (const char* bad : {"lots", "16Q", "0", "-5", "12GB", ""}) {
        if (!*bad) continue;
        const auto r = testutil::run_cli(args("bad", "float32"),
                                         {"env", std::string("SINKSCOPE_MEMORY_LIMIT=") + bad});
        EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
        EXPECT_NE(r.err.find("SINKSCOPE_MEMORY_LIMIT must be"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "bad"));
    }
}

// inspect reads metadata only and reports the footprint: its parameter count is the real
// model's, and its memory lines are the footprint's figures.
TEST(Footprint, InspectReportsTheFootprint) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path model = shared / "zoo/gguf/quant/Q4_K";
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(model))
        if (e.path().extension() == ".gguf") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty()) << model;
    const fs::path file = files.front();
    const Model real = load_model(file);
    const auto r = testutil::run_cli({"inspect", "--model", file.string()},
                                     {"env", "SINKSCOPE_MEMORY_LIMIT=3G"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\nparameters    " + std::to_string(real.n_params()) + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("\nfile_bytes    " + std::to_string(fs::file_size(file)) + " "),
              std::string::npos)
        << r.out;
    const auto& need = real.load_memory;
    EXPECT_NE(
        r.out.find("load_memory   float32 " + format_bytes(double(need.at(ComputeDType::Float32))) +
                   ", bfloat16 " + format_bytes(double(need.at(ComputeDType::BFloat16)))),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("\navailable     "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\ntensor_types  "), std::string::npos) << r.out;
}
