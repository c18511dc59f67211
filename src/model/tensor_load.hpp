// Internal: turns io::TensorView bytes into torch tensors on the model's device, checking the
// shape against what the config implies.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model::detail {

at::ScalarType scalar_type(ComputeDType t);
at::Device device_of(const RuntimeOptions& r);

// Reads tensor `name` as f32 on the host, checks `expected` shape (PyTorch order), throws
// InputError "<file>: tensor <name>: ..." on mismatch or an unusable dtype. With `in_place`, a
// float32 tensor whose view has an owner (a mapped file) is returned as a view of the mapping,
// which it keeps alive, instead of a copy: read-only memory, never to be written.
at::Tensor read_f32(const WeightSource& src, const std::string& name,
                    const std::vector<int64_t>& expected, bool in_place = false);
// Metadata-only (src.metadata_only): the same checks and errors as read_f32, then a float32
// tensor of shape `expected` without storage (meta device). Tallies the tensor's file dtype and
// size in *src.metadata_only; *in_place: read_f32 with in_place would use the file's bytes.
// The view of tensor `name` after every check read_f32 makes (shape, dtype, byte count).
io::TensorView checked_view(const WeightSource& src, const std::string& name,
                            const std::vector<int64_t>& expected);
// True when a CPU model keeps `view` in the file's pages and widens it at each use (Weight in
// family_common.hpp): its bytes are mapped (the view owns them) and fewer than a copy of it in
// `dtype` would take (bf16 / f16 under float32 or float64, quantized blocks under any dtype).
bool stays_in_file(const io::TensorView& view, at::ScalarType dtype);
// True when the file's bytes of `view` are `dtype` values a CPU model can use where they lie:
// mapped (the view owns them), of that very type, aligned to it.
bool usable_as_is(const io::TensorView& view, at::ScalarType dtype);
// The file's bytes of `view` as a read-only `dtype` tensor of `shape` that keeps the mapping
// alive (usable_as_is(view, dtype) must hold): never to be written.
at::Tensor mapped_tensor(const io::TensorView& view, const std::vector<int64_t>& shape,
                         at::ScalarType dtype);
// Metadata-only builds: tallies `view` in *src.metadata_only (its type, and the largest tensor
// converted at load or, with `deferred`, widened at use).
void tally(const WeightSource& src, const io::TensorView& view, bool deferred);

at::Tensor read_meta(const WeightSource& src, const std::string& name,
                     const std::vector<int64_t>& expected, bool* in_place);

}  // namespace sinkscope::model::detail
