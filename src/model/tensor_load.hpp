// Internal: turns io::TensorView bytes into torch tensors on the model's device, checking the
// shape against what the config implies.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

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

}  // namespace sinkscope::model::detail
