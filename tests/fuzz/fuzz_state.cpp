// The state file of an interrupted `analyze` (out.partial/state.bin): the sealed header (kind,
// version, payload size, SHA-256, fingerprint) and, behind it, the analyses' saved sums. Byte 0
// chooses: even = a whole state file (the rest of the input); odd = a payload as it would be
// after a matching checksum (an edited file with a recomputed SHA-256), loaded into a pipeline
// of every analysis that needs no hidden states, for a 2-layer, 2-head model.
#include "fuzz_common.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/serialize.hpp"

using namespace sinkscope;

namespace {

constexpr api::StateFormat kFormat{"analyze", 4};

const nlohmann::json& fingerprint() {
    static const nlohmann::json f = {{"model", "m"}, {"inputs", 3}};
    return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        static OutputDir out = OutputDir::resumable(fuzz::scratch_dir() / "out", false);
        fuzz::expect_clean(
            [&] {
                (void)api::open_state(rest, out.file("state.bin"), kFormat, fingerprint(), out);
            },
            /*usage_ok=*/true);
        return 0;
    }
    fuzz::expect_clean([&] {
        analysis::AnalysisOptions options;
        const auto resolved = analysis::resolve(options, analysis::InputCapabilities{});
        analysis::AnalysisPipeline pipeline(2, 2, resolved, "m", "model");
        BinaryReader r(rest, "state.bin");
        (void)r.get<int64_t>();
        pipeline.load(r);
    });
    return 0;
}
