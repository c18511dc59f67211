// report.html: one self-contained, offline HTML file with interactive Vega-Lite figures built
// from the tables of a run directory, plus the run's conventions from run.json.
#pragma once

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sinkscope::report {

struct Figure {
    std::string section;  // heading the figure is grouped under
    std::string title;
    std::string caption;  // one or two sentences: what is plotted and under which convention
    nlohmann::json spec;  // Vega-Lite spec with inline data
};

struct ReportContent {
    std::string title;
    nlohmann::json run;  // run.json (may be empty)
    std::vector<Figure> figures;
    std::vector<std::string> notes;  // warnings and verdicts shown above the figures
};

// Reads run.json and every known table in `run_dir` (missing tables are skipped): each figure
// section in turn (figure_sections()).
ReportContent collect_report(const std::filesystem::path& run_dir);

// A section of the report: adds its figures (and notes) to the content when the run holds its
// tables, and does nothing otherwise. An analysis' figure is such a hook.
using FigureSection =
    std::function<void(const std::filesystem::path& run_dir, ReportContent& content)>;
// The sections collect_report iterates: the built-in ones, then those registered.
const std::vector<FigureSection>& figure_sections();
// Adds a section after the others: the figure of an analysis defined outside src/ (e.g. a
// test's). Call it from a static initialiser (RegisterFigureSection), before any report is made.
void register_figure_section(FigureSection section);
struct RegisterFigureSection {
    explicit RegisterFigureSection(FigureSection section) {
        register_figure_section(std::move(section));
    }
};

// A CSV table of a run as an array of row objects (numbers stay numbers; non-finite values
// become null), the inline data of a figure's spec.
nlohmann::json table_rows(const std::filesystem::path& csv);

// The whole HTML document, with the Vega runtime inlined.
std::string render_html(const ReportContent& content);

// collect_report + render_html, written atomically to <run_dir>/report.html; returns the path.
// `run_dir` must be a sinkscope run (core/output_dir.hpp is_sinkscope_run); an existing
// report.html is replaced only with `overwrite` and only when sinkscope wrote it.
std::filesystem::path write_report(const std::filesystem::path& run_dir, bool overwrite);
// For the commands that write a run and then its report: the same, except that a run whose
// tables have no figure (e.g. `--analyses statistics` alone) gets no report.html and an empty
// path back, instead of an error; the caller says so.
std::filesystem::path write_report_if_any(const std::filesystem::path& run_dir);
// What those commands print when write_report_if_any wrote nothing.
inline constexpr const char* kNoFigureNote =
    "report.html not written: the selected analyses have no figure (their tables are in the "
    "output folder)\n";

// True when `file` is a report.html written by sinkscope (its generator meta tag).
bool is_sinkscope_report(const std::filesystem::path& file);

// True when this build carries the Vega runtime (scripts/install-deps.sh installs it).
bool have_vega_runtime();

// Vega-Lite spec helpers (inline data rows as JSON objects). Titles say what an axis or legend
// shows and its unit; an empty title falls back to the field name with spaces.
struct Titles {
    std::string x, y, color;
};
struct HeatmapOptions {
    double lo = std::nan(""), hi = std::nan("");  // fixed colour domain; NaN: fitted to the data
    std::string scheme = "viridis";
    int max_labelled_cells = 100;  // values are printed in the cells up to this many cells
};
// Layer (or any ordinal) by head grid of one quantity, square cells.
nlohmann::json heatmap_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                            const std::string& color, const Titles& titles,
                            const HeatmapOptions& options = {});
// y against x, one line per `series`, error bars where rows carry ci_lo / ci_hi.
nlohmann::json line_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                         const std::string& series, const Titles& titles, bool log_x = false);
// One point per row, coloured by `who` (a legend and the tooltip name each point; nothing joins
// points of different models).
nlohmann::json point_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                          const std::string& who, const Titles& titles, bool log_x = false);
// One horizontal bar per category (in row order): long category names stay readable.
nlohmann::json hbar_spec(const nlohmann::json& rows, const std::string& category,
                         const std::string& value, const Titles& titles);
// One small line chart per value of `panel` (independent scales), only for panels with a finite
// value; `panels` gives a panel's y title and fixed y domain (else the domain includes 0).
struct PanelAxis {
    std::string title;
    double lo = std::nan(""), hi = std::nan("");
};
nlohmann::json panel_line_spec(const nlohmann::json& rows, const std::string& x,
                               const std::string& y, const std::string& series,
                               const std::string& panel, const Titles& titles, bool log_x = false,
                               const std::map<std::string, PanelAxis>& panels = {});
// Stacked bars of `y` per `x`, stacked by `stack`; `totals` (rows of `x` with ci_lo, ci_hi), when
// given, draws each stack's interval on it.
nlohmann::json stacked_bar_spec(const nlohmann::json& rows, const std::string& x,
                                const std::string& y, const std::string& stack,
                                const Titles& titles,
                                const nlohmann::json& totals = nlohmann::json::array());
// Point maps (MDS) per `panel`: equal aspect, each point labelled with its `label` field.
nlohmann::json map_spec(const nlohmann::json& rows, const std::string& x, const std::string& y,
                        const std::string& color, const std::string& panel,
                        const std::string& label, const Titles& titles);

}  // namespace sinkscope::report
