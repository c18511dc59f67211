// Encoder specifics against the zoo goldens (../shared/zoo/bert, roberta): the sentence-pair
// template (ids and token_type_ids) and padded batches (attention_mask) that must reproduce the
// unpadded golden outputs.
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

at::Tensor long_row(const std::vector<int32_t>& v) {
    std::vector<int64_t> wide(v.begin(), v.end());
    return at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});
}

}  // namespace

// tokenizer(text, text_pair) of the zoo bert `pair` input: [CLS] A [SEP] B [SEP] with the golden
// ids and token_type_ids (0 for [CLS] A [SEP], 1 for B [SEP]).
TEST(ZooEncoders, BertPairTemplateGivesGoldenIdsAndTypes) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo/bert";
    const Model m = load_model(dir);
    ASSERT_NE(m.tokenizer(), nullptr);
    const auto manifest = nlohmann::json::parse(read_file(dir / "golden/manifest.json"));
    int n_pairs = 0;
    for (const auto& in : manifest.at("inputs")) {
        if (!in.contains("text_pair")) continue;
        const fs::path input_dir = dir / "golden" / in.at("name").get<std::string>();
        const auto pair = m.tokenizer()->encode_pair(in.at("text").get<std::string>(),
                                                     in.at("text_pair").get<std::string>());
        EXPECT_EQ(pair.ids, testutil::zoo_ids(input_dir));
        EXPECT_EQ(pair.type_ids, testutil::zoo_ids(input_dir, "token_type_ids.npy"));
        ++n_pairs;
    }
    EXPECT_EQ(n_pairs, 1);
}

// A right-padded batch of the `fox` and `robot` inputs (pad id [PAD] = 0 for BERT, <pad> = 1 for
// RoBERTa, attention_mask 0 there) gives for the real tokens the golden attention and logits of
// each input alone, the same values as the unpadded forward (within the float32 bound of two
// evaluations: the batch runs other GEMM shapes, so other summation orders), and pattern exactly
// 0 on every padded key.
TEST(ZooEncoders, PaddedBatchReproducesGoldens) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const auto& [name, pad] : {std::pair<const char*, int32_t>{"bert", 0}, {"roberta", 1}}) {
        SCOPED_TRACE(name);
        const fs::path dir = shared / "zoo" / name;
        const Model m = load_model(dir);
        const auto fox = testutil::zoo_ids(dir / "golden/fox");
        const auto robot = testutil::zoo_ids(dir / "golden/robot");
        const int64_t Tf = static_cast<int64_t>(fox.size()), T = static_cast<int64_t>(robot.size());
        ASSERT_LT(Tf, T);
        std::vector<int32_t> fox_padded = fox, fox_mask(static_cast<size_t>(T), 0);
        fox_padded.resize(static_cast<size_t>(T), pad);
        std::fill_n(fox_mask.begin(), Tf, 1);
        ModelInput batch;
        batch.ids = at::cat({long_row(fox_padded), long_row(robot)});  // [2, T]
        batch.attention_mask = at::cat({long_row(fox_mask), at::ones({1, T}, at::kLong)});
        const ForwardResult r = m.forward(batch, CaptureSpec({hook_glob(HookPoint::Pattern)}));
        const ForwardResult alone = m.forward(fox, CaptureSpec({hook_glob(HookPoint::Pattern)}));

        std::vector<at::Tensor> fox_att, robot_att, alone_att;  // each [H, T, T]
        for (int64_t l = 0; l < m.config().n_layers; ++l) {
            const at::Tensor p = r.captured.at(hook_name(HookPoint::Pattern, l));  // [2, H, T, T]
            fox_att.push_back(p[0].narrow(1, 0, Tf).narrow(2, 0, Tf));
            robot_att.push_back(p[1]);
            alone_att.push_back(alone.captured.at(hook_name(HookPoint::Pattern, l))[0]);
            const at::Tensor padded_keys = p[0].narrow(2, Tf, T - Tf);  // every query row
            EXPECT_TRUE(at::equal(padded_keys, at::zeros_like(padded_keys))) << "layer " << l;
        }
        // Golden tolerances (zoo_tolerances); padded vs alone: the same bound for T = Tf, scaled
        // by the unpadded forward's own magnitudes.
        const testutil::ZooTolerances fox_tol =
            testutil::zoo_tolerances(m.config(), dir / "golden/fox");
        const testutil::ZooTolerances robot_tol =
            testutil::zoo_tolerances(m.config(), dir / "golden/robot");
        testutil::expect_close("fox attentions (padded)", at::stack(fox_att),
                               testutil::zoo_tensor(dir / "golden/fox/attentions.npy"),
                               fox_tol.attention);
        testutil::expect_close("robot attentions (batched)", at::stack(robot_att),
                               testutil::zoo_tensor(dir / "golden/robot/attentions.npy"),
                               robot_tol.attention);
        testutil::expect_close("fox attentions padded vs alone", at::stack(fox_att),
                               at::stack(alone_att), fox_tol.attention);
        testutil::expect_close("fox logits (padded)", r.logits[0].narrow(0, 0, Tf),
                               testutil::zoo_tensor(dir / "golden/fox/logits.npy"), fox_tol.logits);
        testutil::expect_close(
            "fox logits padded vs alone", r.logits[0].narrow(0, 0, Tf), alone.logits[0],
            testutil::logit_tol(m.config(), Tf, testutil::max_abs(alone.logits)));
        testutil::expect_close("robot logits (batched)", r.logits[1],
                               testutil::zoo_tensor(dir / "golden/robot/logits.npy"),
                               robot_tol.logits);
    }
}
