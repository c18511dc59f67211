// sinkscope inspect / dump on pytorch_model.bin directories: the same report and the same
// attention as the safetensors original, and a malicious pickle refused in one line (exit 3)
// with nothing run and no output folder; a trained kv-slot model's twin.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "bin_twin.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/model/train.hpp"
#include "testing.hpp"
#include "torch_bin_writer.hpp"
#include "trained_checkpoint.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}
int count_lines(const std::string& s) {
    return int(std::count(s.begin(), s.end(), '\n'));
}

// inspect's report of the model without the lines about its files and this machine: the path
// ("model"), the file's size, tensor types and load memory, which follow the file format
// (pickle storages are copied, safetensors float32 is used in place), and the available memory.
std::string without_model_line(const std::string& out) {
    std::istringstream in(out);
    std::string line, rest;
    for (std::string key : {"file_bytes ", "tensor_types ", "load_memory ", "available "})
        EXPECT_NE(out.find("\n" + key), std::string::npos) << key << " missing in\n" << out;
    const auto about_files = [](const std::string& l) {
        for (const char* key :
             {"model ", "file_bytes ", "tensor_types ", "load_memory ", "available "})
            if (l.rfind(key, 0) == 0) return true;
        return false;
    };
    while (std::getline(in, line))
        if (!about_files(line)) rest += line + "\n";
    return rest;
}

}  // namespace

// inspect on a pytorch_model.bin twin of zoo/qwen2 prints exactly what it prints for the
// safetensors directory (architecture, dims, parameter count, tokenizer, hooks).
TEST(CliPickle, InspectBinDirectory) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    testutil::write_bin_twin(shared / "zoo/qwen2", tmp / "qwen2");
    const auto bin = run_cli({"inspect", "--model", (tmp / "qwen2").string()});
    const auto st = run_cli({"inspect", "--model", (shared / "zoo/qwen2").string()});
    ASSERT_EQ(bin.exit_code, 0) << bin.err;
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(bin.out.find("architecture  qwen2"), std::string::npos) << bin.out;
    EXPECT_NE(bin.out.find("parameters    621120"), std::string::npos) << bin.out;
    EXPECT_EQ(without_model_line(bin.out), without_model_line(st.out));
}

// dump on the .bin twin writes the same attention (N, L, H, T, T) as on the safetensors model.
TEST(CliPickle, DumpBinEqualsSafetensors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    testutil::write_bin_twin(shared / "zoo/qwen2", tmp / "qwen2");
    write_text(tmp / "data.txt", "The quick brown fox\nA robot walked into a bar\n");
    std::vector<io::NpyArray> att;
    for (const fs::path& model : {tmp / "qwen2", shared / "zoo/qwen2"}) {
        const fs::path out = tmp / ("out" + std::to_string(att.size()));
        const auto r =
            run_cli({"dump", "--model", model.string(), "--data", (tmp / "data.txt").string(),
                     "--hooks", "blocks.*.attn.hook_pattern", "--out", out.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        att.push_back(io::read_npy(out / "attention.npy"));
    }
    ASSERT_EQ(att[0].shape.size(), 5u);
    EXPECT_EQ(att[0].shape, att[1].shape);
    EXPECT_EQ(att[0].to_f64(), att[1].to_f64());
}

// A pytorch_model.bin whose pickle calls os.system: inspect and dump exit 3 with one line naming
// the file and the refused global; the command never runs and dump leaves no output folder.
TEST(CliPickle, MaliciousPickleIsRefused) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "evil");
    fs::copy_file(shared / "zoo/qwen2/config.json", tmp / "evil/config.json");
    const fs::path marker = tmp / "pwned";
    testutil::Pickle p;
    p.op(0x80).op(2).global("os", "system").str("touch " + marker.string()).op(0x85).op('R');
    p.op('.');
    const fs::path bin = tmp / "evil/pytorch_model.bin";
    write_text(bin, testutil::make_zip({{"archive/data.pkl", p.b}}));
    write_text(tmp / "data.txt", "hello\n");
    const auto inspect = run_cli({"inspect", "--model", (tmp / "evil").string()});
    const auto dump = run_cli({"dump", "--model", (tmp / "evil").string(), "--data",
                               (tmp / "data.txt").string(), "--out", (tmp / "out").string()});
    for (const auto& r : {inspect, dump}) {
        EXPECT_EQ(r.exit_code, 3) << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << r.err;
        EXPECT_NE(r.err.find(bin.string() +
                             ": pickle references 'os.system', refused (only tensors are read)"),
                  std::string::npos)
            << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
    EXPECT_FALSE(fs::exists(marker));
    EXPECT_FALSE(fs::exists(tmp / "out"));
}

// The kv slot of `train --kv-bias` (config.json sinkscope_kv_bias, tensors self_attn.sink_key /
// sink_value) read from a pytorch_model.bin twin: the same slot and logits, bit for bit, as the
// safetensors original.
TEST(PickleKvSlot, BinTwinOfATrainedSlotModelGivesTheSameLogits) {
    model::TrainConfig c = model::train_preset("tiny");
    c.kv_bias = true;
    const nlohmann::json hf = model::hf_config_json(c, 257, 256);
    model::Trainer t(c, hf, 3);
    at::manual_seed(4);
    for (int s = 0; s < 2; ++s)
        t.step(at::randint(0, 257, {c.batch, c.seq_len}, at::TensorOptions().dtype(at::kLong)));
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "st");
    const model::Model original = testutil::save_and_load(t, hf, tmp / "st");
    testutil::write_bin_twin(tmp / "st", tmp / "bin");
    ASSERT_TRUE(fs::exists(tmp / "bin" / "pytorch_model.bin"));
    const model::Model twin = testutil::load_weights_only(tmp / "bin");
    EXPECT_TRUE(twin.config().kv_slot);
    EXPECT_EQ(twin.n_params(), original.n_params());
    const at::Tensor ids =
        at::randint(0, 257, {1, c.seq_len}, at::TensorOptions().dtype(at::kLong));
    const at::Tensor a = original.forward(ids).logits, b = twin.forward(ids).logits;
    EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
}
