// Writes the seeds of fuzz_state (tests/fuzz/corpus/state/): the state an `analyze` run saves
// after one input of a 2-layer, 2-head model, sealed as a state file (byte 0 = 0) and as the bare
// payload (byte 0 = 1). Built with the fuzz targets; run once after the state layout changes:
//     build-san/tests/fuzz/fuzz_state_seeds tests/fuzz/corpus/state
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/serialize.hpp"
#include "synthetic_attention.hpp"

using namespace sinkscope;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: fuzz_state_seeds OUT_DIR\n";
        return 2;
    }
    const std::filesystem::path out = argv[1];
    std::filesystem::create_directories(out);
    analysis::AnalysisOptions options;
    const auto resolved = analysis::resolve(options, analysis::InputCapabilities{});
    analysis::AnalysisPipeline pipeline(2, 2, resolved, "m", "model");
    for (uint64_t seed : {1, 2})
        pipeline.add(testutil::random_input(seed, 2, 2, 6, metrics::Masking::Causal, true));
    BinaryWriter w;
    w.put<int64_t>(2);
    pipeline.save(w);
    // The fingerprint and format fuzz_state.cpp checks against.
    const nlohmann::json print = {{"model", "m"}, {"inputs", 3}};
    std::ofstream(out / "sealed.bin", std::ios::binary)
        << '\0' << api::seal_state({"analyze", 4}, print, w.bytes());
    std::ofstream(out / "payload.bin", std::ios::binary) << '\1' << w.bytes();
    std::cout << "wrote " << (out / "sealed.bin") << " and " << (out / "payload.bin") << "\n";
    return 0;
}
