// Checkpoint manifests (manifest.hpp).
#include "sinkscope/io/manifest.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::io {

namespace fs = std::filesystem;

namespace {

struct RawEntry {
    std::optional<std::string> label, path;
    std::optional<int64_t> step;
};

// A step cell: a whole number >= 0.
int64_t parse_step(double v, const std::string& file, const std::string& where) {
    SS_CHECK_INPUT(std::isfinite(v) && v >= 0 && v == std::floor(v) && v < 9.0e15, file, where,
                   "step ", format_number(v), " is not a whole number >= 0");
    return int64_t(v);
}

std::vector<RawEntry> from_json(const fs::path& file) {
    const std::string f = file.string();
    const nlohmann::json j = read_json_file(file);
    const nlohmann::json* list = &j;
    if (j.is_object()) {
        SS_CHECK_INPUT(j.contains("checkpoints"), f, "has no \"checkpoints\" list");
        list = &j["checkpoints"];
    }
    SS_CHECK_INPUT(list->is_array(), f, "\"checkpoints\" must be a list, found ",
                   json_type_name(*list));
    SS_CHECK_INPUT(list->size() <= kMaxManifestEntries, f, "lists ", list->size(),
                   " checkpoints (at most ", kMaxManifestEntries, ")");
    std::vector<RawEntry> out;
    for (size_t k = 0; k < list->size(); ++k) {
        const nlohmann::json& e = (*list)[k];
        const std::string where = "checkpoint " + std::to_string(k + 1) + ": ";
        SS_CHECK_INPUT(e.is_object(), f, where, "must be an object, found ", json_type_name(e));
        RawEntry r;
        if (e.contains("path")) {
            SS_CHECK_INPUT(e["path"].is_string(), f, where, "\"path\" must be a string");
            r.path = e["path"].get<std::string>();
        }
        if (e.contains("label")) {
            SS_CHECK_INPUT(e["label"].is_string() || e["label"].is_number_integer(), f, where,
                           "\"label\" must be a string");
            r.label = e["label"].is_string() ? e["label"].get<std::string>() : e["label"].dump();
        }
        if (e.contains("step")) {
            SS_CHECK_INPUT(e["step"].is_number(), f, where, "\"step\" must be a number, found ",
                           json_type_name(e["step"]));
            r.step = parse_step(e["step"].get<double>(), f, where);
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<RawEntry> from_csv(const fs::path& file) {
    const std::string f = file.string();
    const Table t = Table::read_csv(file);
    auto column = [&](const char* name) -> std::optional<size_t> {
        const auto& c = t.columns();
        const auto it = std::find(c.begin(), c.end(), name);
        return it == c.end() ? std::nullopt : std::optional<size_t>(size_t(it - c.begin()));
    };
    const auto path = column("path"), step = column("step"), label = column("label");
    SS_CHECK_INPUT(path.has_value(), f, "has no 'path' column (header: path, step and/or label)");
    SS_CHECK_INPUT(step || label, f, "has neither a 'step' nor a 'label' column");
    SS_CHECK_INPUT(t.size() <= kMaxManifestEntries, f, "lists ", t.size(), " checkpoints (at most ",
                   kMaxManifestEntries, ")");
    auto text = [](const Cell& c) {
        if (const auto* s = std::get_if<std::string>(&c)) return *s;
        return format_number(std::get<double>(c));
    };
    std::vector<RawEntry> out;
    for (size_t k = 0; k < t.size(); ++k) {
        const auto& row = t.rows()[k];
        const std::string where = "line " + std::to_string(k + 2) + ": ";
        RawEntry r;
        r.path = text(row[*path]);
        if (label) r.label = text(row[*label]);
        if (step) {
            const auto* v = std::get_if<double>(&row[*step]);
            SS_CHECK_INPUT(v != nullptr, f, where, "step ", quote(text(row[*step])),
                           " is not a number");
            r.step = parse_step(*v, f, where);
        }
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace

std::vector<ManifestEntry> read_manifest(const fs::path& file) {
    const std::string f = file.string();
    SS_CHECK_INPUT(fs::is_regular_file(file), f, "no such manifest file");
    const std::string ext = file.extension().string();
    const std::vector<RawEntry> raw = ext == ".csv" ? from_csv(file) : from_json(file);
    SS_CHECK_INPUT(!raw.empty(), f, "lists no checkpoints");
    const fs::path base = file.parent_path();
    std::vector<ManifestEntry> out;
    std::set<std::string> labels;
    std::set<int64_t> steps;
    bool all_steps = true;
    for (size_t k = 0; k < raw.size(); ++k) {
        const RawEntry& r = raw[k];
        const std::string where = "checkpoint " + std::to_string(k + 1) + ": ";
        SS_CHECK_INPUT(r.path && !r.path->empty(), f, where, "has no path");
        SS_CHECK_INPUT(r.step || (r.label && !r.label->empty()), f, where,
                       "has neither a step nor a label");
        ManifestEntry e;
        e.step = r.step;
        e.label = r.label && !r.label->empty() ? *r.label : std::to_string(*r.step);
        e.path = fs::path(*r.path).is_absolute() ? fs::path(*r.path) : base / *r.path;
        if (e.step)
            SS_CHECK_INPUT(steps.insert(*e.step).second, f, where, "step ", *e.step,
                           " appears twice");
        SS_CHECK_INPUT(labels.insert(e.label).second, f, where, "label ", quote(e.label),
                       " appears twice");
        all_steps = all_steps && e.step.has_value();
        std::error_code ec;
        SS_CHECK_INPUT(fs::exists(e.path, ec), f, where, "path ", quote(e.path.string()),
                       " does not exist");
        out.push_back(std::move(e));
    }
    if (all_steps)
        std::stable_sort(
            out.begin(), out.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return *a.step < *b.step; });
    return out;
}

}  // namespace sinkscope::io
