// report.html: one self-contained, offline HTML file with interactive Vega-Lite figures built
// from the tables of a run directory, plus the run's conventions from run.json.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sinkscope::report {

struct Figure {
    std::string section;   // heading the figure is grouped under
    std::string title;
    std::string caption;   // one or two sentences: what is plotted and under which convention
    nlohmann::json spec;   // Vega-Lite spec with inline data
};

struct ReportContent {
    std::string title;
    nlohmann::json run;                  // run.json (may be empty)
    std::vector<Figure> figures;
    std::vector<std::string> notes;      // warnings and verdicts shown above the figures
};

// Reads run.json and every known table in `run_dir` (missing tables are skipped).
ReportContent collect_report(const std::filesystem::path& run_dir);

// The whole HTML document, with the Vega runtime inlined.
std::string render_html(const ReportContent& content);

// collect_report + render_html, written atomically to <run_dir>/report.html; returns the path.
// `run_dir` must be a sinkscope run (core/output_dir.hpp is_sinkscope_run); an existing
// report.html is replaced only with `overwrite` and only when sinkscope wrote it.
std::filesystem::path write_report(const std::filesystem::path& run_dir, bool overwrite);

// True when `file` is a report.html written by sinkscope (its generator meta tag).
bool is_sinkscope_report(const std::filesystem::path& file);

// True when this build carries the Vega runtime (scripts/install-deps.sh installs it).
bool have_vega_runtime();

// Vega-Lite spec helpers (inline data rows as JSON objects).
nlohmann::json heatmap_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                            const std::string& color, const std::string& color_title);
nlohmann::json line_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                         const std::string& series, bool log_x = false);
nlohmann::json bar_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                        const std::string& color = "");
// One small line chart per value of `facet` (independent y scales).
nlohmann::json facet_line_spec(const nlohmann::json& rows, const std::string& x,
                               const std::string& y, const std::string& series,
                               const std::string& facet, bool log_x = false);
// Stacked bars of `y` per `x`, stacked by `stack`.
nlohmann::json stacked_bar_spec(const nlohmann::json& rows, const std::string& x,
                                const std::string& y, const std::string& stack);
nlohmann::json scatter_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                            const std::string& color, const std::string& facet = "");

}  // namespace sinkscope::report
