// The registry contract, checked for every registered analysis that reads attention alone: a run
// interrupted after any input and continued from saved state gives byte-identical tables, two
// shards merged give the tables of one pass (to the rounding of regrouped sums), and
// AnalysisOptions is validated and resolved in one place with the spec's values as defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "synthetic_attention.hpp"
#include "tolerance.hpp"

using namespace sinkscope;
using namespace sinkscope::analysis;
using metrics::Masking;

namespace {

constexpr int64_t kL = 2, kH = 3, kT = 12;

metrics::AttentionInput input(uint64_t seed) {
    return testutil::random_input(seed, kL, kH, kT, Masking::Causal, true);
}

// Queries and keys of input `seed` ([L] x [H, T, d_head = 4], entries in [-1, 1) from a fixed
// linear congruential sequence) for the analyses that read them (sink geometry).
ModelVectors queries_keys(uint64_t seed) {
    ModelVectors v;
    v.d_head = 4;
    uint64_t x = seed * 2654435761u + 1;
    auto next = [&x] {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return double(x >> 11) / double(uint64_t{1} << 53) * 2 - 1;
    };
    for (auto* side : {&v.queries, &v.keys})
        for (int64_t l = 0; l < kL; ++l) {
            side->emplace_back(size_t(kH * kT * v.d_head));
            for (double& e : side->back()) e = next();
        }
    return v;
}

// Feeds inputs [begin, end) to `a` (with the pipeline's sink resolution and per-input values;
// an analysis that reads per-input values also gets those of compositional, graphs and kl).
void feed(Analysis& a, const AnalysisContext& ctx, uint64_t begin, uint64_t end,
          int64_t first_index, bool reads_values = false) {
    const ResolvedOptions& o = *ctx.options;
    for (uint64_t s = begin; s < end; ++s) {
        const auto in = input(s);
        const auto sinks = metrics::resolve_sinks(in, o.head.sink);
        const ModelVectors qk = queries_keys(s);
        InputView v;
        v.index = first_index + int64_t(s - begin);
        v.attention = &in;
        v.sinks = &sinks;
        v.vectors = &qk;
        PerInputValues values;
        a.add(v, &values);
        if (reads_values)
            for (const char* name : {"compositional", "graphs", "kl"})
                find_analysis(name).make(ctx)->add(v, &values);
        a.add_per_input(v.index, values);
    }
}

// Finishes `a`, giving it the compositional results it may read (heads).
AnalysisOutput finish(Analysis& a, const AnalysisContext& ctx) {
    FinishContext fc;
    auto comp = find_analysis("compositional").make(ctx);
    feed(*comp, ctx, 0, 4, 0);
    const AnalysisOutput c = comp->finish(fc);
    fc.finished["compositional"] = &c;
    return a.finish(fc);
}

// Everything an analysis writes: its tables, arrays (diagrams) and texts (frame.json).
std::string tables_text(const AnalysisOutput& o) {
    std::string s;
    for (const auto& t : o.tables) s += t.name + "\n" + t.table.to_csv();
    for (const auto& [path, array] : o.arrays) s += path + "\n" + io::serialize_npy(array);
    for (const auto& [path, text] : o.texts) s += path + "\n" + text;
    return s;
}

}  // namespace

// One registered analysis (the parameter) with default options and the bootstrap on.
class EveryAnalysis : public ::testing::TestWithParam<std::string> {
protected:
    EveryAnalysis() {
        AnalysisOptions opts;
        opts.bootstrap = 200;
        o = resolve(opts, {});
    }
    ResolvedOptions o;
    AnalysisContext ctx{kL, kH, &o, "synthetic", "synthetic", ""};
    const AnalysisInfo& info = find_analysis(GetParam());
    const bool rv = info.needs.per_input_values;
};

// Every headline of the analysis' row (the statistics analysis' bootstrap and groups read them)
// names a per-input value the analysis reports, at the level the headline says (per head, or a
// layer's head average). Value space needs hidden states, which the synthetic inputs lack (they
// have queries and keys).
TEST_P(EveryAnalysis, HeadlinesNameValuesItReports) {
    if (info.needs.hidden_states) GTEST_SKIP() << "needs hidden states";
    auto a = info.make(ctx);
    const auto in = input(0);
    const auto sinks = metrics::resolve_sinks(in, o.head.sink);
    const ModelVectors qk = queries_keys(0);
    InputView v;
    v.attention = &in;
    v.sinks = &sinks;
    v.vectors = &qk;
    PerInputValues values;
    a->add(v, &values);
    for (const Headline& h : info.headlines) {
        const bool reported = std::any_of(values.begin(), values.end(), [&](const auto& x) {
            return x.table == h.table && x.metric == h.metric &&
                   (h.per_head ? x.head >= 0 : x.head == -1 && x.layer >= 0);
        });
        EXPECT_TRUE(reported) << GetParam() << ": headline " << h.table << " " << h.metric;
    }
}

TEST_P(EveryAnalysis, ResumedFromSavedStateIsIdentical) {
    auto whole = info.make(ctx);
    feed(*whole, ctx, 0, 4, 0, rv);
    for (uint64_t cut : {1u, 3u}) {
        auto first = info.make(ctx);
        feed(*first, ctx, 0, cut, 0, rv);
        BinaryWriter w;
        first->save(w);
        auto resumed = info.make(ctx);
        BinaryReader r(w.bytes(), "state");
        resumed->load(r);
        feed(*resumed, ctx, cut, 4, int64_t(cut), rv);
        EXPECT_EQ(tables_text(finish(*resumed, ctx)), tables_text(finish(*whole, ctx)))
            << GetParam() << " cut after " << cut;
        whole = info.make(ctx);
        feed(*whole, ctx, 0, 4, 0, rv);
    }
}

// The same under compat ruscio2025 (its own layer subsets, topology and tie-breaks).
TEST_P(EveryAnalysis, ResumedFromSavedStateIsIdenticalInCompat) {
    AnalysisOptions opts;
    opts.compat = "ruscio2025";
    const ResolvedOptions compat = resolve(opts, {});
    const AnalysisContext c{kL, kH, &compat, "synthetic", "synthetic", ""};
    auto whole = info.make(c);
    feed(*whole, c, 0, 4, 0, rv);
    auto first = info.make(c);
    feed(*first, c, 0, 2, 0, rv);
    BinaryWriter w;
    first->save(w);
    auto resumed = info.make(c);
    BinaryReader r(w.bytes(), "state");
    resumed->load(r);
    EXPECT_TRUE(r.at_end()) << GetParam();
    feed(*resumed, c, 2, 4, 2, rv);
    EXPECT_EQ(tables_text(finish(*resumed, c)), tables_text(finish(*whole, c))) << GetParam();
}

TEST_P(EveryAnalysis, MergedShardsEqualOnePass) {
    auto whole = info.make(ctx), a = info.make(ctx), b = info.make(ctx);
    feed(*whole, ctx, 0, 4, 0, rv);
    feed(*a, ctx, 0, 2, 0, rv);
    feed(*b, ctx, 2, 4, 0, rv);
    a->merge(*b);
    const AnalysisOutput x = finish(*whole, ctx), y = finish(*a, ctx);
    ASSERT_EQ(x.tables.size(), y.tables.size()) << GetParam();
    for (size_t k = 0; k < x.tables.size(); ++k) {
        const auto& tx = x.tables[k].table;
        const auto& ty = y.tables[k].table;
        ASSERT_EQ(tx.columns(), ty.columns());
        ASSERT_EQ(tx.size(), ty.size()) << x.tables[k].name;
        for (size_t r = 0; r < tx.size(); ++r)
            for (size_t c = 0; c < tx.columns().size(); ++c) {
                const auto& u = tx.rows()[r][c];
                const auto& v = ty.rows()[r][c];
                if (std::holds_alternative<double>(u) && std::holds_alternative<double>(v)) {
                    const double p = std::get<double>(u), q = std::get<double>(v);
                    if (std::isnan(p)) {
                        EXPECT_TRUE(std::isnan(q));
                    } else if (std::isinf(p)) {  // regions.csv: a test of constant values
                        EXPECT_EQ(p, q) << x.tables[k].name << " row " << r;
                    } else {
                        // Sums over 4 inputs regrouped as (2 + 2): a few roundings of the
                        // result, amplified where it is a difference (std, distances).
                        EXPECT_NEAR(p, q, testutil::kF64SumRel * std::max(1.0, std::abs(p)))
                            << x.tables[k].name << " row " << r << " " << tx.columns()[c];
                    }
                } else {
                    EXPECT_EQ(u, v) << x.tables[k].name << " row " << r << " " << tx.columns()[c];
                }
            }
    }
}

std::vector<std::string> attention_analyses() {
    std::vector<std::string> names;
    for (const auto& info : registry())
        if (!info.needs.hidden_states) names.emplace_back(info.name);
    return names;
}
INSTANTIATE_TEST_SUITE_P(Registry, EveryAnalysis, ::testing::ValuesIn(attention_analyses()),
                         [](const auto& info) { return info.param; });

// Defaults are the spec's values (METRICS.md section 8 / PAPERS.md B.4, B.5), written here.
TEST(AnalysisOptions, DefaultsAreTheSpecValues) {
    const AnalysisOptions o;
    EXPECT_EQ(o.constants.graph_thresholds,
              (std::vector<double>{0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2}));
    EXPECT_EQ(o.constants.sink_percentiles, (std::vector<double>{0.8, 0.9, 0.95}));
    EXPECT_EQ(o.constants.effective_density_lo, 0.05);
    EXPECT_EQ(o.constants.effective_density_hi, 0.95);
    EXPECT_EQ(o.min_parts, 3);
    const ResolvedOptions r = resolve(o, {});
    EXPECT_EQ(r.ref_frame.constants.graph_thresholds, o.constants.graph_thresholds);
    EXPECT_EQ(r.ref_frame.constants.sink_percentiles, o.constants.sink_percentiles);
    EXPECT_GE(r.threads, 1);
    EXPECT_EQ(r.head.n_threads, r.threads);
    EXPECT_EQ(r.ref_frame.threads, r.threads);
}

// Selection: "all" without hidden states leaves out value; prerequisites are added in registry
// order; unknown names and value without hidden states are refused naming the flag.
TEST(AnalysisOptions, SelectionAndErrors) {
    AnalysisOptions o;
    auto names = resolve(o, {}).analyses;
    EXPECT_EQ(std::count(names.begin(), names.end(), "value"), 0);
    names = resolve(o, {.hidden_states = true}).analyses;
    EXPECT_EQ(std::count(names.begin(), names.end(), "value"), 1);
    o.analyses = {"heads"};
    EXPECT_EQ(resolve(o, {}).analyses, (std::vector<std::string>{"compositional", "heads"}));
    auto message = [](AnalysisOptions bad) {
        try {
            resolve(bad, {});
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    o.analyses = {"bogus"};
    EXPECT_NE(message(o).find("--analyses"), std::string::npos);
    o.analyses = {"value"};
    EXPECT_NE(message(o).find("hidden states"), std::string::npos);
    AnalysisOptions b;
    b.min_parts = 1;
    EXPECT_NE(message(b).find("--min-parts"), std::string::npos);
    b = {};
    b.threads = -1;
    EXPECT_NE(message(b).find("--threads"), std::string::npos);
    b = {};
    b.constants.graph_thresholds = {};
    EXPECT_NE(message(b).find("--graph-thresholds"), std::string::npos);
    b = {};
    b.sink = "sideways";
    EXPECT_NE(message(b).find("--sink"), std::string::npos);
    // --scope layer with no analysis whose row says it compares by scope (layer_scope).
    b = {};
    b.scope = "layer";
    b.analyses = {"graphs"};
    const std::string scope = message(b);
    EXPECT_NE(scope.find("--scope layer changes only the analyses compositional, heads"),
              std::string::npos)
        << scope;
    b.analyses = {"graphs", "heads"};
    EXPECT_EQ(message(b), "no error");
}

// Needs::token_strings: a pipeline asks for the inputs' token texts only when a selected
// analysis reads them (the token specialisation of "tokens").
TEST(AnalysisOptions, TokenTextsAreWantedOnlyByTheAnalysesThatReadThem) {
    for (const auto& [names, want] :
         std::vector<std::pair<std::vector<std::string>, bool>>{{{"tokens"}, true},
                                                                {{"graphs", "kl"}, false},
                                                                {{"all"}, true},
                                                                {{"compositional"}, false}}) {
        AnalysisOptions o;
        o.analyses = names;
        const AnalysisPipeline p(2, 2, resolve(o, {}), "m", "test");
        EXPECT_EQ(p.wants_token_strings(), want) << names.front();
    }
}

// A non-default constant reaches the tables: one graph threshold, one sink percentile.
TEST(AnalysisOptions, ConstantsReachTheTables) {
    AnalysisOptions opts;
    opts.constants.graph_thresholds = {0.03};
    opts.constants.sink_percentiles = {0.5};
    const ResolvedOptions o = resolve(opts, {});
    AnalysisContext ctx{kL, kH, &o, "synthetic", "synthetic", ""};
    for (const char* name : {"graphs", "kl"}) {
        auto a = find_analysis(name).make(ctx);
        feed(*a, ctx, 0, 2, 0);
        const AnalysisOutput out = finish(*a, ctx);
        // Its table and regions.csv (whose params are those of the table's rows).
        ASSERT_EQ(out.tables.size(), 2u) << name;
        EXPECT_EQ(out.tables[1].name, "regions");
        const auto& t = out.tables[0].table;
        const auto param = size_t(std::find(t.columns().begin(), t.columns().end(), "param") -
                                  t.columns().begin());
        for (const auto& row : t.rows()) {
            const std::string p = std::get<std::string>(row[param]);
            if (std::string(name) == "graphs") {
                EXPECT_EQ(p, "0.03");
            } else if (p != "0" && p != "first") {
                EXPECT_EQ(p, "0.5");  // direct sink mass: key
            }
        }
    }
}

// The reference-frame analyses of one pipeline (a shared context) read each input once, together,
// and report progress under one name; every table, array, text and per-input value is what
// each analysis gives alone.
TEST(RefFrameTogether, EqualsEachAnalysisAlone) {
    AnalysisOptions opts;
    opts.per_head = true;  // per-head graphs, topology and spectra too
    const ResolvedOptions o = resolve(opts, {});
    AnalysisContext alone{kL, kH, &o, "synthetic", "synthetic", ""};
    AnalysisContext together = alone;
    together.shared = std::make_shared<SharedState>();
    std::vector<std::unique_ptr<Analysis>> one, each;
    std::set<std::string> stages;
    for (const std::string& name : metrics::ref_frame_members()) {
        one.push_back(find_analysis(name).make(together));
        one.back()->set_progress([&stages](const char* s, int64_t, int64_t) { stages.insert(s); });
        each.push_back(find_analysis(name).make(alone));
    }
    for (uint64_t s = 0; s < 3; ++s) {
        const auto in = input(s);
        const auto sinks = metrics::resolve_sinks(in, o.head.sink);
        InputView v;
        v.index = int64_t(s);
        v.attention = &in;
        v.sinks = &sinks;
        PerInputValues a, b;
        for (auto& x : one) x->add(v, &a);
        for (auto& x : each) x->add(v, &b);
        ASSERT_EQ(a.size(), b.size()) << "input " << s;
        for (size_t k = 0; k < a.size(); ++k) {
            EXPECT_EQ(a[k].table + a[k].metric + a[k].param, b[k].table + b[k].metric + b[k].param);
            EXPECT_EQ(a[k].layer * 100 + a[k].head, b[k].layer * 100 + b[k].head);
            EXPECT_TRUE(a[k].value == b[k].value ||
                        (std::isnan(a[k].value) && std::isnan(b[k].value)))
                << a[k].table << " " << a[k].metric << ": " << a[k].value << " vs " << b[k].value;
        }
    }
    EXPECT_EQ(stages, std::set<std::string>{"reference-frame analyses"});
    // Split right: together the analyses give what one accumulator of all of them gives.
    metrics::RefFrameAccumulator all(o.ref_frame);
    for (uint64_t s = 0; s < 3; ++s) {
        const auto in = input(s);
        const auto sinks = metrics::resolve_sinks(in, o.head.sink);
        all.add(in, nullptr, "synthetic", &sinks);
    }
    const AnalysisOutput whole = ref_frame_output(all.finish());
    std::map<std::string, std::string> split, joint;
    for (const auto& t : whole.tables) joint[t.name] = t.table.to_csv();
    for (const auto& [path, text] : whole.texts) joint[path] = text;
    for (const auto& [path, array] : whole.arrays)
        joint[path] = std::string(array.data.begin(), array.data.end());
    for (size_t k = 0; k < one.size(); ++k) {
        const AnalysisOutput x = finish(*one[k], together);
        for (const auto& t : x.tables) split[t.name] = t.table.to_csv();
        for (const auto& [path, text] : x.texts) split[path] = text;
        for (const auto& [path, array] : x.arrays)
            split[path] = std::string(array.data.begin(), array.data.end());
    }
    EXPECT_EQ(split, joint);
    EXPECT_TRUE(joint.count("betti") && joint.count("token_keys") && joint.count("frame.json"));
    // Each analysis alone writes regions.csv of its own tables; together the last one writes it
    // for all of them (compared with the joint accumulator's above): the rest is the same.
    EXPECT_TRUE(joint.count("regions"));
    auto without_regions = [](AnalysisOutput o) {
        std::erase_if(o.tables, [](const auto& t) { return t.name == "regions"; });
        return o;
    };
    for (size_t k = 0; k < one.size(); ++k) {
        const AnalysisOutput x = without_regions(finish(*one[k], together)),
                             y = without_regions(finish(*each[k], alone));
        EXPECT_EQ(tables_text(x), tables_text(y)) << k;
        EXPECT_FALSE(x.tables.empty() && x.texts.empty()) << k;
        ASSERT_EQ(x.arrays.size(), y.arrays.size()) << k;
        for (size_t j = 0; j < x.arrays.size(); ++j) {
            EXPECT_EQ(x.arrays[j].first, y.arrays[j].first);
            EXPECT_EQ(x.arrays[j].second.data, y.arrays[j].second.data);
        }
        EXPECT_EQ(x.texts, y.texts) << k;
    }
}

namespace {

// A value of the same type as `v` that differs from it.
OptionValue another_value(const OptionValue& v) {
    return std::visit(
        [](const auto& x) -> OptionValue {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, bool>)
                return !x;
            else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>)
                return T(x + 1);
            else if constexpr (std::is_same_v<T, double>)
                return x + 0.25;
            else if constexpr (std::is_same_v<T, std::string>)
                return x + "x";
            else if constexpr (std::is_same_v<T, std::vector<double>>)
                return std::vector<double>{0.25};
            else if constexpr (std::is_same_v<T, std::vector<std::string>>)
                return std::vector<std::string>{"graphs"};
            else if constexpr (std::is_same_v<T, std::optional<uint64_t>>)
                return std::optional<uint64_t>(7);
            else
                return std::pair<double, double>(x.first + 0.01, x.second - 0.01);
        },
        static_cast<const OptionValue::variant&>(v));
}

}  // namespace

// Every option is one spec: keys are unique, each spec writes and reads back its own value, and
// run.json (to_json) records exactly the specs' keys and follows every one of them (an option
// left out of the record, or recorded from another field, fails here).
TEST(OptionSpecs, EveryOptionIsRecordedAndReadBack) {
    const std::vector<OptionSpec> specs = option_specs();
    const AnalysisOptions defaults;
    const nlohmann::json base = to_json(defaults);
    std::set<std::string> keys;
    for (const OptionSpec& s : specs) {
        EXPECT_TRUE(keys.insert(s.key).second) << s.key << " is declared twice";
        ASSERT_NE(find_option(s.key), nullptr) << s.key;
        EXPECT_EQ(find_option(s.key)->key, s.key);
        AnalysisOptions o;
        const OptionValue changed = another_value(s.get(defaults));
        s.set(o, changed);
        EXPECT_TRUE(s.get(o) == changed) << s.key;
        const nlohmann::json j = to_json(o);
        EXPECT_NE(j.at(s.key), base.at(s.key)) << s.key << " is not recorded from its value";
        for (const OptionSpec& other : specs)  // and no other option moved
            if (other.key != s.key)
                EXPECT_EQ(j.at(other.key), base.at(other.key)) << s.key << " moved " << other.key;
        EXPECT_EQ(s.cli_flag().substr(0, 2), "--");
    }
    std::set<std::string> recorded;
    for (auto it = base.begin(); it != base.end(); ++it) recorded.insert(it.key());
    EXPECT_EQ(recorded, keys);
}

// A row registered with a name or an option key already taken is refused, and the registry is
// left as it was.
TEST(RegisterAnalysis, RefusesATakenNameOrOptionKey) {
    const size_t rows = registry().size();
    auto message = [](AnalysisInfo info) {
        try {
            register_analysis(std::move(info));
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message({.name = "compositional", .description = "again"}).find("twice"),
              std::string::npos);
    const std::string taken =
        message({.name = "toy2",
                 .description = "a row with an option of sink_eps",
                 .options = {extra_option<double>("sink_eps", 0.5, "taken")}});
    EXPECT_NE(taken.find("option 'sink_eps' of analysis 'toy2' is already an option of "
                         "'sink_eps'"),
              std::string::npos)
        << taken;
    const std::string shared = message({.name = "toy3",
                                        .description = "a row with a shared option's key",
                                        .options = {extra_option<int64_t>("min_parts", 3, "x")}});
    EXPECT_NE(shared.find("of every analysis"), std::string::npos) << shared;
    EXPECT_EQ(registry().size(), rows);
}
