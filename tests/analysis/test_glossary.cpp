// docs/metrics.md defines every column of every table sinkscope writes: each column of the
// schemas in analysis/tables.hpp, and each name written there as a string (table names, section 8
// columns, per-input columns, metric names), appears in the glossary as `name`. A column added to
// tables.hpp without a definition fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "sinkscope/analysis/tables.hpp"

namespace fs = std::filesystem;
namespace t = sinkscope::analysis::tables;

namespace {

// The repository root, from this file's path (CMake compiles it by absolute path).
fs::path repo_root() {
    return fs::path(__FILE__).parent_path().parent_path().parent_path();
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

bool defined(const std::string& glossary, const std::string& name) {
    return glossary.find("`" + name + "`") != std::string::npos;
}

}  // namespace

TEST(Glossary, EverySchemaColumnIsDefined) {
    const std::string glossary = slurp(repo_root() / "docs/metrics.md");
    ASSERT_FALSE(glossary.empty()) << repo_root() / "docs/metrics.md";
    for (const t::TableSchema* s :
         {&t::kHeads,        &t::kValueSpace,     &t::kDistances,  &t::kDispersion,
          &t::kSinks,        &t::kSinkByPosition, &t::kTokenKeys,  &t::kBootstrap,
          &t::kCorrelations, &t::kPairedTests,    &t::kFisher,     &t::kFisherTensors,
          &t::kPrune,        &t::kPruneRandom,    &t::kPruneOrder, &t::kTrajectory,
          &t::kEntropySplit, &t::kFrameTypes,     &t::kGroups,     &t::kGroupTests,
          &t::kRegions,      &t::kPatch})
        for (const std::string& c : s->columns)
            EXPECT_TRUE(defined(glossary, c)) << s->name << ".csv column " << c;
    for (const auto* list : {&t::kRefFrameColumns, &t::kPerInputColumns})
        for (const std::string& c : *list) EXPECT_TRUE(defined(glossary, c)) << c;
}

// Every identifier tables.hpp spells as a string literal (so also schemas added later, and the
// metric names), except file-name fragments.
TEST(Glossary, EveryNameInTablesHppIsDefined) {
    const std::string glossary = slurp(repo_root() / "docs/metrics.md");
    const std::string header = slurp(repo_root() / "include/sinkscope/analysis/tables.hpp");
    ASSERT_FALSE(header.empty());
    const std::set<std::string> fragments = {"_per_input", ".csv", "fisher_", "frame.json",
                                             "_q",         "_k",   "_v",      "_o"};
    const std::regex literal("\"([A-Za-z0-9_.]+)\"");
    size_t n = 0;
    for (auto it = std::sregex_iterator(header.begin(), header.end(), literal);
         it != std::sregex_iterator(); ++it, ++n) {
        const std::string name = (*it)[1];
        if (fragments.count(name)) continue;
        // Table names appear as file names (`heads.csv`), columns and metrics as `name`.
        EXPECT_TRUE(defined(glossary, name) || glossary.find(name + ".csv") != std::string::npos)
            << name;
    }
    EXPECT_GT(n, 100u);  // the header was read and parsed
}
