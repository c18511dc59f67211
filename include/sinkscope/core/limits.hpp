// Limits on the resources an input file controls (sizes, counts, nesting), as named constants a
// user can raise where a genuine file needs more (`--limit NAME=N` on every command; Python:
// set_limit). A file that exceeds one is refused before the allocation or recursion it asks for,
// with one InputError line naming the file, the limit and the option.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sinkscope {

enum class Limit {
    JsonBytes,         // one JSON document (config.json, tokenizer.json, a safetensors header, ...)
    JsonDepth,         // nesting of JSON arrays and objects
    DataBytes,         // one data file (--data, --calib, --eval: text, JSONL, CSV)
    LineBytes,         // one line or record of a data file
    ImagePixels,       // width x height of one image, and of the image processor's size
    PickleMemo,        // memo entries of one pickle (PyTorch .bin / .pt)
    PickleStack,       // values on one pickle's stack (and open marks)
    PickleObjects,     // values one pickle makes
    VocabSize,         // tokens of a vocabulary (and so the largest token id)
    Layers,            // transformer layers a checkpoint header declares
    TokenizerNesting,  // tokenizer.json Sequence normalizers/pre-tokenizers/decoders in Sequences
    ArrayElements,     // elements of an array handed over in memory (Python); a file's are bounded
                       // by its size, a view with zero strides can declare any number
};

struct LimitInfo {
    Limit id;
    const char* name;  // as given to --limit
    uint64_t default_value;
    const char* what;  // what is counted, for --help
};

// Every limit, in the order of the enum.
const LimitInfo* limit_table(size_t* n);

// The current value (the default unless set_limit raised or lowered it; process-wide).
uint64_t limit_value(Limit id);
// "NAME=N" (N a non-negative integer): sets that limit. UsageError naming --limit otherwise.
void set_limit(std::string_view assignment);
void set_limit(Limit id, uint64_t value);
// One line per limit (name, default, what) for --help.
std::string limits_help();

// Throws InputError "FILE: WHAT FOUND exceeds the limit NAME = VALUE (raise it with --limit
// NAME=N if the file is genuine)".
[[noreturn]] void throw_limit(const std::string& file, Limit id, const std::string& what,
                              uint64_t found);
inline void check_limit(const std::string& file, Limit id, const std::string& what,
                        uint64_t found) {
    if (found > limit_value(id)) throw_limit(file, id, what, found);
}

// Reads a whole file of at most limit_value(id) bytes. Stops reading as soon as it has more, so
// a device or a pipe (/dev/zero) is refused instead of filling the memory. IoError when the file
// cannot be read.
std::string read_file_limited(const std::filesystem::path& path, Limit id);

}  // namespace sinkscope
