// Weights of a GGUF file as a WeightStore: views into the mapping for every GGML type the table in
// ggml_quant.hpp gives a WeightDType (F32, F16, BF16, F64, I32, I64 and the quantized types,
// dequantized by convert_to_f32); any other type is listed but get() throws
// "not supported: TYPE in TENSOR". GGUF dims are ne[] order (ne[0] fastest), so the shape is
// reversed into PyTorch order: a Linear weight with ne = [in, out] becomes [out, in].
#include <map>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/ggml_quant.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

namespace {

namespace fs = std::filesystem;

class GgufStore final : public WeightStore {
public:
    explicit GgufStore(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
        const std::string path = file_->path().string();
        for (const GgufTensorInfo& t : file_->tensors()) {
            SS_CHECK_INPUT(!index_.count(t.name), path, "tensor ", quote(t.name), " appears twice");
            index_.emplace(t.name, &t);
            order_.push_back(t.name);
        }
    }

    std::vector<std::string> names() const override { return order_; }
    bool has(const std::string& name) const override { return index_.count(name) != 0; }
    TensorView get(const std::string& name) const override {
        auto it = index_.find(name);
        if (it == index_.end())
            throw InputError(file_->path().string(), "no tensor named " + quote(name));
        const GgufTensorInfo& t = *it->second;
        const GgmlTypeInfo* info = ggml_type_info(t.type);
        if (!info || !info->dtype) {
            const std::string type_name =
                info ? std::string(info->name) : "GGML type " + std::to_string(t.type);
            throw UnsupportedError(file_->path().string(), type_name + " in " + quote(name));
        }
        TensorView v;
        v.name = name;
        v.dtype = *info->dtype;
        v.shape.assign(t.dims.rbegin(), t.dims.rend());  // ne[] -> PyTorch order
        v.data = file_->tensor_data(t);
        v.n_bytes = size_t(t.n_bytes);
        v.file = file_->path();
        v.owner = file_;
        return v;
    }
    std::vector<fs::path> files() const override { return {file_->path()}; }

private:
    std::shared_ptr<const GgufFile> file_;
    std::vector<std::string> order_;  // file order
    std::map<std::string, const GgufTensorInfo*> index_;
};

}  // namespace

std::unique_ptr<WeightStore> open_gguf_weights(std::shared_ptr<const GgufFile> file) {
    SS_CHECK(file != nullptr, "open_gguf_weights: null GgufFile");
    return std::make_unique<GgufStore>(std::move(file));
}

std::unique_ptr<WeightStore> open_gguf_weights(const std::filesystem::path& path) {
    return open_gguf_weights(std::make_shared<const GgufFile>(path));
}

}  // namespace sinkscope::io
