// PyTorch zip checkpoints (pytorch_model.bin, torch.save since PyTorch 1.6, torch::pickle_save)
// read without Python and without executing anything: a restricted pickle machine implements
// only the opcodes torch.save emits for a state dict and a short whitelist of globals; any other
// global (os.system, builtins.eval, ...) is refused before anything could be called.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

// One entry of a pickled state dict: a strided view of a storage. The storage's bytes live in
// the zip entry <archive>/data/<storage_key>.
struct PickledTensor {
    std::string name;           // state-dict key ("gpt_neox.layers.0.attention.dense.weight")
    std::string storage_type;   // pickled global name: "FloatStorage", "HalfStorage", ...
    std::string storage_key;    // persistent id key ("0", "1", ...)
    int64_t storage_numel = 0;  // elements of the whole storage (from the persistent id)
    int64_t offset = 0;         // storage offset, in elements
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;  // in elements
};

// Runs the restricted unpickler over the bytes of data.pkl. `file` names the checkpoint in
// errors. Accepted globals: collections.OrderedDict, torch._utils._rebuild_tensor(_v2),
// torch._utils._rebuild_parameter(_with_state), torch.jit._pickle.restore_type_tag (what
// torch::pickle_save emits for a c10::Dict) and torch.<T>Storage. Any other global throws
// InputError "<file>: pickle references 'os.system', refused (only tensors are read)"; an
// unknown opcode, a malformed stream or a result that is not a {str: tensor} dict throw
// InputError naming the file. Tensors are returned in the order the dict holds them.
std::vector<PickledTensor> unpickle_state_dict(const uint8_t* data, size_t size,
                                               const std::string& file);

// Weights of a PyTorch zip checkpoint: `path` is the .bin file, pytorch_model.bin.index.json
// (weight_map as for safetensors, shards are .bin files), or a directory holding either. Tensors
// are views into the memory-mapped archive. Malformed archives or pickles, and storages too
// small for a tensor's shape and strides, throw InputError naming the file; the legacy
// (pre-1.6, non-zip) torch.save format throws UnsupportedError. get() of a tensor whose dtype is
// not a WeightDType (bool, uint8, ...) or that is not C-contiguous throws UnsupportedError.
std::unique_ptr<WeightStore> open_pytorch_bin(const std::filesystem::path& path);

}  // namespace sinkscope::io
