// Figures of a `sinkscope compare` directory: sink quantities against parameter count, rho and
// the flip rates per model, the regime predictor's thresholds and confusion counts (spec 7).
// Reads the tables compare writes (compare.csv, regime.csv, regime_confusion.csv) and run.json.
#include <cmath>
#include <map>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string text(const io::Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto d = std::get_if<double>(&c)) return io::format_number(*d);
    return std::to_string(std::get<int64_t>(c));
}
// Numbers stay numbers; non-finite values and text become null (Vega-Lite leaves them out).
json number(const io::Cell& c) {
    if (auto d = std::get_if<double>(&c)) return std::isfinite(*d) ? json(*d) : json(nullptr);
    if (auto i = std::get_if<int64_t>(&c)) return json(*i);
    return json(nullptr);
}
size_t col(const io::Table& t, const fs::path& file, const std::string& name) {
    for (size_t i = 0; i < t.columns().size(); ++i)
        if (t.columns()[i] == name) return i;
    throw InputError(file.string(), "has no column '" + name + "'");
}

// "model" or "model @ checkpoint": one label per compared run.
std::string label(const std::string& model, const std::string& checkpoint) {
    return checkpoint.empty() ? model : model + " @ " + checkpoint;
}

}  // namespace

// Called by collect_report (figures.cpp) for every run directory; does nothing unless `dir` is
// a compare directory.
void compare_section(const fs::path& dir, ReportContent& c) {
    if (!c.run.is_object() || c.run.value("subcommand", "") != "compare") return;
    const std::string sec = "Comparison across runs";
    const json& reg = c.run.contains("regime") ? c.run["regime"] : json();
    if (reg.is_object() && reg.contains("lo") && reg.contains("hi"))
        c.notes.push_back(
            "Regime predictor: classical-unsafe when " + reg.value("statistic", "rho") +
            " >= " + reg["hi"].dump() + ", classical-safe when " + reg.value("statistic", "rho") +
            " <= " + reg["lo"].dump() + ", else abstain; scored against " +
            (reg.value("outcome", "pruning") == "flip_rate"
                 ? std::string("the flip rate (unsafe when >= 0.15)")
                 : "the pruning regime (unsafe when the classical channel is "
                   "beyond the random spread while dA_perp is within)") +
            ". Thresholds: " +
            (reg.value("fitted", false) ? "fitted on the --fit runs (" + reg.value("rule", "") + ")"
                                        : std::string("the defaults")) +
            ".");
    if (c.run.contains("mixed") && c.run["mixed"].is_array())
        for (const auto& d : c.run["mixed"])
            if (d.is_string())
                c.notes.push_back("Mixed runs (--allow-mixed): " + d.get<std::string>());

    if (fs::exists(dir / "compare.csv")) {
        const fs::path file = dir / "compare.csv";
        const io::Table t = io::Table::read_csv(file);
        const size_t m = col(t, file, "model"), k = col(t, file, "checkpoint"),
                     n = col(t, file, "n_params"), me = col(t, file, "metric"),
                     pa = col(t, file, "param"), v = col(t, file, "value");
        json mass = json::array(), eps = json::array(), rho = json::array(), flips = json::array();
        for (const auto& r : t.rows()) {
            const std::string metric = text(r[me]), who = label(text(r[m]), text(r[k]));
            const json np = number(r[n]);
            const bool has_n = np.is_number() && np.get<double>() > 0;
            if (metric == "sink_mass" && has_n)
                mass.push_back({{"parameters", np}, {"sink mass", number(r[v])}, {"model", who}});
            else if (metric == "sink_eps" && has_n)
                eps.push_back({{"parameters", np},
                               {"Sink_eps", number(r[v])},
                               {"eps", text(r[pa])},
                               {"model", who + " (" + text(r[pa]) + ")"}});
            else if (metric == "rho")
                rho.push_back({{"model", who}, {"rho", number(r[v])}});
            else if (metric == "flip_rate")
                flips.push_back({{"model", who}, {"flip rate", number(r[v])}});
        }
        if (!mass.empty())
            c.figures.push_back(
                {sec, "Sink mass against parameter count",
                 "Mean over each model's heads of the attention mass on the sink "
                 "key, against the model's parameter count (log scale).",
                 point_spec(mass, "parameters", "sink mass", "model",
                            {"parameters (log scale)", "sink mass (share of attention)", "model"},
                            true)});
        if (!eps.empty())
            c.figures.push_back(
                {sec, "Sink_eps against parameter count",
                 "Share of heads whose mean attention to the sink key exceeds "
                 "eps, against the model's parameter count (log scale); one "
                 "point per model and eps.",
                 point_spec(eps, "parameters", "Sink_eps", "model",
                            {"parameters (log scale)", "Sink_eps (share of heads)", "model (eps)"},
                            true)});
        if (!rho.empty())
            c.figures.push_back({sec, "Sink share rho per model",
                                 "rho = V_b / (V_b + C_perp): how much of the spread between "
                                 "heads is spread in sink mass rather than in content.",
                                 hbar_spec(rho, "model", "rho",
                                           {"rho = V_b / (V_b + C_perp) (0-1)", "model", ""})});
        if (!flips.empty())
            c.figures.push_back({sec, "Flip rate per model",
                                 "Share of head triples whose order under a classical metric "
                                 "flips when the sink key is dropped, pooled over the metrics; "
                                 "0.15 and above counts as classical-unsafe.",
                                 hbar_spec(flips, "model", "flip rate",
                                           {"flip rate (share of triples)", "model", ""})});
    }
    // The pruning regime map (spec 7): each channel's inflation against the statistic, one
    // figure per sparsity (points of different models are not joined).
    if (fs::exists(dir / "regime_map.csv")) {
        const fs::path file = dir / "regime_map.csv";
        const io::Table t = io::Table::read_csv(file);
        const std::string stat =
            reg.is_object() && reg.value("statistic", "rho") == "v_b" ? "v_b" : "rho";
        const size_t x = col(t, file, stat), me = col(t, file, "method"),
                     sp = col(t, file, "sparsity"), in = col(t, file, "inflation"),
                     m = col(t, file, "model"), k = col(t, file, "checkpoint"),
                     lo = col(t, file, "random_min"), hi = col(t, file, "random_max"),
                     base = col(t, file, "baseline");
        std::map<std::string, json> by_sparsity;  // sparsity -> rows
        for (const auto& r : t.rows()) {
            json& rows = by_sparsity[text(r[sp])];
            if (!rows.is_array()) rows = json::array();
            const std::string who = label(text(r[m]), text(r[k]));
            rows.push_back({{stat, number(r[x])},
                            {"inflation", number(r[in])},
                            {"channel", text(r[me]) + " (" + who + ")"}});
            const json b = number(r[base]);
            if (b.is_number() && b.get<double>() != 0)
                for (size_t c : {lo, hi}) {
                    const json v = number(r[c]);
                    if (v.is_number())
                        rows.push_back(
                            {{stat, number(r[x])},
                             {"inflation", v.get<double>() / b.get<double>()},
                             {"channel", std::string(c == lo ? "random min" : "random max") + " (" +
                                             who + ")"}});
                }
        }
        for (const auto& [sparsity, rows] : by_sparsity)
            c.figures.push_back(
                {sec, "Pruning inflation against " + stat + ", sparsity " + sparsity,
                 "Each model's measure after pruning this share of its heads by each channel, "
                 "divided by the unpruned measure (1 = no change), against the model's " +
                     stat +
                     "; the random baseline's min and max show its spread. Classical-unsafe: a "
                     "classical channel above the random max while dA_perp stays below it.",
                 point_spec(rows, stat, "inflation", "channel",
                            {stat == "rho" ? "rho = V_b / (V_b + C_perp) (0-1)" : "V_b (nats^2)",
                             "inflation (pruned / unpruned measure)", "channel (model)"})});
    }
    if (fs::exists(dir / "regime_confusion.csv")) {
        const fs::path file = dir / "regime_confusion.csv";
        const io::Table t = io::Table::read_csv(file);
        const size_t p = col(t, file, "predicted"), me = col(t, file, "measured"),
                     n = col(t, file, "count");
        std::string line = "Predicted x measured on the applied runs:";
        for (const auto& r : t.rows())
            if (number(r[n]).is_number() && number(r[n]).get<double>() > 0)
                line += " " + text(r[p]) + " / " + text(r[me]) + ": " + text(r[n]) + ";";
        c.notes.push_back(line);
    }
}

}  // namespace sinkscope::report
