// The option vocabulary: an idea that several commands share is one flag with one meaning and
// one help text, defined here once (the analysis options come from the registry instead, and
// the model options from model_options.hpp). tests/cli/integration_vocabulary.cpp walks every
// command's --help and checks that each shared flag reads the same everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "command.hpp"
#include "sinkscope/analysis/options.hpp"

namespace sinkscope::cli {

// --data of every command that reads samples; `required` false: the command has a default data
// set, which its description names.
template <class Path>  // std::string or std::filesystem::path
CLI::Option* add_data_option(CLI::App* cmd, Path& data, bool required) {
    CLI::Option* opt =
        cmd->add_option("--data", data,
                        "Samples: .txt (one per line), .jsonl (text or ids), .csv (--text-column) "
                        "or .npy token ids; vision models: a .png, a directory of .png files or "
                        "a .npy image stack")
            ->check(existing(Existing::Path));
    if (required) opt->required();
    return opt;
}

// --out of every command that writes a folder: runs/<command> unless given; `how` says how the
// folder is written.
inline constexpr const char* kWrittenWhole = "written whole or not at all";
template <class Path>  // std::string or std::filesystem::path
void add_out_option(CLI::App* cmd, Path& out, const std::string& how = kWrittenWhole) {
    out = "runs/" + cmd->get_name();
    cmd->add_option("--out", out, "Output directory (" + how + ")")->capture_default_str();
}

// --text-column of the commands that read CSV data.
inline void add_text_column_option(CLI::App* cmd, std::string& column) {
    cmd->add_option("--text-column", column, "CSV column holding the text")->capture_default_str();
}

// --samples N; `alias` adds the command's former name for it, hidden from --help.
inline void add_samples_option(CLI::App* cmd, int64_t& samples, const char* alias = nullptr) {
    cmd->add_option("--samples", samples,
                    "Use N samples (0: all): the first N, or with --seed a random subset")
        ->capture_default_str();
    if (alias) cmd->add_option(alias, samples, "Former name of --samples")->group("");
}

// --seed, unset unless given (analysis::kSeedHelp says what unset means).
inline void add_seed_option(CLI::App* cmd, std::optional<uint64_t>& seed) {
    cmd->add_option("--seed", seed, analysis::kSeedHelp);
}
// The same flag for a command whose seed has a fixed value when not given (prune, train): the
// value is replaced only when --seed is given, and --help shows no default, as above.
inline void add_seed_option(CLI::App* cmd, uint64_t& seed) {
    cmd->add_option_function<uint64_t>(
        "--seed", [&seed](const uint64_t& v) { seed = v; }, analysis::kSeedHelp);
}

// --max-tokens; the default is the command's (its memory and time grow with the length).
inline void add_max_tokens_option(CLI::App* cmd, int64_t& max_tokens) {
    cmd->add_option("--max-tokens", max_tokens,
                    "Cut every input to its first N tokens (0: no cut; inputs longer than the "
                    "model's context follow --over-context)")
        ->capture_default_str();
}

// --threads; results do not depend on it, except train's (the same weights need the same --seed
// and --threads, which train's description says).
inline void add_threads_option(CLI::App* cmd, int& threads) {
    cmd->add_option("--threads", threads, analysis::kThreadsHelp)->capture_default_str();
}

// --intervene of the commands that run the model over a prompt set (analyze, dynamics, dump):
// editing hooks of the forward (api/interventions.hpp).
inline void add_intervene_option(CLI::App* cmd, std::string& spec) {
    cmd->add_option(
        "--intervene", spec,
        "Run the model with its forward edited ('A;B' for several): sink_removal"
        "[:renormalize=yes|no] (the sink's attention removed, rows renormalised), "
        "sink_key:scale=X or sink_value:scale=X (the sink position's key or value scaled), "
        "head_ablation:mode=zero|mean|resample:heads=L.H,... (head outputs replaced); sink_* "
        "also take :layers=0,2-3 and :sink=first|bos|argmax|N (default: --sink, else first); "
        "run.json records the edits");
}

inline void add_resume_flag(CLI::App* cmd, bool& resume) {
    cmd->add_flag("--resume", resume,
                  "Continue an interrupted run of the same command from its last saved state");
}

// --progress and --quiet of the commands that show progress (parsed by api::parse_progress_mode).
inline void add_progress_options(CLI::App* cmd, std::string& progress) {
    cmd->add_option("--progress", progress,
                    "Progress line on stderr: auto (when stderr is a terminal), always, never")
        ->capture_default_str();
    cmd->add_flag_callback(
        "--quiet", [&progress] { progress = "never"; }, "Same as --progress never");
}

}  // namespace sinkscope::cli
