// Vega-Lite specification builders used by the report's figures (inline data, SVG-friendly).
// Conventions every figure follows, so a reader can compare them: axis titles say what is
// plotted and its unit (never a raw column name); layer axes carry one integer tick per layer;
// printed numbers (cell labels, tooltips) have 3 significant digits; panels are drawn only for
// quantities with at least one finite value.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sinkscope/report/report.hpp"

namespace sinkscope::report {

using nlohmann::json;

namespace {

// d3-format: 3 significant digits for printed values (0.135, 1.65, 0.100); axis labels drop
// trailing zeros (0.001, 0.02, 3).
constexpr const char* kNumberFormat = ".3g";
constexpr const char* kAxisFormat = ".3~g";

// Label angle of a category axis: horizontal only when every label is short.
int label_angle(const json& values) {
    for (const auto& v : values)
        if ((v.is_string() ? v.get<std::string>().size() : v.dump().size()) > 4) return -40;
    return 0;
}

json base(const json& rows) {
    return {{"$schema", "https://vega.github.io/schema/vega-lite/v6.json"},
            {"data", {{"values", rows}}},
            {"config",
             {{"view", {{"stroke", nullptr}}},
              {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
              {"legend", {{"labelFontSize", 11}, {"titleFontSize", 12}}}}}};
}

bool is_number(const json& v) {
    return v.is_number() && std::isfinite(v.get<double>());
}

// The distinct finite values of a numeric field, ascending.
std::vector<double> distinct_numbers(const json& rows, const std::string& field) {
    std::set<double> s;
    for (const auto& r : rows)
        if (r.is_object() && r.contains(field) && is_number(r[field]))
            s.insert(r[field].get<double>());
    return {s.begin(), s.end()};
}

// The distinct values of a field in order of first appearance (strings or numbers).
json distinct_in_order(const json& rows, const std::string& field) {
    json out = json::array();
    for (const auto& r : rows) {
        if (!r.is_object() || !r.contains(field) || r[field].is_null()) continue;
        if (std::find(out.begin(), out.end(), r[field]) == out.end()) out.push_back(r[field]);
    }
    return out;
}

// A quantitative layer axis: one tick per layer, printed as an integer (without explicit values
// Vega picks fractional ticks that "d" prints as "0, 1, 1").
json layer_axis(const json& rows, const std::string& field) {
    json values = json::array();
    for (double v : distinct_numbers(rows, field))
        if (v == std::floor(v)) values.push_back(int64_t(v));
    return {{"values", values}, {"format", "d"}, {"labelAngle", 0}};
}

std::string title_or(const std::string& title, const std::string& field) {
    if (!title.empty()) return title;
    std::string t = field;
    std::replace(t.begin(), t.end(), '_', ' ');
    return t;
}

json quantitative(const json& rows, const std::string& field, const std::string& title) {
    json e = {{"field", field}, {"type", "quantitative"}, {"title", title_or(title, field)}};
    if (field == "layer") e["axis"] = layer_axis(rows, field);
    return e;
}

json tooltip(const std::vector<std::pair<std::string, bool>>& fields) {
    json t = json::array();
    for (const auto& [f, numeric] : fields) {
        json e = {{"field", f}, {"type", numeric ? "quantitative" : "nominal"}};
        if (numeric && f != "layer" && f != "head") e["format"] = kNumberFormat;
        t.push_back(e);
    }
    return t;
}

// Rows carrying a bootstrap interval (ci_lo, ci_hi from bootstrap.csv) get error bars.
bool has_intervals(const json& rows) {
    for (const auto& r : rows)
        if (r.contains("ci_lo") && r.contains("ci_hi")) return true;
    return false;
}

// The y scale of a quantity: from the data (zero included, as a bar or a share reads from 0),
// except that values within rounding of 0 below it (an eigenvalue of -1e-16) do not pull the
// axis down to the next "nice" tick (-2 for values up to 16).
json y_scale(const json& rows, const std::string& y) {
    double lo = INFINITY, hi = -INFINITY;
    for (const char* f : {y.c_str(), "ci_lo", "ci_hi"})
        for (double v : distinct_numbers(rows, f)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (std::isfinite(lo) && lo < 0 && -lo <= 1e-9 * std::max(std::abs(hi), 1e-300))
        return {{"zero", true}, {"domainMin", 0}};
    return {{"zero", true}};
}

// A log axis over the data's values: ticks at the values (Vega thins labels that would
// collide), ending at the first and last value; labels as 0.001 or 250, and from 1000 on in SI
// style (1.5k, 2M) rather than 1e+3.
void log_axis(json& enc, const std::vector<double>& values) {
    json ticks = json::array();
    for (double v : values)
        if (v > 0) ticks.push_back(v);
    const bool large = !ticks.empty() && ticks.back().get<double>() >= 1000;
    enc["axis"] = {{"values", ticks},
                   {"format", large ? ".3~s" : kAxisFormat},
                   {"labelOverlap", "greedy"},
                   {"labelAngle", -45}};
    enc["scale"] = {{"type", "log"}, {"nice", false}};
    if (!ticks.empty()) enc["scale"]["domain"] = {ticks.front(), ticks.back()};
}

// A categorical x axis: the values in the rows' order (numbers ascending), labels slanted when
// long.
json category_axis(const json& rows, const std::string& field, const std::string& title) {
    json values = distinct_in_order(rows, field);
    if (std::all_of(values.begin(), values.end(), [](const json& v) { return v.is_number(); }))
        std::sort(values.begin(), values.end());
    return {{"field", field},
            {"type", "ordinal"},
            {"title", title_or(title, field)},
            {"sort", values},
            {"axis", {{"labelAngle", label_angle(values)}}}};
}

// Error bars from the rows' ci_lo / ci_hi at `xenc`, on the y scale and under the title of the
// quantity they belong to (Vega-Lite joins differing layer titles: "..., ci_lo").
json error_bar_layer(const json& xenc, const json& yenc) {
    json y = {{"field", "ci_lo"}, {"type", "quantitative"}, {"title", yenc["title"]}};
    if (yenc.contains("scale")) y["scale"] = yenc["scale"];
    return {{"mark", {{"type", "errorbar"}, {"ticks", true}}},
            {"encoding", {{"x", xenc}, {"y", y}, {"y2", {{"field", "ci_hi"}}}}}};
}

// y against x per series, with error bars from ci_lo / ci_hi when present. A layer axis is
// categorical (points per layer, side by side per series, not joined by lines: layers are
// not a continuum); any other x is a line with points, on a log axis when `log_x`.
json line_layers(const json& rows, const std::string& x, const std::string& y,
                 const std::string& series, const Titles& titles, bool log_x) {
    const bool categorical = x == "layer";
    json xenc = quantitative(rows, x, titles.x);
    if (categorical) {
        xenc = category_axis(rows, x, titles.x);
    } else if (log_x) {
        log_axis(xenc, distinct_numbers(rows, x));
    }
    json yenc = quantitative(rows, y, titles.y);
    yenc["scale"] = y_scale(rows, y);
    json enc = {{"x", xenc}, {"y", yenc}};
    std::vector<std::pair<std::string, bool>> tips = {{x, true}, {y, true}};
    if (!series.empty()) {
        enc["color"] = {{"field", series},
                        {"type", "nominal"},
                        {"title", title_or(titles.color, series)},
                        {"sort", distinct_in_order(rows, series)}};
        if (categorical) enc["xOffset"] = {{"field", series}, {"sort", enc["color"]["sort"]}};
        tips.emplace_back(series, false);
    }
    const bool ci = has_intervals(rows);
    if (ci) tips.emplace_back("ci_lo", true), tips.emplace_back("ci_hi", true);
    enc["tooltip"] = tooltip(tips);
    const json mark = categorical ? json{{"type", "point"}, {"filled", true}, {"size", 50}}
                                  : json{{"type", "line"}, {"point", true}};
    json layers = json::array({{{"mark", mark}, {"encoding", enc}}});
    if (ci) {
        json bars = error_bar_layer(xenc, yenc);
        if (!series.empty()) bars["encoding"]["color"] = enc["color"];
        if (enc.contains("xOffset")) bars["encoding"]["xOffset"] = enc["xOffset"];
        layers.push_back(bars);
    }
    return layers;
}

// The square plot of a head map, in pixels.
constexpr double kMapSide = 280;
struct MapFrame {
    double x0, y0, span, side;  // data corner, data span of both axes, plot side in pixels
};

// Sets "shown_label" on each row: its label where the label's box (9 px text right of and above
// the point) overlaps no label shown before it, no other point and stays inside the plot;
// otherwise empty (the tooltip still names it). Points far from the centre are labelled first:
// they are the heads that stand out.
void label_without_overlap(json& rows, const std::string& x, const std::string& y,
                           const std::string& label, const MapFrame& f) {
    struct Box {
        double l, t, r, b;
        bool meets(const Box& o) const { return l < o.r && o.l < r && t < o.b && o.t < b; }
    };
    const double scale = f.side / f.span, radius = 4.5, char_w = 5.4, text_h = 10;
    std::vector<std::pair<double, double>> at;  // pixel position of each row's point
    for (const auto& r : rows)
        at.emplace_back((r[x].get<double>() - f.x0) * scale,
                        f.side - (r[y].get<double>() - f.y0) * scale);
    double mx = 0, my = 0;
    for (const auto& [px, py] : at) mx += px, my += py;
    mx /= double(std::max<size_t>(at.size(), 1)), my /= double(std::max<size_t>(at.size(), 1));
    std::vector<size_t> order(rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto far = [&](size_t i) { return std::hypot(at[i].first - mx, at[i].second - my); };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return far(a) > far(b); });
    std::vector<Box> taken;
    for (size_t i : order) {
        const std::string text = rows[i].contains(label) && rows[i][label].is_string()
                                     ? rows[i][label].get<std::string>()
                                     : std::string();
        const auto [px, py] = at[i];
        const Box box{px + 5, py - 6 - text_h, px + 5 + char_w * double(text.size()), py - 6 + 2};
        bool free = box.r <= f.side && box.t >= 0;
        for (const Box& o : taken) free = free && !box.meets(o);
        for (size_t j = 0; j < at.size() && free; ++j)
            free = j == i || !box.meets({at[j].first - radius, at[j].second - radius,
                                         at[j].first + radius, at[j].second + radius});
        rows[i]["shown_label"] = free ? text : "";
        if (free) taken.push_back(box);
    }
}

}  // namespace

json heatmap_spec(const json& rows, const std::string& x, const std::string& y,
                  const std::string& color, const Titles& titles, const HeatmapOptions& o) {
    json s = base(rows);
    const json xs = distinct_in_order(rows, x), ys = distinct_in_order(rows, y);
    const size_t cells = xs.size() * ys.size();
    // Square cells: large enough to print a value in when there are few, at most ~640 px wide.
    const double cell =
        cells <= size_t(o.max_labelled_cells)
            ? 44.0
            : std::clamp(640.0 / double(std::max<size_t>(xs.size(), 1)), 10.0, 36.0);
    s["width"] = {{"step", cell}};
    s["height"] = {{"step", cell}};
    auto sorted = [](json v) {
        std::sort(v.begin(), v.end());
        return v;
    };
    json cscale = {{"scheme", o.scheme}};
    if (std::isfinite(o.lo) && std::isfinite(o.hi))
        cscale["domain"] = {o.lo, o.hi}, cscale["clamp"] = true;
    const json enc = {{"x",
                       {{"field", x},
                        {"type", "ordinal"},
                        {"title", title_or(titles.x, x)},
                        {"sort", sorted(xs)},
                        {"axis", {{"labelAngle", label_angle(xs)}}}}},
                      {"y",
                       {{"field", y},
                        {"type", "ordinal"},
                        {"title", title_or(titles.y, y)},
                        {"sort", sorted(ys)}}},
                      {"tooltip", tooltip({{x, false}, {y, false}, {color, true}})}};
    json rect = {{"mark", {{"type", "rect"}}}, {"encoding", enc}};
    rect["encoding"]["color"] = {{"field", color},
                                 {"type", "quantitative"},
                                 {"title", title_or(titles.color, color)},
                                 {"scale", cscale}};
    s["layer"] = json::array({rect});
    if (cells <= size_t(o.max_labelled_cells)) {
        // Light text on the dark cells: the low end of viridis, the far ends of a diverging
        // scheme (a domain around 0).
        const bool fixed = std::isfinite(o.lo) && std::isfinite(o.hi);
        const std::vector<double> values = distinct_numbers(rows, color);
        const double data_mid = values.empty() ? 0.0 : (values.front() + values.back()) / 2;
        const std::string v = "datum['" + color + "']";
        const std::string dark =
            fixed && o.lo < 0 && o.hi > 0
                ? "abs(" + v + ") > " + std::to_string(0.6 * std::max(-o.lo, o.hi))
                : v + " < " + std::to_string(fixed ? (o.lo + o.hi) / 2 : data_mid);
        json text = {{"mark", {{"type", "text"}, {"fontSize", 11}}}, {"encoding", enc}};
        text["encoding"]["text"] = {
            {"field", color}, {"type", "quantitative"}, {"format", kNumberFormat}};
        text["encoding"]["color"] = {{"condition", {{"test", dark}, {"value", "white"}}},
                                     {"value", "black"}};
        s["layer"].push_back(text);
    }
    return s;
}

json point_spec(const json& rows, const std::string& x, const std::string& y,
                const std::string& who, const Titles& titles, bool log_x) {
    json s = base(rows);
    s["width"] = 480;
    s["height"] = 260;
    json xenc = quantitative(rows, x, titles.x);
    if (log_x) log_axis(xenc, distinct_numbers(rows, x));
    json yenc = quantitative(rows, y, titles.y);
    yenc["scale"] = y_scale(rows, y);
    s["mark"] = {{"type", "point"}, {"filled", true}, {"size", 80}};
    s["encoding"] = {
        {"x", xenc},
        {"y", yenc},
        {"color",
         {{"field", who},
          {"type", "nominal"},
          {"title", title_or(titles.color, who)},
          {"sort", distinct_in_order(rows, who)}}},
        {"shape", {{"field", who}, {"type", "nominal"}, {"sort", distinct_in_order(rows, who)}}},
        {"tooltip", tooltip({{who, false}, {x, true}, {y, true}})}};
    return s;
}

json line_spec(const json& rows, const std::string& x, const std::string& y,
               const std::string& series, const Titles& titles, bool log_x) {
    json s = base(rows);
    s["width"] = 560;
    s["height"] = 260;
    s["layer"] = line_layers(rows, x, y, series, titles, log_x);
    return s;
}

json hbar_spec(const json& rows, const std::string& category, const std::string& value,
               const Titles& titles) {
    json s = base(rows);
    s["width"] = 480;
    s["height"] = {{"step", 22}};
    s["mark"] = {{"type", "bar"}};
    s["encoding"] = {{"y",
                      {{"field", category},
                       {"type", "nominal"},
                       {"title", title_or(titles.y, category)},
                       {"sort", distinct_in_order(rows, category)}}},
                     {"x", quantitative(rows, value, titles.x)},
                     {"tooltip", tooltip({{category, false}, {value, true}})}};
    return s;
}

json panel_line_spec(const json& rows, const std::string& x, const std::string& y,
                     const std::string& series, const std::string& panel, const Titles& titles,
                     bool log_x, const std::map<std::string, PanelAxis>& panels) {
    json s = base(json::array());
    s.erase("data");
    json concat = json::array();
    for (const auto& name : distinct_in_order(rows, panel)) {
        json sub = json::array();
        bool finite = false;
        for (const auto& r : rows)
            if (r.is_object() && r.contains(panel) && r[panel] == name) {
                sub.push_back(r);
                finite = finite || (r.contains(y) && is_number(r[y]));
            }
        if (!finite) continue;  // no empty panels: a quantity without a finite value is left out
        const std::string key = name.is_string() ? name.get<std::string>() : name.dump();
        const auto it = panels.find(key);
        Titles t = titles;
        if (it != panels.end() && !it->second.title.empty()) t.y = it->second.title;
        if (t.y.empty()) t.y = key;
        json layers = line_layers(sub, x, y, series, t, log_x);
        if (it != panels.end() && std::isfinite(it->second.lo) && std::isfinite(it->second.hi))
            for (auto& l : layers)
                l["encoding"]["y"]["scale"] = {{"domain", {it->second.lo, it->second.hi}}};
        concat.push_back({{"data", {{"values", sub}}},
                          {"width", 300},
                          {"height", 220},
                          {"title", {{"text", key}, {"fontSize", 12}}},
                          {"layer", layers}});
    }
    s["concat"] = concat;
    s["columns"] = 2;
    s["resolve"] = {{"scale", {{"x", "independent"}, {"y", "independent"}}}};
    return s;
}

json stacked_bar_spec(const json& rows, const std::string& x, const std::string& y,
                      const std::string& stack, const Titles& titles, const json& totals) {
    json s = base(rows);
    s["width"] = {{"step", 48}};
    s["height"] = 260;
    s["mark"] = {{"type", "bar"}};
    s["encoding"] = {{"x", category_axis(rows, x, titles.x)},
                     {"y",
                      {{"field", y},
                       {"type", "quantitative"},
                       {"title", title_or(titles.y, y)},
                       {"stack", "zero"}}},
                     {"color",
                      {{"field", stack},
                       {"type", "nominal"},
                       {"title", title_or(titles.color, stack)},
                       {"sort", distinct_in_order(rows, stack)}}},
                     {"order", {{"field", "order"}, {"type", "quantitative"}}},
                     {"tooltip", tooltip({{x, false}, {stack, false}, {y, true}})}};
    if (rows.empty() || !rows[0].contains("order")) s["encoding"].erase("order");
    if (totals.empty()) return s;
    // The stack's intervals on top of it: a layer of their own data.
    json bars = error_bar_layer(s["encoding"]["x"], s["encoding"]["y"]);
    bars["data"] = {{"values", totals}};
    s["layer"] = json::array({{{"mark", s["mark"]}, {"encoding", s["encoding"]}}, bars});
    s.erase("mark");
    s.erase("encoding");
    return s;
}

json map_spec(const json& rows, const std::string& x, const std::string& y,
              const std::string& color, const std::string& panel, const std::string& label,
              const Titles& titles) {
    json s = base(json::array());
    s.erase("data");
    json concat = json::array();
    for (const auto& name : distinct_in_order(rows, panel)) {
        json sub = json::array();
        double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
        for (const auto& r : rows) {
            if (!r.is_object() || !r.contains(panel) || r[panel] != name) continue;
            if (!r.contains(x) || !r.contains(y) || !is_number(r[x]) || !is_number(r[y])) continue;
            sub.push_back(r);
            const double vx = r[x].get<double>(), vy = r[y].get<double>();
            x_lo = std::min(x_lo, vx), x_hi = std::max(x_hi, vx);
            y_lo = std::min(y_lo, vy), y_hi = std::max(y_hi, vy);
        }
        if (sub.empty()) continue;
        // Equal aspect: both axes span the same length on a square plot, so distances read the
        // same in every direction; 15% margin keeps the point labels inside.
        const double span = std::max({x_hi - x_lo, y_hi - y_lo, 1e-12}) * 1.3;
        const double cx = (x_lo + x_hi) / 2, cy = (y_lo + y_hi) / 2;
        const json xenc = {{"field", x},
                           {"type", "quantitative"},
                           {"title", title_or(titles.x, x)},
                           {"scale", {{"domain", {cx - span / 2, cx + span / 2}}, {"nice", false}}},
                           {"axis", {{"format", kAxisFormat}}}};
        const json yenc = {{"field", y},
                           {"type", "quantitative"},
                           {"title", title_or(titles.y, y)},
                           {"scale", {{"domain", {cy - span / 2, cy + span / 2}}, {"nice", false}}},
                           {"axis", {{"format", kAxisFormat}}}};
        json points = {
            {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
            {"encoding",
             {{"x", xenc},
              {"y", yenc},
              {"color",
               {{"field", color}, {"type", "nominal"}, {"title", title_or(titles.color, color)}}},
              {"tooltip", tooltip({{label, false}, {color, false}, {x, true}, {y, true}})}}}};
        label_without_overlap(sub, x, y, label, {cx - span / 2, cy - span / 2, span, kMapSide});
        json text = {
            {"mark", {{"type", "text"}, {"dx", 5}, {"dy", -6}, {"fontSize", 9}, {"align", "left"}}},
            {"encoding", {{"x", xenc}, {"y", yenc}, {"text", {{"field", "shown_label"}}}}}};
        const std::string key = name.is_string() ? name.get<std::string>() : name.dump();
        concat.push_back({{"data", {{"values", sub}}},
                          {"width", kMapSide},
                          {"height", kMapSide},
                          {"title", {{"text", key}, {"fontSize", 12}}},
                          {"layer", json::array({points, text})}});
    }
    s["concat"] = concat;
    s["columns"] = 2;
    s["resolve"] = {{"scale", {{"x", "independent"}, {"y", "independent"}}}};
    return s;
}

}  // namespace sinkscope::report
