// The zoo ViT end to end from image files: a PNG of each golden image (8-bit levels) goes through
// the model's own image processor (preprocessor_config.json) to the golden pixel_values, and the
// predicted label is the manifest's predicted_label.
#include <cmath>
#include <filesystem>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

// For every golden image: PNG -> image_input equals pixel_values.npy up to float32 rounding of
// the rescale and normalize, logits equal logits.npy within their float32 bound, and argmax(logits)
// names the manifest's predicted_label.
TEST(ZooVit, PngToPredictedLabel) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path vit = shared / "zoo/vit";
    const Model m = load_model(vit);
    ASSERT_EQ(m.tokenizer(), nullptr);
    ASSERT_NE(m.image_processor(), nullptr);
    EXPECT_EQ(m.n_params(), 114698);  // manifest num_parameters_stored
    const auto manifest = nlohmann::json::parse(read_file(vit / "golden/manifest.json"));
    testutil::ScratchDir tmp;
    int checked = 0;
    for (const auto& in : manifest.at("inputs")) {
        const std::string name = in.at("name");
        SCOPED_TRACE(name);
        io::Image img = io::read_npy_images(vit / "golden" / name / "image.npy").at(0);
        for (float& v : img.data) v = std::round(v * 255.0f);
        img.range = io::Image::Range::Levels;
        io::write_png(tmp / "x.png", img);
        const ModelInput input = image_input(m, io::read_png(tmp / "x.png"));
        testutil::expect_close("pixel_values", input.pixel_values[0],
                               testutil::zoo_tensor(vit / "golden" / name / "pixel_values.npy"),
                               testutil::kF32FewOpsUnitAbs);  // rescale + normalize in f32
        const ForwardResult r = m.forward(input);
        testutil::expect_close("logits", r.logits,
                               testutil::zoo_tensor(vit / "golden" / name / "logits.npy"),
                               testutil::zoo_tolerances(m.config(), vit / "golden" / name).logits);
        const int64_t label = r.logits[0].argmax().item<int64_t>();
        EXPECT_EQ(m.config().labels.at(size_t(label)), in.at("predicted_label").get<std::string>());
        ++checked;
    }
    EXPECT_EQ(checked, 3);
}
