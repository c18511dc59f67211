// Writes analysis outputs into a run directory (run_outputs.hpp).
#include "sinkscope/api/run_outputs.hpp"

namespace sinkscope::api {

void write_outputs(const analysis::PipelineResults& results, const std::filesystem::path& dir) {
    for (const auto& [name, out] : results.outputs) analysis::write_output(out, dir);
}

}  // namespace sinkscope::api
