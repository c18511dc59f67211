// Vega-Lite specification builders used by the report's figures (inline data, SVG-friendly).
#include "sinkscope/report/report.hpp"

namespace sinkscope::report {

using nlohmann::json;

namespace {
json base(const json& rows) {
    return {{"$schema", "https://vega.github.io/schema/vega-lite/v6.json"},
            {"data", {{"values", rows}}},
            {"width", 640},
            {"config", {{"view", {{"stroke", nullptr}}}, {"axis", {{"labelFontSize", 11}}}}}};
}
}  // namespace

json heatmap_spec(const json& rows, const std::string& x, const std::string& y,
                  const std::string& color, const std::string& color_title) {
    json s = base(rows);
    s["width"] = 560;
    s["mark"] = {{"type", "rect"}, {"tooltip", true}};
    s["encoding"] = {
        {"x", {{"field", x}, {"type", "ordinal"}, {"title", x}}},
        {"y", {{"field", y}, {"type", "ordinal"}, {"title", y}}},
        {"color", {{"field", color}, {"type", "quantitative"}, {"title", color_title},
                   {"scale", {{"scheme", "viridis"}}}}}};
    return s;
}

namespace {
// Rows carrying a bootstrap interval (ci_lo, ci_hi from bootstrap.csv) get error bars.
bool has_intervals(const json& rows) {
    for (const auto& r : rows)
        if (r.contains("ci_lo") && r.contains("ci_hi")) return true;
    return false;
}
}  // namespace

json line_spec(const json& rows, const std::string& x, const std::string& y,
               const std::string& series, bool log_x) {
    json s = base(rows);
    s["height"] = 260;
    json xenc = {{"field", x}, {"type", "quantitative"}, {"title", x}};
    if (log_x) xenc["scale"] = {{"type", "log"}};
    if (x == "layer") xenc["axis"] = {{"tickMinStep", 1}, {"format", "d"}};
    json enc = {{"x", xenc}, {"y", {{"field", y}, {"type", "quantitative"}, {"title", y}}}};
    if (!series.empty()) enc["color"] = {{"field", series}, {"type", "nominal"}};
    if (!has_intervals(rows)) {
        s["mark"] = {{"type", "line"}, {"point", true}, {"tooltip", true}};
        s["encoding"] = enc;
        return s;
    }
    json bars = {{"x", xenc},
                 {"y", {{"field", "ci_lo"}, {"type", "quantitative"}, {"title", y}}},
                 {"y2", {{"field", "ci_hi"}}}};
    if (!series.empty()) bars["color"] = {{"field", series}, {"type", "nominal"}};
    s["layer"] = json::array(
        {{{"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}}, {"encoding", enc}},
         {{"mark", {{"type", "errorbar"}, {"ticks", true}}}, {"encoding", bars}}});
    return s;
}

json bar_spec(const json& rows, const std::string& x, const std::string& y,
              const std::string& color) {
    json s = base(rows);
    s["height"] = 260;
    s["mark"] = {{"type", "bar"}, {"tooltip", true}};
    s["encoding"] = {{"x", {{"field", x}, {"type", "nominal"}, {"title", x}, {"sort", nullptr}}},
                     {"y", {{"field", y}, {"type", "quantitative"}, {"title", y}}}};
    if (!color.empty()) {
        s["encoding"]["color"] = {{"field", color}, {"type", "nominal"}};
        s["encoding"]["xOffset"] = {{"field", color}};
    }
    return s;
}

json facet_line_spec(const json& rows, const std::string& x, const std::string& y,
                     const std::string& series, const std::string& facet, bool log_x) {
    json s = base(rows);
    s.erase("width");
    json xenc = {{"field", x}, {"type", "quantitative"}, {"title", x}};
    if (log_x) xenc["scale"] = {{"type", "log"}};
    if (x == "layer") xenc["axis"] = {{"tickMinStep", 1}, {"format", "d"}};
    json enc = {{"x", xenc},
                {"y", {{"field", y}, {"type", "quantitative"}, {"title", y}}},
                {"tooltip", json::array({{{"field", x}}, {{"field", y}}, {{"field", series}}})}};
    if (!series.empty()) enc["color"] = {{"field", series}, {"type", "nominal"}};
    s["facet"] = {{"field", facet}, {"type", "nominal"}, {"title", nullptr}};
    s["columns"] = 2;
    if (has_intervals(rows)) {
        json bars = {{"x", xenc},
                     {"y", {{"field", "ci_lo"}, {"type", "quantitative"}, {"title", y}}},
                     {"y2", {{"field", "ci_hi"}}}};
        if (!series.empty()) bars["color"] = {{"field", series}, {"type", "nominal"}};
        s["spec"] = {
            {"width", 320},
            {"height", 200},
            {"layer",
             json::array(
                 {{{"mark", {{"type", "line"}, {"point", true}}}, {"encoding", enc}},
                  {{"mark", {{"type", "errorbar"}, {"ticks", true}}}, {"encoding", bars}}})}};
    } else {
        s["spec"] = {{"width", 320},
                     {"height", 200},
                     {"mark", {{"type", "line"}, {"point", true}}},
                     {"encoding", enc}};
    }
    s["resolve"] = {{"scale", {{"y", "independent"}}}};
    return s;
}

json stacked_bar_spec(const json& rows, const std::string& x, const std::string& y,
                      const std::string& stack) {
    json s = base(rows);
    s["height"] = 260;
    s["mark"] = {{"type", "bar"}, {"tooltip", true}};
    s["encoding"] = {{"x", {{"field", x}, {"type", "ordinal"}, {"title", x}}},
                     {"y", {{"field", y}, {"type", "quantitative"}, {"title", y}, {"stack", "zero"}}},
                     {"color", {{"field", stack}, {"type", "nominal"}, {"title", nullptr}}}};
    return s;
}

json scatter_spec(const json& rows, const std::string& x, const std::string& y,
                  const std::string& color, const std::string& facet) {
    json s = base(rows);
    json enc = {{"x", {{"field", x}, {"type", "quantitative"}}},
                {"y", {{"field", y}, {"type", "quantitative"}}},
                {"tooltip", json::array({{{"field", "label"}, {"type", "nominal"}},
                                         {{"field", color}, {"type", "nominal"}}})}};
    if (!color.empty()) enc["color"] = {{"field", color}, {"type", "nominal"}};
    if (facet.empty()) {
        s["height"] = 320;
        s["mark"] = {{"type", "point"}, {"filled", true}};
        s["encoding"] = enc;
    } else {
        s.erase("width");
        s["facet"] = {{"field", facet}, {"type", "nominal"}};
        s["columns"] = 2;
        s["spec"] = {{"width", 300}, {"height", 260},
                     {"mark", {{"type", "point"}, {"filled", true}}}, {"encoding", enc}};
        s["resolve"] = {{"scale", {{"x", "independent"}, {"y", "independent"}}}};
    }
    return s;
}

}  // namespace sinkscope::report
