// The analysis pipeline over the registry (pipeline.hpp).
#include "sinkscope/analysis/pipeline.hpp"

#include <algorithm>
#include <sstream>

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/table.hpp"

namespace fs = std::filesystem;

namespace sinkscope::analysis {

// A CSV written row by row whose saved size lets a resumed run cut it back: a file, or a text in
// memory that finish() puts into the run's files.
struct AnalysisPipeline::Stream {
    RunFiles dir;
    std::string file;  // "<name>.csv"
    std::ofstream disk;
    std::ostringstream memory;
    std::ostream* out = nullptr;  // &disk or &memory
    Stream(RunFiles d, std::string f) : dir(std::move(d)), file(std::move(f)) {}
    void open(const std::vector<std::string>& columns, uint64_t resume_bytes) {
        const std::string header =
            io::csv_line(std::vector<io::Cell>(columns.begin(), columns.end()));
        if (dir.is_memory()) {
            // A state saved in memory is never resumed in another process: only this one's rows.
            SS_CHECK(resume_bytes == 0, "a stream in memory resumed from a saved state");
            out = &memory;
            memory << header;
            return;
        }
        const fs::path p = dir.dir() / file;
        out = &disk;
        if (resume_bytes > 0) {
            if (!fs::exists(p) || fs::file_size(p) < resume_bytes)
                throw InputError(p.string(), "shorter than the saved state says: cannot resume");
            fs::resize_file(p, resume_bytes);
            disk.open(p, std::ios::binary | std::ios::app);
        } else {
            disk.open(p, std::ios::binary | std::ios::trunc);
            disk << header;
        }
        if (!disk) throw IoError(p.string(), "cannot open for writing");
    }
    uint64_t flush() {
        if (dir.is_memory()) return uint64_t(memory.tellp());
        disk.flush();
        if (!disk) throw IoError(dir.shown(file), "write failed");
        return fs::file_size(dir.dir() / file);
    }
    std::string text() {
        if (dir.is_memory()) return memory.str();
        flush();
        return read_file(dir.dir() / file);
    }
    void close() {
        if (dir.is_memory()) {
            dir.write(file, memory.str());
            return;
        }
        disk.close();
        if (!disk) throw IoError(dir.shown(file), "write failed");
    }
};

AnalysisPipeline::AnalysisPipeline(int64_t n_layers, int64_t n_heads, ResolvedOptions options,
                                   std::string model_name, std::string origin,
                                   std::string checkpoint, const LayerSelection& layers)
    : n_layers_(n_layers), n_heads_(n_heads), options_(std::move(options)) {
    context_.n_layers = n_layers;
    if (!layers.ids.empty() && !layers.all()) {
        SS_CHECK(layers.size() == n_layers, "a pipeline of ", n_layers, " layers given ",
                 layers.size(), " layer ids");
        context_.layer_ids = layers.ids;
        options_.ref_frame.layer_ids = layers.ids;  // section 8's layer rules (10.n, 10.o)
        options_.ref_frame.model_layers = layers.model_layers;
    }
    context_.n_heads = n_heads;
    context_.options = &options_;
    context_.model_name = std::move(model_name);
    context_.origin = std::move(origin);
    context_.checkpoint = std::move(checkpoint);
    context_.shared = std::make_shared<SharedState>();
    labels_ = std::make_shared<InputLabels>();
    context_.labels = labels_;
    collect_per_input_ = options_.raw.per_input;
    for (const auto& info : registry()) {
        if (!options_.selected(info.name)) continue;
        analyses_.push_back({&info, info.make(context_)});
        collect_per_input_ = collect_per_input_ || info.needs.per_input_values;
        wants_token_strings_ = wants_token_strings_ || info.needs.token_strings;
    }
}

AnalysisPipeline::~AnalysisPipeline() = default;

void AnalysisPipeline::set_input_labels(InputLabels labels) {
    SS_CHECK(!dir_, "set_input_labels after open_streams");
    for (const auto& v : labels.values)
        SS_CHECK(v.size() == labels.columns.size(), "an input has ", v.size(), " values of ",
                 labels.columns.size(), " data columns");
    *labels_ = std::move(labels);
}

AnalysisPipeline::Stream& AnalysisPipeline::stream(const std::string& name) {
    auto it = streams_.find(name);
    if (it != streams_.end()) return *it->second;
    SS_CHECK(dir_, "stream ", name, " used before open_streams");
    auto s = std::make_unique<Stream>(*dir_, name + ".csv");
    const auto saved = saved_bytes_.find(name);
    std::vector<std::string> columns = tables::kSinks.columns;
    if (name != tables::kSinks.name) {
        columns = tables::kPerInputColumns;
        columns.insert(columns.end(), labels_->columns.begin(), labels_->columns.end());
    }
    s->open(columns, saved == saved_bytes_.end() ? 0 : saved->second);
    return *streams_.emplace(name, std::move(s)).first->second;
}

void AnalysisPipeline::open_streams(const RunFiles& dir) {
    dir_ = dir;
    // Every stream the saved state knows is reopened (and cut back) now; others open on first use.
    for (const auto& [name, bytes] : saved_bytes_) stream(name);
    stream(tables::kSinks.name);
}

void AnalysisPipeline::set_progress(const StageProgress& fn) {
    for (auto& [info, a] : analyses_) a->set_progress(fn);
}

void AnalysisPipeline::add(const metrics::AttentionInput& input,
                           const std::vector<std::string>* tokens, ModelVectors* vectors) {
    SS_CHECK(input.n_layers == n_layers_ && input.n_heads == n_heads_, "input of ", input.n_layers,
             "x", input.n_heads, " heads in a pipeline for ", n_layers_, "x", n_heads_);
    // One resolution per input, used by every analysis and written out (spec 0, 10.d).
    const metrics::SinkPositions sinks = metrics::resolve_sinks(input, options_.head.sink);
    if (dir_) {
        std::ostream& s = *stream(tables::kSinks.name).out;
        const int64_t input = first_input_ + n_inputs_;
        const int64_t row = labels_->row(input);
        s << input << "," << row << ",-1," << sinks.model << "\n";
        for (int64_t l = 0; l < n_layers_; ++l)
            s << input << "," << row << "," << context_.layer_id(l) << "," << sinks.per_layer[l]
              << "\n";
    }
    if (positions_.size() < kMaxRecordedSinks)
        positions_.push_back({{"model", sinks.model}, {"per_layer", sinks.per_layer}});

    InputView view;
    view.index = n_inputs_;
    view.attention = &input;
    view.sinks = &sinks;
    view.tokens = tokens;
    view.vectors = vectors;
    PerInputValues per_input;
    PerInputValues* pi = collect_per_input_ ? &per_input : nullptr;
    // Analyses that read hidden states first; then the caller's hidden states and values are
    // released before the attention analyses allocate (peak memory of long inputs).
    for (auto& [info, a] : analyses_)
        if (info->needs.model_vectors()) a->add(view, pi);
    if (vectors) *vectors = {};
    view.vectors = nullptr;
    // A long input (rows recomputed) gives its freed memory back between phases; short ones do
    // not, so the next forward reuses the heap's pages instead of faulting them in again.
    const bool recomputed = !input.stored() && !input.source->holds_all_rows();
    if (recomputed) return_free_memory();
    for (auto& [info, a] : analyses_) {
        if (info->needs.model_vectors()) continue;
        a->add(view, pi);
        // Rows recomputed for one analysis are not what the next one reads first: the row
        // cache and the analysis's freed scratch go back before the next one allocates.
        if (recomputed) {
            input.source->drop_cache();
            return_free_memory();
        }
    }
    if (collect_per_input_) {
        for (auto& [info, a] : analyses_)
            if (info->needs.per_input_values) a->add_per_input(n_inputs_, per_input);
        if (options_.raw.per_input && dir_) {
            const int64_t input = first_input_ + n_inputs_;
            std::vector<io::Cell> cells;
            for (const auto& v : per_input) {
                cells = {context_.model_name,
                         context_.checkpoint,
                         input,
                         labels_->row(input),
                         context_.layer_id(v.layer),
                         v.head,
                         v.metric,
                         v.param,
                         v.value,
                         v.weight};
                if (size_t(input) < labels_->values.size())
                    for (const std::string& x : labels_->values[size_t(input)]) cells.push_back(x);
                *stream(tables::per_input_name(v.table)).out << io::csv_line(cells);
            }
        }
    }
    ++n_inputs_;
}

void AnalysisPipeline::save(BinaryWriter& w) {
    w.tag("pipeline");
    w.put(n_inputs_);
    w.put<uint64_t>(streams_.size());
    for (auto& [name, s] : streams_) {
        w.put_string(name);
        w.put<uint64_t>(s->flush());
    }
    w.put_string(positions_.dump());
    w.put<uint64_t>(analyses_.size());
    for (const auto& [info, a] : analyses_) {
        w.put_string(info->name);
        a->save(w);
    }
}

void AnalysisPipeline::load(BinaryReader& r) {
    r.expect_tag("pipeline");
    n_inputs_ = r.get<int64_t>();
    const auto n_streams = r.get<uint64_t>();
    saved_bytes_.clear();
    for (uint64_t k = 0; k < n_streams; ++k) {
        std::string name = r.get_string();
        saved_bytes_[name] = r.get<uint64_t>();
    }
    positions_ = io::parse_json(r.get_string(), "state file");
    if (r.get<uint64_t>() != analyses_.size()) r.fail("state was written with other analyses");
    for (auto& [info, a] : analyses_) {
        if (r.get_string() != info->name) r.fail("state was written with other analyses");
        a->load(r);
    }
}

std::map<std::string, std::string> AnalysisPipeline::stream_rows() {
    std::map<std::string, std::string> rows;
    for (auto& [name, s] : streams_) {
        std::string text = s->text();
        const size_t header = text.find('\n');
        rows[name] = header == std::string::npos ? std::string() : text.substr(header + 1);
    }
    return rows;
}

void AnalysisPipeline::merge(const AnalysisPipeline& other,
                             const std::map<std::string, std::string>& rows) {
    SS_CHECK(other.analyses_.size() == analyses_.size(), "merging pipelines of ",
             other.analyses_.size(), " and ", analyses_.size(), " analyses");
    for (size_t k = 0; k < analyses_.size(); ++k) {
        SS_CHECK(analyses_[k].info == other.analyses_[k].info, "merging other analyses");
        analyses_[k].analysis->merge(*other.analyses_[k].analysis);
    }
    n_inputs_ += other.n_inputs_;
    for (const auto& p : other.positions_)
        if (positions_.size() < kMaxRecordedSinks) positions_.push_back(p);
    for (const auto& [name, text] : rows) *stream(name).out << text;
}

void merge_record(nlohmann::json& into, const nlohmann::json& from) {
    for (auto it = from.begin(); it != from.end(); ++it) {
        auto& slot = into[it.key()];
        if (slot.is_object() && it->is_object()) {
            merge_record(slot, *it);
        } else if (slot.is_array() && it->is_array()) {
            for (const auto& v : *it)
                if (std::find(slot.begin(), slot.end(), v) == slot.end()) slot.push_back(v);
        } else {
            slot = *it;
        }
    }
}

PipelineResults AnalysisPipeline::finish() {
    for (auto& [name, s] : streams_) s->close();
    PipelineResults res;
    res.outputs.reserve(analyses_.size());  // FinishContext keeps pointers into it
    FinishContext context;
    nlohmann::json selected = nlohmann::json::array();
    for (auto& [info, a] : analyses_) {
        const std::string name = info->name;
        res.outputs.emplace_back(name, a->finish(context));
        AnalysisOutput& out = res.outputs.back().second;
        // The model and checkpoint columns, where an analysis left them empty (section 8's
        // tables are written from results that carry no names).
        for (auto& t : out.tables) {
            t.table.fill_empty("model", context_.model_name);
            if (!context_.checkpoint.empty()) t.table.fill_empty("checkpoint", context_.checkpoint);
        }
        context.finished[name] = &out;
        merge_record(res.record, out.record);
        res.summary += out.summary;
        res.warnings.insert(res.warnings.end(), out.warnings.begin(), out.warnings.end());
        selected.push_back(name);
    }
    res.record["analyses"] = selected;
    // The analysed layers by their model index (--layers), once every analysis has finished
    // (those that read earlier results index them as they were computed).
    if (!context_.layer_ids.empty())
        for (auto& [name, out] : res.outputs)
            for (auto& t : out.tables)
                for (const char* column : {"layer", "layer_a", "layer_b"})
                    t.table.map_integers(column, [this, &t](int64_t l) {
                        SS_CHECK(l < n_layers_, t.name, ".csv: layer ", l, " of ", n_layers_);
                        return context_.layer_id(l);
                    });
    return res;
}

}  // namespace sinkscope::analysis
