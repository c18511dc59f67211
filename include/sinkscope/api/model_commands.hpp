// The model subcommands as library functions (inspect, generate, perplexity, dump): each CLI
// file binds one of these option structs and calls one function.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sinkscope::model {
struct LoadOptions;
class Model;
}  // namespace sinkscope::model

namespace sinkscope::api {

// Options every model subcommand shares.
struct ModelCliOptions {
    std::string model;              // HF directory, .gguf or llama2.c .bin
    std::string device = "cpu";     // cpu | cuda
    std::string dtype = "float32";  // float32 | bfloat16 | float16 | float64
    std::string tokenizer;          // tokenizer file overriding the one beside the weights
    std::string bos = "default";    // default | always | never
    int threads = 0;                // torch intra-op and analysis threads; 0 = all cores
    // --widen-weights: every weight converted to the dtype at load
    // (model::RuntimeOptions::widen_at_load)
    bool widen_weights = false;
    // Text inputs longer than the model's context: cap (cut to it, counted on the console) or
    // refuse (an input error). Commands that feed no data ignore it.
    std::string over_context = "cap";
};

// `line` as "sinkscope: note: LINE" on stderr (nothing when empty): what the user should know
// about a run that is not an error (inputs cut, a resume that found nothing).
void print_note(const std::string& line);
// `line` as "sinkscope: warning: LINE" on stderr (nothing when empty): the run goes on, but not
// quite as asked (e.g. fewer samples than --samples asked for).
void print_warning(const std::string& line);
// While one is alive, print_note and print_warning print each distinct line once (dynamics: the
// same note of every checkpoint's run is said once, not once per checkpoint).
class EachNoteOnce {
public:
    EachNoteOnce();
    ~EachNoteOnce();
    EachNoteOnce(const EachNoteOnce&) = delete;
    EachNoteOnce& operator=(const EachNoteOnce&) = delete;

private:
    std::set<std::string> said_;
    std::set<std::string>* outer_;  // the enclosing one's lines, restored at the end
};

// Device, dtype, threads and tokenizer of ModelCliOptions as load_model options.
model::LoadOptions load_options(const ModelCliOptions& m);

// The model's BOS token id: config.json's bos_token_id, else its tokenizer's; -1 without either.
int32_t model_bos_id(const model::Model& m);

// The thread count a model command computes with: --threads, or the machine's core count for 0
// (model::set_compute_threads' rule). run.json records it.
int compute_threads(const ModelCliOptions& m);

struct InspectOptions {
    ModelCliOptions m;
    bool all_hooks = false;  // list every hook instead of layer 0's
    // Read and convert every weight as a run does (the memory check included); otherwise the
    // metadata only (LoadOptions::metadata_only).
    bool load_weights = false;
};
// Human-readable description: architecture, dims, dtype, tokenizer, BOS policy, hooks, params.
std::string inspect_model(const InspectOptions& o);

struct GenerateOptions {
    ModelCliOptions m;
    std::string prompt;
    int64_t max_new = 64;
    std::string stop = "eos";  // eos | bos | none: token that ends generation (not printed)
};
// Greedy continuation; returns the decoded prompt + continuation followed by a newline.
std::string generate_text(const GenerateOptions& o);

struct PerplexityOptions {
    ModelCliOptions m;
    std::string data;                  // plain text (one sample per line), JSONL, CSV or .npy ids
    std::string text_column = "text";  // CSV column
    int64_t samples = 0;               // 0: all
    std::optional<uint64_t> seed;      // set: `samples` drawn at random with this seed
    int64_t max_tokens = 0;            // inputs cut to this many tokens (0: no cut)
    std::string progress = "auto";     // auto | always | never
    std::string head_mask;             // "LAYER.HEAD,..." heads ablated (z = 0); empty: none
    // > 0 (decoders): sliding-window evaluation with windows of the model's context moved by
    // `stride` tokens; inputs longer than the context are then scored whole, not cut.
    int64_t stride = 0;
};
// Decoders: "perplexity P\nmean_nll X\ntokens N\nsamples S\n" (with a stride, a last line
// "sliding window W, stride S"); encoders: the masked-LM
// pseudo-perplexity (15% of tokens, seed = `seed` or 0) as "pseudo_perplexity P\n...". Numbers in
// shortest round-trip form. Vision models are refused.
std::string perplexity_report(const PerplexityOptions& o);

struct DumpOptions {
    ModelCliOptions m;
    std::string data;
    std::string hooks = "blocks.*.attn.hook_pattern";  // comma-separated globs / re:regex
    std::string intervene;  // edits of the forward (api/interventions.hpp); empty: none
    std::string out;
    bool overwrite = false;            // replace an earlier sinkscope run at `out`
    std::string text_column = "text";  // CSV column
    int64_t samples = 0;               // 0: all
    std::optional<uint64_t> seed;      // set: `samples` drawn at random with this seed
    int64_t max_tokens = 0;            // inputs cut to this many tokens (0: no cut)
    std::string progress = "auto";     // auto | always | never
};
// Writes <out>/<hook>.npy (N, ...) f32 per hook, attention.npy (N, L, H, T, T) when every
// layer's hook_pattern is selected (attn_scores.npy likewise), tokens.npy, lengths.npy and
// run.json; staged, so a failure leaves no output. Returns the output directory.
std::string dump_hooks(const DumpOptions& o);

// Items of a comma-separated list, empty items dropped ("a,,b" -> a, b).
std::vector<std::string> split_list(const std::string& s);

// A head list written by hand: "LAYER.HEAD" items separated by commas ("0.3,1.0"); UsageError
// naming the item when one is malformed or outside n_layers x n_heads.
std::vector<std::pair<int64_t, int64_t>> parse_head_list(const std::string& spec, int64_t n_layers,
                                                         int64_t n_heads);

}  // namespace sinkscope::api
