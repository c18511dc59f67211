// inspect / generate / perplexity / dump: the library functions behind the model subcommands.
#include "sinkscope/api/model_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/api/interventions.hpp"
#include "sinkscope/api/perplexity.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/dataset.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/model/evaluation.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/sliding_window.hpp"

namespace sinkscope::api {

using namespace model;

namespace {
std::set<std::string>* said_lines = nullptr;  // the innermost live EachNoteOnce's lines

void say(const char* kind, const std::string& line) {
    if (line.empty()) return;
    if (said_lines && !said_lines->insert(std::string(kind) + line).second) return;
    std::fprintf(stderr, "sinkscope: %s: %s\n", kind, line.c_str());
}
}  // namespace

EachNoteOnce::EachNoteOnce() : outer_(said_lines) {
    said_lines = &said_;
}
EachNoteOnce::~EachNoteOnce() {
    said_lines = outer_;
}

void print_note(const std::string& line) {
    say("note", line);
}

void print_warning(const std::string& line) {
    say("warning", line);
}

LoadOptions load_options(const ModelCliOptions& m) {
    LoadOptions o;
    o.runtime.device = parse_device(m.device);
    o.runtime.dtype = parse_compute_dtype(m.dtype);
    check_threads(m.threads);
    o.runtime.n_threads = m.threads;
    o.runtime.widen_at_load = m.widen_weights;
    o.tokenizer = m.tokenizer;
    return o;
}

int compute_threads(const ModelCliOptions& m) {
    check_threads(m.threads);
    return m.threads > 0 ? m.threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {
std::string format_double(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}
// "scale 0.0625, soft-cap 50, final logit soft-cap 30" (scores as spec section 0 defines them).
std::string describe_scores(const ModelConfig& c) {
    std::ostringstream s;
    s << "scale " << c.score_scale();
    if (c.attn_softcap > 0) s << ", soft-cap " << c.attn_softcap << " (cap * tanh(score / cap))";
    if (c.final_softcap > 0) s << ", final logit soft-cap " << c.final_softcap;
    return s.str();
}
// "4096 on layers 0 2 4" when only some layers slide, else the window alone.
std::string describe_window(const ModelConfig& c) {
    std::ostringstream s;
    s << c.window;
    if (c.window > 0 && !c.window_layers.empty()) {
        s << " on layers";
        for (int64_t l : c.window_layers) s << " " << l;
    }
    return s.str();
}
}  // namespace

namespace {

// The memory lines of inspect: the file, its tensor types, and the footprint at each --dtype
// against the memory this machine has (WeightFootprint::load_bytes, Model::load_memory).
void describe_memory(std::ostringstream& s, const model::Model& m) {
    const WeightFootprint& f = m.footprint;
    s << "file_bytes    " << f.file_bytes << " (" << format_bytes(double(f.file_bytes)) << " in "
      << f.n_files << (f.n_files == 1 ? " file" : " files") << ")\n"
      << "tensor_types ";
    for (const auto& [type, count] : f.tensor_types) s << " " << type << " x" << count;
    s << "\nload_memory   ";
    bool first = true;
    for (const auto& [d, bytes] : m.load_memory) {
        s << (first ? "" : ", ") << compute_dtype_name(d) << " " << format_bytes(double(bytes));
        first = false;
    }
    s << " (weights and transient copies; the file's pages are mapped beside them and can be "
         "dropped; activations come on top)\n";
    std::string source;
    const int64_t budget = memory_budget_bytes(&source);
    s << "available     "
      << (budget > 0 ? format_bytes(double(budget)) + " (" + source + ")" : "unknown") << "\n";
}

}  // namespace

std::string inspect_model(const InspectOptions& o) {
    // Metadata only unless --load: every tensor checked, none read (a 3B checkpoint in well
    // under a second).
    LoadOptions options = load_options(o.m);
    options.metadata_only = !o.load_weights;
    const Model m = load_model(o.m.model, options);
    const ModelConfig& c = m.config();
    std::ostringstream s;
    s << "model         " << m.path.string() << "\n"
      << "format        " << weight_format_name(m.format) << "\n"
      << "architecture  " << c.architecture << "\n"
      << "n_layers      " << c.n_layers << "\n"
      << "n_heads       " << c.n_heads << "\n"
      << "n_kv_heads    " << c.n_kv_heads << "\n"
      << "d_model       " << c.d_model << "\n"
      << "d_head        " << c.d_head << "\n"
      << "d_mlp         " << c.d_mlp << "\n"
      << "d_vocab       " << c.d_vocab << "\n"
      << "n_ctx         " << c.n_ctx << "\n"
      << "positions     "
      << (c.positions == PositionKind::Learned
              ? std::string("learned")
              : "rotary (theta " + format_double(c.rope_theta) + ", " +
                    std::to_string(c.rotary_dim > 0 ? c.rotary_dim : c.d_head) + " of " +
                    std::to_string(c.d_head) + " dims)")
      << "\n"
      << "rope_scaling  "
      << (c.positions == PositionKind::Learned ? std::string("none")
                                               : describe_rope_scaling(c.rope_scaling))
      << "\n"
      << "norm          " << (c.norm == NormKind::LayerNorm ? "layernorm" : "rmsnorm") << " (eps "
      << c.norm_eps << ")" << (c.parallel_residual ? ", parallel residual" : "") << "\n"
      << "activation    " << activation_name(c.act) << "\n"
      << "window        " << describe_window(c) << "\n"
      << "attention     " << (c.causal ? "causal" : "bidirectional")
      << (c.attention != AttentionFunction::Softmax
              ? std::string(", ") + attention_function_name(c.attention)
              : std::string())
      << (c.kv_slot ? ", learnable key/value slot" : "") << "\n"
      << "scores        " << describe_scores(c) << "\n"
      << "tied_embed    " << (c.tied_embeddings ? "yes" : "no") << "\n"
      << "device        " << device_name(m.runtime().device) << "\n"
      << "dtype         " << compute_dtype_name(m.runtime().dtype) << "\n"
      << "parameters    " << m.n_params() << "\n";
    describe_memory(s, m);
    if (c.is_vision()) {
        const io::ImageProcessor& p = *m.image_processor();
        s << "image_size    " << c.image_size << "\n"
          << "patch_size    " << c.patch_size << "\n"
          << "n_channels    " << c.n_channels << "\n"
          << "n_tokens      " << c.n_ctx << " (CLS + " << c.n_ctx - 1 << " patches)\n"
          << "labels        " << c.labels.size() << ":";
        for (const auto& l : c.labels) s << " " << l;
        s << "\nimage_proc    " << p.origin << ":";
        if (p.do_resize) s << " resize " << p.height << "x" << p.width << " (bilinear),";
        if (p.do_rescale) s << " rescale " << p.rescale_factor << ",";
        if (p.do_normalize) {
            s << " normalize mean";
            for (double v : p.image_mean) s << " " << v;
            s << " std";
            for (double v : p.image_std) s << " " << v;
        }
        if (!p.do_resize && !p.do_rescale && !p.do_normalize) s << " none";
        s << "\n";
    }
    if (c.is_vision()) {
        s << "tokenizer     none (images)\n";
    } else if (const auto* t = m.tokenizer()) {
        s << "tokenizer     " << t->kind() << " (vocab " << t->vocab_size() << ", bos "
          << t->bos_id() << ", eos " << t->eos_id() << ")\n"
          << "bos_policy    default = " << (t->adds_bos_by_default() ? "prepend BOS" : "no BOS")
          << " (--bos default|always|never)\n";
    } else {
        s << "tokenizer     none (give token ids)\n";
    }
    ModelConfig first_layer = c;  // without --all-hooks: hook_embed and layer 0's hooks
    first_layer.n_layers = 1;
    const auto hooks = list_hooks(o.all_hooks ? c : first_layer);
    s << "hooks         " << list_hooks(c).size() << (o.all_hooks ? "" : " (layer 0 shown)")
      << "\n";
    for (const auto& h : hooks) s << "  " << h << "\n";
    return s.str();
}

std::string generate_text(const GenerateOptions& o) {
    if (o.max_new < 0) throw UsageError("--max-new must be >= 0");
    const Model m = load_model(o.m.model, load_options(o.m));
    if (!m.tokenizer()) throw UnsupportedError(o.m.model, "generate needs a tokenizer");
    const auto prompt = m.encode(o.prompt, tokenizer::parse_bos_policy(o.m.bos));
    if (prompt.empty()) throw UsageError("the prompt encodes to no tokens");
    const int64_t n_ctx = m.config().context_limit();  // none for dynamic NTK RoPE
    if (n_ctx > 0 && o.max_new > n_ctx - int64_t(prompt.size()))
        throw UsageError("--max-new " + std::to_string(o.max_new) + ": the prompt's " +
                         std::to_string(prompt.size()) + " tokens and the new ones would pass " +
                         "the model's context of " + std::to_string(n_ctx) + " tokens (at most " +
                         std::to_string(std::max<int64_t>(0, n_ctx - int64_t(prompt.size()))) +
                         " new tokens)");
    int32_t stop = -1;
    if (o.stop == "eos")
        stop = m.tokenizer()->eos_id();
    else if (o.stop == "bos")
        stop = m.tokenizer()->bos_id();
    else if (o.stop != "none")
        throw UsageError("--stop must be eos, bos or none");
    const auto out = generate_greedy(m, prompt, o.max_new, stop);
    return m.tokenizer()->decode(out) + "\n";
}

bool sliding_perplexity(const Model& m, int64_t stride) {
    if (stride < 0) throw UsageError("--stride must be >= 0 (0: no sliding window)");
    const ModelConfig& cfg = m.config();
    const bool sliding = stride > 0 && cfg.causal && !cfg.is_vision();
    if (!sliding) return false;
    if (cfg.n_ctx < 2)
        throw UnsupportedError(m.path.string(),
                               "--stride: the model's context length is not known "
                               "(no max_position_embeddings / context_length)");
    if (stride > cfg.n_ctx)
        throw UsageError("--stride " + std::to_string(stride) +
                         " is longer than the window, the model's context of " +
                         std::to_string(cfg.n_ctx) + " tokens");
    return true;
}

PerplexityValue evaluate_perplexity(const Model& m,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const std::string& head_mask, int64_t stride,
                                    std::optional<uint64_t> seed, const SampleDone& done) {
    const bool sliding = sliding_perplexity(m, stride);
    const ModelConfig& c = m.config();
    HeadMask mask;
    if (!head_mask.empty()) {
        mask = HeadMask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
        for (const auto& [layer, head] : parse_head_list(head_mask, c.n_layers, c.n_heads))
            mask.ablate(layer, head);
    }
    const HeadMask* ablate = head_mask.empty() ? nullptr : &mask;
    PerplexityValue v;
    if (!c.causal && !c.is_vision()) {
        // An encoder: masked-LM pseudo-perplexity, labelled as such (never a next-token value).
        const MaskedLmOptions mlm{.rate = 0.15, .seed = seed.value_or(0)};
        v.result = compute_masked_perplexity(m, samples, mlm, ablate, done);
        v.pseudo = true;
        v.seed = mlm.seed;
        return v;
    }
    const SlidingWindow window{.length = sliding ? c.n_ctx : 0, .stride = stride};
    v.result = compute_perplexity(m, samples, ablate, window, done);
    v.window_length = window.length;
    v.stride = sliding ? stride : 0;
    return v;
}

namespace {
// The samples of perplexity or dump (--data, --text-column, --max-tokens, --samples, --seed),
// with the note on inputs cut and the warning on fewer samples than asked.
template <class Options>
analysis::AnalysisInputs read_samples(const Model& m, const Options& o,
                                      analysis::OverContext over_context,
                                      tokenizer::BosPolicy bos) {
    analysis::AnalysisInputs in = analysis::load_inputs(m,
                                                        {.data = o.data,
                                                         .text_column = o.text_column,
                                                         .max_tokens = o.max_tokens,
                                                         .over_context = over_context,
                                                         .samples = o.samples,
                                                         .seed = o.seed},
                                                        bos);
    print_note(in.truncation_note());
    print_warning(in.samples_note("--samples"));
    return in;
}
}  // namespace

std::string perplexity_report(const PerplexityOptions& o) {
    if (o.stride < 0) throw UsageError("--stride must be >= 0 (0: no sliding window)");
    auto over_context = analysis::parse_over_context(o.m.over_context);
    const Model m = load_model(o.m.model, load_options(o.m));
    // Long inputs are scored in windows.
    if (sliding_perplexity(m, o.stride)) over_context = analysis::OverContext::Keep;
    const analysis::AnalysisInputs inputs =
        read_samples(m, o, over_context, tokenizer::parse_bos_policy(o.m.bos));
    Progress progress("perplexity", int64_t(inputs.ids.size()), parse_progress_mode(o.progress));
    const PerplexityValue v =
        evaluate_perplexity(m, inputs.ids, o.head_mask, o.stride, o.seed,
                            [&](int64_t n, int64_t tokens) { progress.update(n, tokens); });
    progress.finish();
    const PerplexityResult& r = v.result;
    std::ostringstream s;
    if (v.pseudo) {
        s << "pseudo_perplexity " << format_number(r.perplexity) << "\nmean_nll "
          << format_number(r.mean_nll) << "\nmasked_tokens " << r.n_tokens << "\nsamples "
          << inputs.ids.size() << "\nmasking 15% of each sample's tokens, seed " << v.seed << "\n";
        return s.str();
    }
    s << "perplexity " << format_number(r.perplexity) << "\nmean_nll " << format_number(r.mean_nll)
      << "\ntokens " << r.n_tokens << "\nsamples " << inputs.ids.size() << "\n";
    if (v.window_length > 0)
        s << "sliding window " << v.window_length << ", stride " << v.stride << "\n";
    return s.str();
}

int32_t model_bos_id(const Model& m) {
    const ModelConfig& c = m.config();
    return c.bos_token_id >= 0 ? int32_t(c.bos_token_id)
           : m.tokenizer()     ? m.tokenizer()->bos_id()
                               : -1;
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

std::vector<std::pair<int64_t, int64_t>> parse_head_list(const std::string& spec, int64_t n_layers,
                                                         int64_t n_heads) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const std::string& item : split_list(spec)) {
        const size_t dot = item.find('.');
        int64_t layer = -1, head = -1;
        try {
            size_t a = 0, b = 0;
            if (dot != std::string::npos) {
                layer = std::stoll(item.substr(0, dot), &a);
                head = std::stoll(item.substr(dot + 1), &b);
            }
            if (dot == std::string::npos || a != dot || b != item.size() - dot - 1)
                layer = head = -1;
        } catch (const std::exception&) {
            layer = head = -1;
        }
        if (layer < 0 || head < 0)
            throw UsageError("head '" + item + "' is not LAYER.HEAD (e.g. 0.3)");
        if (layer >= n_layers || head >= n_heads)
            throw UsageError("head '" + item + "' does not exist: the model has " +
                             std::to_string(n_layers) + " layers of " + std::to_string(n_heads) +
                             " heads");
        out.emplace_back(layer, head);
    }
    if (out.empty()) throw UsageError("the head list '" + spec + "' names no head");
    return out;
}

namespace {

// Whether hook `h` is an attention hook ([H, T, T] per sample, positions on dims 1 and 2) and
// which; the others are [T, ...] (positions on dim 0).
bool attention_hook(const ModelConfig& c, const std::string& h, HookPoint* p) {
    for (HookPoint q : {HookPoint::Pattern, HookPoint::AttnScores})
        for (int64_t l = 0; l < c.n_layers; ++l)
            if (h == hook_name(q, l)) {
                if (p) *p = q;
                return true;
            }
    return false;
}

// Every captured hook of every input, on the host in f32, padded to `t_max` positions: attention
// keys and queries (scores with -inf, the pattern with 0), other hooks on their positions (0).
// `edits` (may be null): the editing hooks of input i (dump --intervene).
std::map<std::string, std::vector<at::Tensor>> capture_padded(
    const Model& m, const std::vector<ModelInput>& inputs, const std::vector<int64_t>& lengths,
    const CaptureSpec& spec, int64_t t_max, Progress::Mode progress_mode,
    const RunInterventions* edits) {
    std::map<std::string, std::vector<at::Tensor>> per_hook;  // name -> N tensors
    Progress progress("dump", int64_t(inputs.size()), progress_mode);
    int64_t tokens = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        CaptureSpec with_edits = spec;
        if (edits) with_edits.add_edits(edits->edits_for(i));
        const ForwardResult r = m.forward(inputs[i], with_edits);
        progress.update(int64_t(i) + 1, tokens += lengths[i]);
        const int64_t pad = t_max - lengths[i];
        for (const auto& [name, t] : r.captured) {
            HookPoint p{};
            at::Tensor x = t[0].to(at::kCPU, at::kFloat);  // drop batch
            if (attention_hook(m.config(), name, &p)) {
                const double fill = p == HookPoint::AttnScores ? -INFINITY : 0.0;
                x = at::constant_pad_nd(x, {0, pad, 0, pad}, fill);
            } else {
                std::vector<int64_t> pads(static_cast<size_t>(2 * x.dim()), 0);
                pads.back() = pad;  // last pair pads dim 0 (positions)
                x = at::constant_pad_nd(x, pads, 0.0);
            }
            per_hook[name].push_back(x.contiguous());
        }
    }
    return per_hook;
}

// The hooks as .npy files in `dir`: the pattern and scores of every layer stacked into
// attention.npy / attn_scores.npy [N, L, H, T, T], each other hook its own file [N, ...];
// returns {file: hook}.
nlohmann::json write_hooks(OutputDir& dir, const ModelConfig& c,
                           std::map<std::string, std::vector<at::Tensor>> per_hook) {
    auto write = [&](const std::string& file, const at::Tensor& t) {  // t: host f32 contiguous
        std::vector<float> v(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
        io::write_npy(dir.file(file), io::make_npy_f32(t.sizes().vec(), v));
    };
    nlohmann::json files = nlohmann::json::object();
    for (HookPoint p : {HookPoint::Pattern, HookPoint::AttnScores}) {
        bool every_layer = true;
        for (int64_t l = 0; l < c.n_layers; ++l)
            every_layer = every_layer && per_hook.count(hook_name(p, l));
        if (!every_layer) continue;
        std::vector<at::Tensor> layers;  // each [N, H, T, T]
        for (int64_t l = 0; l < c.n_layers; ++l) {
            layers.push_back(at::stack(per_hook.at(hook_name(p, l))));
            per_hook.erase(hook_name(p, l));
        }
        const std::string file = p == HookPoint::Pattern ? "attention.npy" : "attn_scores.npy";
        write(file, at::stack(layers, 1).contiguous());  // [N, L, H, T, T]
        files[file] = hook_glob(p);
    }
    for (const auto& [name, list] : per_hook) {
        write(name + ".npy", at::stack(list).contiguous());
        files[name + ".npy"] = name;
    }
    return files;
}

}  // namespace

std::string dump_hooks(const DumpOptions& o) {
    if (o.out.empty()) throw UsageError("--out is required");
    const auto over_context = analysis::parse_over_context(o.m.over_context);
    check_output_dir(o.out, o.overwrite);  // before the model runs
    const Model m = load_model(o.m.model, load_options(o.m));
    const ModelConfig& c = m.config();
    const auto bos = tokenizer::parse_bos_policy(o.m.bos);
    // Text models: token ids per sample; vision models: one image per sample (T = 1 + patches).
    const analysis::AnalysisInputs data = read_samples(m, o, over_context, bos);
    std::vector<ModelInput> inputs;
    std::vector<int64_t> lengths;
    for (size_t k = 0; k < data.size(); ++k) {
        inputs.push_back(data.model_input(m, k));
        lengths.push_back(data.n_tokens(k));
    }
    CaptureSpec spec = CaptureSpec::parse(o.hooks);
    spec.without_logits();  // dump writes hooks only
    const std::vector<std::string> hooks = list_hooks(c);
    if (std::none_of(hooks.begin(), hooks.end(), [&](const auto& h) { return spec.wants(h); }))
        throw UsageError("--hooks " + quote(o.hooks) +
                         " selects no hook of this model (`sinkscope inspect --model " +
                         quote(o.m.model) + " --all-hooks` lists them)");
    int64_t t_max = 0;
    for (int64_t len : lengths) t_max = std::max(t_max, len);
    std::optional<RunInterventions> edits;
    if (!o.intervene.empty()) {
        edits.emplace(m, data, parse_interventions(o.intervene, c), model_bos_id(m));
    }
    auto per_hook = capture_padded(m, inputs, lengths, spec, t_max, parse_progress_mode(o.progress),
                                   edits ? &*edits : nullptr);

    OutputDir dir(o.out, o.overwrite);
    const nlohmann::json files = write_hooks(dir, c, std::move(per_hook));
    const auto n_inputs = static_cast<int64_t>(inputs.size());
    if (!c.is_vision()) {  // images have no token ids
        std::vector<int64_t> tokens(static_cast<size_t>(n_inputs * t_max), -1);
        for (size_t i = 0; i < data.ids.size(); ++i)
            std::copy(data.ids[i].begin(), data.ids[i].end(), tokens.begin() + i * t_max);
        io::write_npy(dir.file("tokens.npy"), io::make_npy_i64({n_inputs, t_max}, tokens));
    }
    io::write_npy(dir.file("lengths.npy"), io::make_npy_i64({n_inputs}, lengths));

    io::RunRecord rec("dump", compute_threads(o.m));
    rec.set_model_files(o.m.model, m.files);
    rec.set("architecture", c.architecture);
    rec.set("device", device_name(m.runtime().device));
    rec.set("dtype", compute_dtype_name(m.runtime().dtype));
    rec.set("bos_policy", tokenizer::bos_policy_name(bos));
    rec.set("data", o.data);
    rec.set("n_samples", inputs.size());
    if (c.is_vision()) {
        rec.set("data_kind", "images");
        rec.set("image_processor", m.image_processor()->origin);
    }
    rec.set("hooks", o.hooks);
    rec.set("intervention", edits ? nlohmann::json{{"spec", edits->plan().text()},
                                                   {"edits", edits->plan().record()}}
                                  : nlohmann::json(nullptr));
    rec.set("files", files);
    rec.set("padding",
            "positions beyond lengths[n]: pattern and other hooks 0, scores -inf, "
            "tokens -1");
    rec.write(dir.staging());
    dir.commit();
    return dir.final_path().string();
}

}  // namespace sinkscope::api
