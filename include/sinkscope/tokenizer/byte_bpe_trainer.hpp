// A byte-level BPE tokenizer built by sinkscope itself (for `train`): the 256 byte symbols of
// the GPT-2 byte-level alphabet, merges learned from a corpus, and one special token that starts
// every sequence. Written as a Hugging Face tokenizer.json that load_hf_tokenizer reads back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sinkscope::tokenizer {

// Vocabulary layout: ids 0..255 are the bytes (byte b is id b), id 256 is kBosToken, ids 257..
// are the merges in the order learned.
inline constexpr const char* kBosToken = "<|bos|>";
inline constexpr int32_t kByteBpeBosId = 256;

// One merge: two symbols of the byte-level alphabet (UTF-8, as tokenizer.json writes them).
using Merge = std::pair<std::string, std::string>;

// Learns up to `n_merges` merges on `text` (cut into pieces by the GPT-2 pre-tokenizer regex,
// as the ByteLevel pre-tokenizer does before BPE): each round merges the most frequent adjacent
// pair over all pieces, ties broken by the smaller (left id, right id), so the result depends
// on the text only. Stops early when no pair occurs twice.
std::vector<Merge> train_byte_bpe(std::string_view text, int64_t n_merges);

// tokenizer.json: BPE over the byte alphabet with `merges`, ByteLevel pre-tokenizer and decoder,
// kBosToken as a special added token, and a TemplateProcessing post-processor that puts it in
// front of every sequence (so the default BOS policy prepends it).
std::string byte_bpe_tokenizer_json(const std::vector<Merge>& merges);

}  // namespace sinkscope::tokenizer
