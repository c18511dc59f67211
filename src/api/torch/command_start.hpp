// What a model command (analyze, prune, fisher) settles before its model loads, in one place:
// the progress mode, the over-context and BOS policies parsed (usage errors name the flag), and
// this rank's output folder checked, so that nothing of the user's is replaced and a bad option
// costs no model load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/api/distributed.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"

namespace sinkscope::api {

struct CommandStart {
    Progress::Mode progress{};
    analysis::OverContext over_context{};
    tokenizer::BosPolicy bos{};
    std::filesystem::path out;  // this rank's output folder (rank_output)
};

// `check_out`: whether this rank writes its folder (a later stage of a pipeline of layer ranks
// writes nothing).
inline CommandStart start_command(const ModelCliOptions& m, const std::string& progress,
                                  const std::filesystem::path& out, bool overwrite, int64_t rank,
                                  bool check_out = true) {
    CommandStart s;
    s.progress = parse_progress_mode(progress);
    s.over_context = analysis::parse_over_context(m.over_context);
    s.out = rank_output(out, rank);
    if (check_out) check_output_dir(s.out, overwrite);  // before the model loads
    s.bos = tokenizer::parse_bos_policy(m.bos);
    return s;
}

}  // namespace sinkscope::api
