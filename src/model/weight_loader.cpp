// Weights held or widened at use, and the loader the families read them through
// (weight_loader.hpp).
#include "weight_loader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "rope.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/parallel.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/footprint.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model::detail {

namespace {

// TF-era name of a LayerNorm parameter role (gamma = weight, beta = bias); nullptr for others.
const char* legacy_norm_suffix(TensorRole role) {
    switch (role) {
        case TensorRole::OutputNorm:
        case TensorRole::AttnNorm:
        case TensorRole::FfnNorm:
        case TensorRole::EmbedNorm:
        case TensorRole::HeadNorm:
            return "gamma";
        case TensorRole::OutputNormBias:
        case TensorRole::AttnNormBias:
        case TensorRole::FfnNormBias:
        case TensorRole::EmbedNormBias:
        case TensorRole::HeadNormBias:
            return "beta";
        default:
            return nullptr;
    }
}

// Names an HF checkpoint may use for registry name `n` of `role` when `n` itself is absent, in
// the order tried:
// * checkpoints saved from the base model (GPT2Model, e.g. openai-community/gpt2: "wte.weight"
//   instead of "transformer.wte.weight") lack the head model's prefix; transformers loads them
//   by stripping base_model_prefix, and so does this: the name without its first component;
// * checkpoints converted from the original TF BERT (bert-base-uncased among them) name the
//   LayerNorm parameters gamma / beta; transformers renames them on load, so does this.
std::vector<std::string> name_candidates(const std::string& n, TensorRole role) {
    std::vector<std::string> out;
    const auto dot = n.find('.');
    if (dot != std::string::npos) out.push_back(n.substr(dot + 1));
    if (const char* suffix = legacy_norm_suffix(role)) {
        auto legacy = [&](const std::string& s) { return s.substr(0, s.rfind('.') + 1) + suffix; };
        out.push_back(legacy(n));
        if (dot != std::string::npos) out.push_back(legacy(n.substr(dot + 1)));
    }
    return out;
}

}  // namespace

// ---- Weight: file bytes widened at use ----

struct Weight::Stored {
    io::TensorView view;  // the file's [n, d] bytes; view.owner keeps them mapped
    int64_t d = 0;        // values a row
    // Row r of the weight is row rows[r] of the file's tensor (empty: the file's rows in order):
    // a part of a fused matrix, or Q/K rows in the HF order (WeightLoader::host_rope_rows).
    std::vector<int64_t> rows;
    int64_t n_rows = 0;
    at::ScalarType dtype = at::kFloat;  // the compute dtype
    mutable std::mutex mutex;           // guards kept
    mutable at::Tensor kept;            // param(): widened once and kept

    // Rows `src` (n of them) of the file's tensor converted to float32 into out [n, d]. Rows
    // are whole quantization blocks (io::check_convertible), so a row converts alone to the
    // values it has in the whole tensor's conversion.
    void convert_rows(const int64_t* src, int64_t n, float* out) const {
        io::TensorView row = view;
        const int64_t row_bytes = io::weight_dtype_n_bytes(view.dtype, d);
        row.shape = {d};
        row.n_bytes = static_cast<size_t>(row_bytes);
        for (int64_t i = 0; i < n; ++i) {
            SS_CHECK(src[i] >= 0 && src[i] < view.shape[0], "row ", src[i], " outside ", view.name);
            row.data = view.data + src[i] * row_bytes;
            io::convert_to_f32(row, out + i * d);
        }
    }
    // The values WeightLoader::to_device(read / host_rope_rows / host_qkv part) gives this
    // tensor: read_f32's conversion of each value, the same row order, to_device's dtype.
    at::Tensor widen() const { return widen_rows(0, n_rows); }
    // Rows [first, first + n) of widen(), only those converted.
    at::Tensor widen_rows(int64_t first, int64_t n) const {
        SS_CHECK(first >= 0 && n >= 0 && first + n <= n_rows, "rows ", first, "+", n, " outside ",
                 view.name);
        at::Tensor host = at::empty({n, d}, at::TensorOptions().dtype(at::kFloat));
        if (rows.empty()) {
            const auto row_bytes = static_cast<size_t>(io::weight_dtype_n_bytes(view.dtype, d));
            io::TensorView part = view;
            part.shape = {n, d};
            part.data = view.data + size_t(first) * row_bytes;
            part.n_bytes = size_t(n) * row_bytes;
            io::convert_to_f32(part, host.data_ptr<float>());
        } else {
            convert_rows(rows.data() + first, n, host.data_ptr<float>());
        }
        return host.to(at::kCPU, dtype).contiguous();
    }
    at::Tensor kept_or_null() const {
        const std::lock_guard<std::mutex> lock(mutex);
        return kept;
    }
};

at::Tensor Weight::use() const {
    if (!stored_) return wide_;
    at::Tensor kept = stored_->kept_or_null();
    return kept.defined() ? kept : stored_->widen();
}

at::Tensor Weight::rows(const at::Tensor& ids) const {
    if (!stored_) return at::embedding(wide_, ids);
    if (at::Tensor kept = stored_->kept_or_null(); kept.defined()) return at::embedding(kept, ids);
    const Stored& st = *stored_;
    SS_CHECK(st.rows.empty(), "rows() of a table stored in order");
    const at::Tensor flat = ids.reshape({-1}).to(at::kCPU, at::kLong).contiguous();
    at::Tensor out = at::empty({flat.numel(), st.d}, at::TensorOptions().dtype(at::kFloat));
    st.convert_rows(flat.data_ptr<int64_t>(), flat.numel(), out.data_ptr<float>());
    std::vector<int64_t> sizes = ids.sizes().vec();
    sizes.push_back(st.d);
    return out.to(at::kCPU, st.dtype).view(sizes);
}

int64_t Weight::n_rows() const {
    return stored_ ? stored_->n_rows : wide_.size(0);
}

at::Tensor Weight::row_block(int64_t first, int64_t n) const {
    if (!stored_) return wide_.narrow(0, first, n);
    if (at::Tensor kept = stored_->kept_or_null(); kept.defined()) return kept.narrow(0, first, n);
    return stored_->widen_rows(first, n);
}

at::Tensor Weight::param() const {
    if (!stored_) return wide_;
    const std::lock_guard<std::mutex> lock(stored_->mutex);
    if (!stored_->kept.defined()) stored_->kept = stored_->widen();
    return stored_->kept;
}

WeightLoader::WeightLoader(const ModelConfig& c, const WeightSource& src, const RuntimeOptions& rt)
    : arch_(find_architecture(c.architecture)),
      src_(src),
      dtype_(scalar_type(rt.dtype)),
      device_(device_of(rt)),
      cpu_(rt.device == DeviceKind::Cpu),
      widen_at_load_(rt.widen_at_load) {}

std::string WeightLoader::name(TensorRole role, int64_t layer) const {
    const std::string n = tensor_name(arch_, src_.format, role, layer);
    if (n.empty() || src_.format != WeightFormat::HuggingFace || src_.store->has(n)) return n;
    for (const std::string& alt : name_candidates(n, role))
        if (src_.store->has(alt)) return alt;
    return n;  // absent: reading it reports the registry name
}

bool WeightLoader::has(TensorRole role, int64_t layer) const {
    const std::string n = name(role, layer);
    return !n.empty() && src_.store->has(n);
}

at::Tensor WeightLoader::read(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                              bool kept) const {
    const std::string n = name(role, layer);
    SS_CHECK(!n.empty(), "architecture ", arch_.name, " names no tensor for role ",
             static_cast<int>(role), " in ", weight_format_name(src_.format));
    if (src_.metadata_only) {
        bool file_bytes = false;
        at::Tensor meta = read_meta(src_, n, shape, &file_bytes);
        // A CPU float32 build would use this tensor in the file's pages (to_device counts it).
        if (kept && cpu_ && file_bytes && dtype_ == at::kFloat) in_place_.push_back(meta);
        return meta;
    }
    const bool in_place = kept && device_.is_cpu() && dtype_ == at::kFloat;
    return read_f32(src_, n, shape, in_place);
}

bool WeightLoader::qk_interleaved() const {
    return src_.format == WeightFormat::Llama2c ||
           (src_.format == WeightFormat::Gguf && arch_.gguf_qk_interleaved);
}

at::Tensor WeightLoader::host_rope_rows(TensorRole role, int64_t layer, int64_t n_head,
                                        int64_t d_head, int64_t d_in) const {
    // [n_head * d_head, d_in]; kept as it is unless the rows are interleaved
    const at::Tensor w = read(role, layer, {n_head * d_head, d_in}, !qk_interleaved());
    if (!qk_interleaved()) return w;
    // interleaved rows (pairs 2i, 2i+1) -> rotate_half rows (i, i + d_head/2), per head
    return w.reshape({n_head, d_head / 2, 2, d_in})
        .transpose(1, 2)
        .reshape({n_head * d_head, d_in});
}

at::Tensor WeightLoader::host_linear(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in,
                                     bool kept) const {
    if (src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d)
        return host(role, layer, {n_in, n_out}).t().contiguous();  // Conv1D: y = x W + b
    return read(role, layer, {n_out, n_in}, kept);
}

at::Tensor WeightLoader::host_qkv(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                                  int64_t d_in) const {
    const int64_t n = 3 * n_heads * d_head;
    const bool bias = d_in == 0;
    // [n] or [n, d_in], rows in the stored order, kept as they are unless grouped per head
    const bool per_head = src_.format == WeightFormat::HuggingFace && arch_.hf_qkv_per_head;
    const at::Tensor w =
        bias ? read(role, layer, {n}, !per_head) : host_linear(role, layer, n, d_in, !per_head);
    if (!per_head) return w;
    // rows [head][part][d_head] -> [part][head][d_head] (convert_hf_to_gguf.py's GPT-NeoX order)
    const at::Tensor grouped =
        bias ? w.view({n_heads, 3, d_head}) : w.view({n_heads, 3, d_head, d_in});
    const at::Tensor parts = grouped.transpose(0, 1).contiguous();
    return bias ? parts.view({n}) : parts.view({n, d_in});
}

at::Tensor WeightLoader::to_device(const at::Tensor& host_f32) {
    n_params_ += host_f32.numel();
    if (WeightFootprint* f = src_.metadata_only) {
        // As the real build: a tensor read in place, or a contiguous view of one (a part of
        // a fused q/k/v matrix), passes to_device without a copy.
        const bool in_place =
            host_f32.is_contiguous() &&
            std::any_of(in_place_.begin(), in_place_.end(), [&](const at::Tensor& t) {
                return t.storage().unsafeGetStorageImpl() ==
                       host_f32.storage().unsafeGetStorageImpl();
            });
        (in_place ? f->numel_in_place : f->numel_copied) += host_f32.numel();
    }
    return host_f32.to(device_, dtype_).contiguous();
}

Weight WeightLoader::stored_weight(TensorRole role, int64_t layer,
                                   const std::vector<int64_t>& shape, std::vector<int64_t> rows,
                                   bool first_part) {
    const std::string n = name(role, layer);
    SS_CHECK(!n.empty(), "architecture ", arch_.name, " names no tensor for role ",
             static_cast<int>(role), " in ", weight_format_name(src_.format));
    const io::TensorView view = checked_view(src_, n, shape);
    const int64_t numel = rows.empty() ? view.numel() : int64_t(rows.size()) * shape[1];
    n_params_ += numel;
    if (WeightFootprint* f = src_.metadata_only) {
        if (first_part) tally(src_, view, /*deferred=*/true);  // a fused tensor once
        f->numel_deferred += numel;
        const int64_t n_rows = rows.empty() ? shape[0] : int64_t(rows.size());
        return Weight(
            at::empty({n_rows, shape[1]}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta)));
    }
    auto st = std::make_shared<Weight::Stored>();
    st->view = view;
    st->d = shape[1];
    st->n_rows = rows.empty() ? shape[0] : int64_t(rows.size());
    st->rows = std::move(rows);
    st->dtype = dtype_;
    return Weight(std::shared_ptr<const Weight::Stored>(std::move(st)));
}

bool WeightLoader::defer(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) const {
    if (!cpu_ || widen_at_load_ || shape.size() != 2) return false;
    const std::string n = name(role, layer);
    if (n.empty() || !src_.store->has(n)) return false;  // the eager read reports it
    return stays_in_file(checked_view(src_, n, shape), dtype_);
}

std::vector<Parameter> TensorTable::parameters() const {
    std::vector<Parameter> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) out.push_back(Parameter{e.role, e.layer, e.weight.param()});
    return out;
}

Weight WeightLoader::weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                            std::optional<TensorRole> as) {
    Weight w = unrecorded_weight(role, layer, shape);
    record(as.value_or(role), layer, w);
    return w;
}

Weight WeightLoader::unrecorded_weight(TensorRole role, int64_t layer,
                                       const std::vector<int64_t>& shape) {
    if (defer(role, layer, shape)) return stored_weight(role, layer, shape, {});
    // A bf16 (f16, f64) file under a model of the same dtype: its bytes as they lie, as a
    // float32 file under a float32 model (read()); the same values as the load's widening and
    // narrowing back, which is exact.
    const std::string n = name(role, layer);
    if (cpu_ && !widen_at_load_ && dtype_ != at::kFloat && !n.empty() && src_.store->has(n)) {
        const io::TensorView view = checked_view(src_, n, shape);
        if (usable_as_is(view, dtype_)) {
            n_params_ += view.numel();
            if (WeightFootprint* f = src_.metadata_only) {
                tally(src_, view, /*deferred=*/false);
                f->numel_in_place += view.numel();
                return Weight(
                    at::empty(shape, at::TensorOptions().dtype(dtype_).device(at::kMeta)));
            }
            return Weight(mapped_tensor(view, shape, dtype_));
        }
    }
    return to_device(read(role, layer, shape, /*kept=*/true));
}

Weight WeightLoader::rope_rows_weight(TensorRole role, int64_t layer, int64_t n_head,
                                      int64_t d_head, int64_t d_in) {
    const std::vector<int64_t> shape{n_head * d_head, d_in};
    Weight w;
    if (!qk_interleaved())
        w = unrecorded_weight(role, layer, shape);  // the HF order already
    else if (!defer(role, layer, shape))
        w = to_device(host_rope_rows(role, layer, n_head, d_head, d_in));
    else
        w = stored_weight(role, layer, shape, interleaved_rope_rows(n_head, d_head));
    record(role, layer, w);
    return w;
}

std::vector<int64_t> WeightLoader::interleaved_rope_rows(int64_t n_head, int64_t d_head) {
    // host_rope_rows: row t * d_head/2 + i of head h is the file's row 2i + t of head h
    std::vector<int64_t> rows(static_cast<size_t>(n_head * d_head));
    const int64_t half = d_head / 2;
    for (int64_t h = 0; h < n_head; ++h)
        for (int64_t t = 0; t < 2; ++t)
            for (int64_t i = 0; i < half; ++i)
                rows[static_cast<size_t>(h * d_head + t * half + i)] = h * d_head + 2 * i + t;
    return rows;
}

Weight WeightLoader::linear_weight(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in) {
    if (!(src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d))
        return weight(role, layer, {n_out, n_in});
    Weight w = to_device(host_linear(role, layer, n_out, n_in));
    record(role, layer, w);
    return w;
}

std::vector<Weight> WeightLoader::split_rows(TensorRole role, int64_t layer,
                                             const std::vector<int64_t>& shape,
                                             const std::vector<int64_t>& sizes,
                                             const std::vector<TensorRole>& part_roles) {
    SS_CHECK(part_roles.size() == sizes.size(), "split_rows: ", sizes.size(), " parts, ",
             part_roles.size(), " roles");
    std::vector<Weight> parts;
    int64_t begin = 0;
    const bool deferred = defer(role, layer, shape);
    const at::Tensor host_f32 = deferred ? at::Tensor() : host(role, layer, shape);  // read once
    for (int64_t n : sizes) {
        if (!deferred) {
            parts.push_back(to_device(host_f32.narrow(0, begin, n)));
        } else {
            std::vector<int64_t> rows(static_cast<size_t>(n));
            for (int64_t r = 0; r < n; ++r) rows[static_cast<size_t>(r)] = begin + r;
            parts.push_back(stored_weight(role, layer, shape, std::move(rows), begin == 0));
        }
        record(part_roles[parts.size() - 1], layer, parts.back());
        begin += n;
    }
    return parts;
}

std::vector<Weight> WeightLoader::qkv_parts(TensorRole role, int64_t layer, int64_t n_heads,
                                            int64_t d_head, int64_t d_in) {
    const int64_t n = 3 * n_heads * d_head, hd = n_heads * d_head;
    std::vector<Weight> parts;
    const bool conv1d = src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d;
    if (conv1d || !defer(role, layer, {n, d_in})) {
        const at::Tensor host_f32 = host_qkv(role, layer, n_heads, d_head, d_in);
        for (int64_t p = 0; p < 3; ++p) parts.push_back(to_device(host_f32.narrow(0, p * hd, hd)));
        return parts;
    }
    // host_qkv's order: [part][head][d_head]; HF GPT-NeoX files group the rows per head
    const bool per_head = src_.format == WeightFormat::HuggingFace && arch_.hf_qkv_per_head;
    for (int64_t p = 0; p < 3; ++p) {
        std::vector<int64_t> rows(static_cast<size_t>(hd));
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < d_head; ++i)
                rows[static_cast<size_t>(h * d_head + i)] =
                    per_head ? (h * 3 + p) * d_head + i : p * hd + h * d_head + i;
        parts.push_back(stored_weight(role, layer, {n, d_in}, std::move(rows), p == 0));
    }
    return parts;
}

}  // namespace sinkscope::model::detail
