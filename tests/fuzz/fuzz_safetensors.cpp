// safetensors files (JSON header + data) and model.safetensors.index.json with its shards.
// Input: the bytes of model.safetensors; or, when it starts with '{', an index file, beside two
// small valid shards (a.safetensors, b.safetensors) and a folder it must not leave.
#include "bad_input_files.hpp"
#include "fuzz_common.hpp"
#include "sinkscope/io/weights.hpp"

using namespace sinkscope;

namespace {

std::string shard(const std::string& name) {
    return testutil::safetensors_bytes(
        "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        std::string(8, '\0'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes = fuzz::as_view(data, size);
    if (bytes.starts_with("{")) {
        const auto dir = fuzz::fresh_dir("model");
        fuzz::write_file(dir / "a.safetensors", shard("x"));
        fuzz::write_file(dir / "b.safetensors", shard("y"));
        std::filesystem::create_directories(dir.parent_path() / "outside");
        fuzz::write_file(dir.parent_path() / "outside" / "c.safetensors", shard("z"));
        const auto index = fuzz::write_file(dir / "model.safetensors.index.json", bytes);
        fuzz::expect_clean([&] { fuzz::read_tensors(*io::open_safetensors(index)); });
        return 0;
    }
    const auto path = fuzz::write_file(fuzz::scratch_dir() / "model.safetensors", bytes);
    fuzz::expect_clean([&] { fuzz::read_tensors(*io::open_safetensors(path)); });
    return 0;
}
