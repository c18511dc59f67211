// Model path classification: what the user pointed --model at, decided by directory contents
// and file magic (not by extension alone), with one clear error when nothing matches.
#include "sinkscope/io/model_files.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/torch_pickle.hpp"

namespace sinkscope::io {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_expected =
    "expected a Hugging Face model directory (config.json + model.safetensors or "
    "pytorch_model.bin), a .gguf file or a llama2.c .bin checkpoint";

// First bytes of a file (fewer when it is shorter).
std::string file_head(const fs::path& p, size_t n) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw IoError(p.string(), "cannot open");
    std::string s(n, '\0');
    f.read(s.data(), std::streamsize(n));
    s.resize(size_t(f.gcount()));
    return s;
}

// What `p` is, without the throwing overloads of std::filesystem: a path the system cannot
// examine (a symbolic link loop, a refused permission, a name too long) is an InputError naming
// it; a missing one is file_type::not_found.
fs::file_status status_of(const fs::path& p) {
    std::error_code ec;
    const fs::file_status s = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        throw InputError(p.string(), "cannot be read: " + ec.message());
    return s;
}

fs::path first_existing(const fs::path& dir, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (fs::is_regular_file(status_of(dir / n))) return dir / n;
    return {};
}

ModelFiles hf_directory(const fs::path& dir) {
    ModelFiles m;
    m.format = ModelFormat::HfDirectory;
    m.root = dir;
    m.config = dir / "config.json";
    m.weights = first_existing(dir, {"model.safetensors.index.json", "model.safetensors"});
    if (m.weights.empty()) {
        m.weights = first_existing(dir, {"pytorch_model.bin.index.json", "pytorch_model.bin"});
        m.weights_format = WeightsFormat::PytorchBin;
    }
    SS_CHECK_INPUT(!m.weights.empty(), dir.string(),
                   "has config.json but no model.safetensors, model.safetensors.index.json or "
                   "pytorch_model.bin");
    m.tokenizer =
        first_existing(dir, {"tokenizer.json", "tokenizer.model", "sentencepiece.bpe.model"});
    m.preprocessor = first_existing(dir, {"preprocessor_config.json"});
    return m;
}

ModelFiles gguf_file(const fs::path& file) {
    ModelFiles m;
    m.format = ModelFormat::Gguf;
    m.root = m.weights = m.tokenizer = file;
    m.weights_format = WeightsFormat::Gguf;
    return m;
}

ModelFiles llama2c_file(const fs::path& file) {
    Llama2cHeader h{};
    open_llama2c(file, &h);  // validates header and size; throws InputError naming the file
    ModelFiles m;
    m.format = ModelFormat::Llama2c;
    m.root = m.weights = file;
    m.weights_format = WeightsFormat::Llama2c;
    const fs::path dir = file.parent_path();
    const std::string tok = "tok" + std::to_string(std::abs(int64_t(h.vocab_size))) + ".bin";
    m.tokenizer = first_existing(dir, {tok.c_str(), "tokenizer.bin"});
    return m;
}

bool is_hf_member(const fs::path& file) {
    const std::string n = file.filename().string();
    return n == "config.json" || n == "model.safetensors" || n == "pytorch_model.bin" ||
           n == "model.safetensors.index.json" || n == "pytorch_model.bin.index.json";
}

}  // namespace

const char* model_format_name(ModelFormat f) {
    switch (f) {
        case ModelFormat::HfDirectory:
            return "hf";
        case ModelFormat::Gguf:
            return "gguf";
        case ModelFormat::Llama2c:
            return "llama2c";
    }
    return "?";
}

const char* weights_format_name(WeightsFormat f) {
    switch (f) {
        case WeightsFormat::Safetensors:
            return "safetensors";
        case WeightsFormat::PytorchBin:
            return "pytorch_bin";
        case WeightsFormat::Gguf:
            return "gguf";
        case WeightsFormat::Llama2c:
            return "llama2c";
    }
    return "?";
}

ModelFiles locate_model(const std::filesystem::path& path) {
    const std::string p = path.string();
    const fs::file_status st = status_of(path);
    SS_CHECK_INPUT(fs::exists(st), p, "no such file or directory (", k_expected, ")");
    if (fs::is_directory(st)) {
        if (fs::is_regular_file(status_of(path / "config.json"))) return hf_directory(path);
        std::vector<fs::path> ggufs;
        std::error_code ec;
        for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().extension() == ".gguf" && fs::is_regular_file(status_of(it->path())))
                ggufs.push_back(it->path());
        if (ec) throw InputError(p, "cannot list the directory: " + ec.message());
        if (ggufs.size() == 1) return gguf_file(ggufs.front());
        SS_CHECK_INPUT(ggufs.empty(), p, "holds ", ggufs.size(),
                       " .gguf files and no config.json: name the file to use");
        throw InputError(p, std::string("directory has no config.json (") + k_expected + ")");
    }
    SS_CHECK_INPUT(fs::is_regular_file(st), p, "not a regular file (", k_expected, ")");
    const std::string head = file_head(path, 4);
    if (head == "GGUF") return gguf_file(path);
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    if (is_hf_member(path) && fs::is_regular_file(status_of(dir / "config.json")))
        return hf_directory(dir);
    if (path.extension() == ".bin") {
        SS_CHECK_INPUT(head.rfind("PK", 0) != 0, p,
                       "is a PyTorch zip checkpoint without config.json beside it (", k_expected,
                       ")");
        return llama2c_file(path);
    }
    if (path.extension() == ".safetensors")
        throw InputError(p, "is a safetensors file but " + dir.string() + " has no config.json");
    throw InputError(p, std::string("not a recognised model file (") + k_expected + ")");
}

std::unique_ptr<WeightStore> open_weights(const ModelFiles& files) {
    switch (files.weights_format) {
        case WeightsFormat::Safetensors:
            return open_safetensors(files.weights);
        case WeightsFormat::Gguf:
            return open_gguf_weights(files.weights);
        case WeightsFormat::Llama2c:
            return open_llama2c(files.weights, nullptr);
        case WeightsFormat::PytorchBin:
            return open_pytorch_bin(files.weights);
    }
    throw InternalError("open_weights: unknown weights format");
}

}  // namespace sinkscope::io
