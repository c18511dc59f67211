// WordPiece (BERT): greedy longest-match-first subwords with a continuation prefix ("##").
#pragma once

#include "sinkscope/tokenizer/bpe.hpp"

namespace sinkscope::tokenizer {

class WordPieceModel final : public PieceModel {
public:
    WordPieceModel(Vocab vocab, int32_t unk_id, std::string prefix = "##",
                   size_t max_input_chars_per_word = 100);
    // A word that cannot be covered by vocabulary pieces, or is too long, is one unk.
    void encode(std::string_view word, std::vector<int32_t>& out) const override;
    const Vocab& vocab() const override { return vocab_; }
    const std::string& prefix() const { return prefix_; }

private:
    Vocab vocab_;
    int32_t unk_id_;
    std::string prefix_;
    size_t max_chars_;
};

}  // namespace sinkscope::tokenizer
