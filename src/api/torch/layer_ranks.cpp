#include "layer_ranks.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/serialize.hpp"

namespace sinkscope::api {

namespace {

// The dtypes a forward captures or hands on (float32, bfloat16, float16, float64; int64 ids are
// not sent), by a code of their own so the bytes do not depend on libtorch's enum.
constexpr std::pair<uint8_t, at::ScalarType> kDtypes[] = {
    {1, at::kFloat}, {2, at::kBFloat16}, {3, at::kHalf}, {4, at::kDouble}};

uint8_t dtype_code(at::ScalarType t) {
    for (const auto& [code, type] : kDtypes)
        if (type == t) return code;
    throw InternalError(std::string("a stage cannot send a tensor of dtype ") + c10::toString(t));
}

}  // namespace

std::pair<int64_t, int64_t> layer_stage(int64_t n_layers, int64_t stage, int64_t stages) {
    if (stages > n_layers)
        throw UsageError("--split layers with " + std::to_string(stages) +
                         " processes per model: the model has " + std::to_string(n_layers) +
                         " layers, so some process would hold none; use at most " +
                         std::to_string(n_layers) + " (--stages)");
    return shard_range(n_layers, stage, stages);
}

std::string tensors_to_bytes(const std::map<std::string, at::Tensor>& tensors) {
    BinaryWriter w;
    w.put<uint64_t>(tensors.size());
    for (const auto& [name, t] : tensors) {
        const at::Tensor host = t.to(at::kCPU).contiguous();
        w.put_string(name);
        w.put<uint8_t>(dtype_code(host.scalar_type()));
        w.put_vector(std::vector<int64_t>(host.sizes().begin(), host.sizes().end()));
        w.put_bytes(host.data_ptr(), host.nbytes());
    }
    return w.bytes();
}

std::map<std::string, at::Tensor> tensors_from_bytes(const std::string& bytes,
                                                     const std::string& origin) {
    BinaryReader r(bytes, origin);
    std::map<std::string, at::Tensor> out;
    for (auto n = r.get<uint64_t>(); n > 0; --n) {
        std::string name = r.get_string();
        const auto code = r.get<uint8_t>();
        const auto* found = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                         [&](const auto& d) { return d.first == code; });
        if (found == std::end(kDtypes)) r.fail("unknown dtype code " + std::to_string(code));
        const std::vector<int64_t> shape = r.get_vector<int64_t>();
        const std::string_view data = r.get_bytes();
        int64_t count = 1;
        for (int64_t d : shape) {
            if (d < 0 || (d > 0 && count > (int64_t(1) << 62) / d))
                r.fail("tensor " + quote(name) + " has an impossible shape");
            count *= d;
        }
        const auto element = static_cast<int64_t>(c10::elementSize(found->second));
        if (static_cast<int64_t>(data.size()) != count * element)
            r.fail("tensor " + quote(name) + " has " + std::to_string(data.size()) + " bytes for " +
                   std::to_string(count) + " values");
        at::Tensor t = at::empty(shape, at::TensorOptions().dtype(found->second));
        if (!data.empty()) std::memcpy(t.data_ptr(), data.data(), data.size());
        if (!out.emplace(std::move(name), std::move(t)).second) r.fail("a tensor named twice");
    }
    if (!r.at_end()) r.fail("bytes after the last tensor");
    return out;
}

model::ForwardResult staged_forward(const model::Model& m, model::ModelInput input,
                                    const model::CaptureSpec& capture, Communicator& comm,
                                    int64_t stages) {
    const int64_t stage = comm.rank() % stages, first = comm.rank() - stage;
    const auto [begin, end] = layer_stage(m.config().n_layers, stage, stages);
    // The stream entering this stage, from the rank before (model.hpp LayerRange).
    if (stage > 0) {
        auto got =
            tensors_from_bytes(comm.recv(comm.rank() - 1),
                               "the residual stream of rank " + std::to_string(comm.rank() - 1));
        if (!got.count("residual")) throw InternalError("a stage sent no residual stream");
        input.stage.residual = got.at("residual");  // the stage moves it to the model's device
    }
    input.stage.begin = begin;
    input.stage.end = end;
    model::ForwardResult mine = m.forward(input, capture);
    if (stage + 1 < stages) {
        comm.send(tensors_to_bytes({{"residual", mine.residual}}), comm.rank() + 1);
        mine.residual = at::Tensor();
    }
    if (stage > 0) {
        std::string bytes = tensors_to_bytes(mine.captured);
        mine.captured.clear();  // only the bytes are needed now (peak memory)
        comm.send(bytes, first);
        return {};
    }
    // The pipeline's first rank: every later stage's hooks, in stage order (each hook belongs to
    // one stage).
    for (int64_t k = 1; k < stages; ++k) {
        const std::string origin = "the hooks of rank " + std::to_string(first + k);
        for (auto& [name, t] : tensors_from_bytes(comm.recv(first + k), origin))
            if (!mine.captured.emplace(name, std::move(t)).second)
                throw InternalError("hook " + name + " was captured by two stages");
    }
    return mine;
}

}  // namespace sinkscope::api
