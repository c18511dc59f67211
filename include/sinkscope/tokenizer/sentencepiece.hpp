// SentencePiece .model files (tokenizer.model for Llama/Mistral, sentencepiece.bpe.model for
// XLM-R), read natively with sentencepiece's semantics (tested against libsentencepiece), with
// the id layout the Hugging Face tokenizer class uses.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::tokenizer {

// How SentencePiece ids become model ids.
enum class SpmIdMap {
    Identity,  // model id = sentencepiece id (Llama, Mistral, T5)
    // fairseq dictionary (HF XLMRobertaTokenizer): <s>=0 <pad>=1 </s>=2 <unk>=3, piece k of the
    // .model -> k + 1, <mask> = n_pieces + 1; template <s> A </s> and <s> A </s></s> B </s>.
    Fairseq,
};
const char* spm_id_map_name(SpmIdMap m);

// The id map a .model file needs, from the files beside it: Fairseq when tokenizer_config.json
// names an XLMRobertaTokenizer(Fast) class or config.json has model_type "xlm-roberta",
// Identity otherwise.
SpmIdMap spm_id_map_for(const std::filesystem::path& model_file);

// Loads a SentencePiece model (model_type unigram or bpe). Identity: BOS is prepended by
// default unless tokenizer_config.json says add_bos_token = false, EOS appended when
// add_eos_token = true. Control pieces are never matched in text (sentencepiece semantics);
// user-defined pieces are matched whole before normalization. Throws InputError naming the
// file when it is not a SentencePiece model.
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file,
                                                        SpmIdMap id_map);
// Same, with spm_id_map_for(model_file).
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file);

// The fields of a serialized sentencepiece ModelProto that decide how text is normalized and
// segmented (read from the protobuf wire format; sentencepiece_model.proto field numbers).
struct SpmModelInfo {
    std::string model_type = "unigram";  // unigram | bpe | word | char
    std::string normalizer_name;         // e.g. nmt_nfkc, identity
    std::string precompiled_charsmap;    // the rules as a PrecompiledCharsMap blob
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
    bool byte_fallback = false;
    int64_t n_pieces = 0;
};
SpmModelInfo read_spm_model_info(std::string_view serialized, const std::string& origin);

}  // namespace sinkscope::tokenizer
