// llama2.c checkpoints in the layout read by karpathy/llama2.c run.c (legacy export, "version
// 0"): a header of 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; vocab_size < 0 means an unshared classifier), then fp32 tensors back to back in
// the order of run.c's memory_map_weights(). The file size must equal what the header implies.
#include <cstring>
#include <limits>
#include <map>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/mmap_file.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

namespace {

namespace fs = std::filesystem;

constexpr uint32_t k_export_magic = 0x616b3432;  // "ak42": llama2.c export.py versions 1 and 2

class Llama2cStore final : public WeightStore {
public:
    explicit Llama2cStore(MappedFile map)
        : map_(std::make_shared<const MappedFile>(std::move(map))) {}

    void add(const std::string& name, std::vector<int64_t> shape, uint64_t float_offset) {
        TensorView v;
        v.name = name;
        v.dtype = WeightDType::F32;
        v.shape = std::move(shape);
        v.data = map_->data() + 28 + float_offset * 4;
        v.n_bytes = size_t(v.numel()) * 4;
        v.file = map_->path();
        v.owner = map_;
        order_.push_back(name);
        views_.emplace(name, std::move(v));
    }

    std::vector<std::string> names() const override { return order_; }
    bool has(const std::string& name) const override { return views_.count(name) != 0; }
    TensorView get(const std::string& name) const override {
        auto it = views_.find(name);
        if (it == views_.end())
            throw InputError(map_->path().string(), "no tensor named " + quote(name));
        return it->second;
    }
    std::vector<fs::path> files() const override { return {map_->path()}; }

private:
    std::shared_ptr<const MappedFile> map_;
    std::vector<std::string> order_;  // file order
    std::map<std::string, TensorView> views_;
};

// Walks the tensors in file order (run.c memory_map_weights) and returns the number of floats
// after the header; adds a view for each tensor when `store` is given.
unsigned __int128 llama2c_layout(const Llama2cHeader& hd, int64_t n_vocab, Llama2cStore* store) {
    // Each size is a product of at most two int32 values: it fits in int64.
    const int64_t dim = hd.dim, hidden = hd.hidden_dim, n_layers = hd.n_layers;
    const int64_t head_size = dim / hd.n_heads, kv_dim = head_size * hd.n_kv_heads;
    const int64_t seq_len = hd.seq_len;
    unsigned __int128 off = 0;  // in floats after the header
    auto one = [&](const char* name, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        if (store) store->add(name, std::move(shape), uint64_t(off));
        off += uint64_t(n);
    };
    auto per_layer = [&](const char* base, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        if (store)  // (without a store, no loop: a hostile n_layers could be 2^31)
            for (int64_t l = 0; l < n_layers; ++l)
                store->add(std::string(base) + "." + std::to_string(l), shape,
                           uint64_t(off) + uint64_t(l * n));
        off += (unsigned __int128)(n_layers)*uint64_t(n);
    };
    one("token_embedding_table", {n_vocab, dim});  // [vocab, dim]
    per_layer("rms_att_weight", {dim});            // [L][dim]
    per_layer("wq", {dim, dim});                   // [L][n_heads * head_size, dim]
    per_layer("wk", {kv_dim, dim});                // [L][n_kv_heads * head_size, dim]
    per_layer("wv", {kv_dim, dim});                // [L][n_kv_heads * head_size, dim]
    per_layer("wo", {dim, dim});                   // [L][dim, n_heads * head_size]
    per_layer("rms_ffn_weight", {dim});            // [L][dim]
    per_layer("w1", {hidden, dim});                // [L][hidden, dim] gate
    per_layer("w2", {dim, hidden});                // [L][dim, hidden] down
    per_layer("w3", {hidden, dim});                // [L][hidden, dim] up
    one("rms_final_weight", {dim});                // [dim]
    // run.c skips freq_cis_real and freq_cis_imag, each seq_len * head_size / 2 floats
    off += 2 * uint64_t(seq_len * head_size / 2);
    if (!hd.shared_classifier) one("wcls", {n_vocab, dim});  // [vocab, dim]
    return off;
}

}  // namespace

std::unique_ptr<WeightStore> open_llama2c(const std::filesystem::path& path,
                                          Llama2cHeader* header) {
    MappedFile map(path);
    const std::string file = path.string();
    SS_CHECK_INPUT(map.size() >= 28, file, "file too short (", map.size(),
                   " bytes) for the 28-byte llama2.c header");
    uint32_t magic = 0;
    std::memcpy(&magic, map.data(), 4);
    if (magic == k_export_magic)
        throw UnsupportedError(file,
                               "llama2.c export format version 1/2 (magic \"ak42\"); export "
                               "with --version 0 (the layout run.c reads)");
    int32_t h[7];
    std::memcpy(h, map.data(), sizeof h);
    Llama2cHeader hd{h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[5] > 0};
    const int64_t vocab = hd.vocab_size < 0 ? -int64_t(hd.vocab_size) : int64_t(hd.vocab_size);
    SS_CHECK_INPUT(hd.dim > 0 && hd.hidden_dim > 0 && hd.n_layers > 0 && hd.n_heads > 0 &&
                       hd.n_kv_heads > 0 && vocab > 0 && hd.seq_len > 0,
                   file, "header (dim ", hd.dim, ", hidden_dim ", hd.hidden_dim, ", n_layers ",
                   hd.n_layers, ", n_heads ", hd.n_heads, ", n_kv_heads ", hd.n_kv_heads,
                   ", vocab_size ", hd.vocab_size, ", seq_len ", hd.seq_len,
                   ") has a non-positive size: not a llama2.c checkpoint");
    SS_CHECK_INPUT(hd.dim % hd.n_heads == 0, file, "header: dim ", hd.dim,
                   " is not a multiple of n_heads ", hd.n_heads);
    SS_CHECK_INPUT(hd.n_heads % hd.n_kv_heads == 0, file, "header: n_heads ", hd.n_heads,
                   " is not a multiple of n_kv_heads ", hd.n_kv_heads);

    const uint64_t actual = map.size();
    auto store = std::make_unique<Llama2cStore>(std::move(map));
    // Pass 1 only sums sizes (in 128 bits: a hostile header can overflow int64); pass 2, once
    // the size matches the file, creates the views.
    const unsigned __int128 n_floats = llama2c_layout(hd, vocab, nullptr);
    const unsigned __int128 expected = 28 + n_floats * 4;
    SS_CHECK_INPUT(actual == expected, file, "size ", actual, " bytes but the header (dim ", hd.dim,
                   ", hidden_dim ", hd.hidden_dim, ", n_layers ", hd.n_layers, ", n_heads ",
                   hd.n_heads, ", n_kv_heads ", hd.n_kv_heads, ", vocab_size ", hd.vocab_size,
                   ", seq_len ", hd.seq_len, ") implies ",
                   expected > std::numeric_limits<uint64_t>::max()
                       ? std::string("more than 2^64")
                       : std::to_string(uint64_t(expected)),
                   actual < expected ? " (truncated)" : " (trailing bytes)");
    // The size above bounds the bytes, not the views: each view costs far more memory than the
    // four bytes of a width-1 tensor, so a header of 2^20 layers of width 1 would allocate
    // gigabytes before failing later. What the model needs of the header is checked first.
    check_limit(file, Limit::Layers, "header: n_layers", uint64_t(hd.n_layers));
    check_limit(file, Limit::VocabSize, "header: vocab_size", uint64_t(vocab));
    SS_CHECK_INPUT((hd.dim / hd.n_heads) % 2 == 0, file,
                   "header: head size dim / n_heads = ", hd.dim / hd.n_heads,
                   " is odd (RoPE rotates pairs of dimensions)");

    llama2c_layout(hd, vocab, store.get());
    if (header != nullptr) *header = hd;
    return store;
}

}  // namespace sinkscope::io
