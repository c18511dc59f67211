// `analyze --layers` (analysis/layers.hpp): the spec's syntax, the selection it makes in a model
// and its canonical text; bad specs refused naming the option.
#include <gtest/gtest.h>

#include "sinkscope/analysis/layers.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"

using namespace sinkscope;
using analysis::check_layer_spec;
using analysis::select_layers;

TEST(LayerSelection, EveryLayerByDefault) {
    for (const char* spec : {"", "all"}) {
        const auto s = select_layers(spec, 4);
        EXPECT_EQ(s.ids, (std::vector<int64_t>{0, 1, 2, 3})) << spec;
        EXPECT_TRUE(s.all());
        EXPECT_TRUE(analysis::consecutive(s.ids));
        EXPECT_EQ(s.spec(), "all");
    }
}

TEST(LayerSelection, IndicesAndRangesSortedWithoutRepeats) {
    const auto s = select_layers("9,2-4,3,0", 12);
    EXPECT_EQ(s.ids, (std::vector<int64_t>{0, 2, 3, 4, 9}));
    EXPECT_EQ(s.model_layers, 12);
    EXPECT_FALSE(s.all());
    EXPECT_FALSE(analysis::consecutive(s.ids));
    EXPECT_EQ(s.spec(), "0,2-4,9");
    // The analyses' layer l is model layer ids[l] in every output (AnalysisContext::layer_id).
    analysis::AnalysisContext ctx;
    ctx.layer_ids = s.ids;
    EXPECT_EQ(ctx.layer_id(1), 2);
    EXPECT_EQ(ctx.layer_id(4), 9);
    EXPECT_EQ(ctx.layer_id(-1), -1);  // the model-wide rows
    EXPECT_TRUE(analysis::consecutive(select_layers("5-7", 12).ids));
    EXPECT_EQ(select_layers("0-11", 12).spec(), "all");  // every layer named one by one
}

TEST(LayerSelection, BadSpecsNameTheOption) {
    for (const char* spec : {"a", "1,", ",1", "-1", "3-1", "1-", "1--2", "1.5", "0x3", " 1"}) {
        EXPECT_THROW(check_layer_spec(spec), UsageError) << spec;
        try {
            check_layer_spec(spec);
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("--layers"), std::string::npos) << e.what();
        }
    }
    check_layer_spec("0,5,10-12");  // syntax alone: no model yet
    // Layers past the model's are refused once its layer count is known.
    EXPECT_THROW(select_layers("2,4", 4), UsageError);
    EXPECT_THROW(select_layers("0-99999999999999", 4), UsageError);
    try {
        select_layers("4", 4);
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("the model has 4 layers (0-3)"), std::string::npos)
            << e.what();
    }
}
