// Unigram language-model segmentation (SentencePiece `unigram`, HF tokenizers `Unigram`): the
// segmentation of a pre-token into vocabulary pieces with the largest sum of piece scores
// (log-probabilities), found by Viterbi over a byte trie of the pieces.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sinkscope/tokenizer/bpe.hpp"

namespace sinkscope::tokenizer {

// Arithmetic of the Viterbi path scores. Piece scores are float32 log-probabilities in both
// implementations, but HF tokenizers sums them in f64 while sentencepiece stores f32 path scores,
// so the two can pick different segmentations where two paths tie to within float rounding.
enum class PathScore {
    Double,  // HF tokenizers (tokenizer.json)
    Float,   // sentencepiece EncodeOptimized: f32 path scores, piece candidates summed in f64
};

struct UnigramOptions {
    int32_t unk_id = -1;  // < 0: no unknown token (uncovered text is an error)
    bool byte_fallback = false;
    PathScore sums = PathScore::Double;
    // Per id: whether the piece may match text (empty: all, as HF). sentencepiece leaves
    // control, unknown and byte pieces out.
    std::vector<bool> in_trie;
    // The lowest piece score, for the unknown penalty; NaN: over all pieces (HF). sentencepiece
    // takes it over normal pieces only.
    double min_score = std::numeric_limits<double>::quiet_NaN();
};

class UnigramModel final : public PieceModel {
public:
    UnigramModel(const std::vector<std::pair<std::string, double>>& pieces,
                 const UnigramOptions& options);
    // `pieces[id]` = (piece, score). `unk_id` < 0: no unknown token (text outside the vocabulary
    // is then an error). With `byte_fallback`, an unknown run becomes its UTF-8 bytes as
    // "<0xXX>" pieces when all of them exist (HF Unigram::tokenize).
    UnigramModel(const std::vector<std::pair<std::string, double>>& pieces, int32_t unk_id,
                 bool byte_fallback, PathScore sums = PathScore::Double);

    // Viterbi segmentation of one pre-token; appends ids. Ties keep the first candidate found
    // (pieces tried in order of increasing length from each start), consecutive unknown
    // characters are fused into one unknown piece, as both sentencepiece
    // (unigram_model.cc EncodeOptimized) and HF tokenizers do.
    void encode(std::string_view text, std::vector<int32_t>& out) const override;

    const Vocab& vocab() const override { return vocab_; }
    double score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
    int32_t unk_id() const { return unk_id_; }
    bool byte_fallback() const { return byte_fallback_; }
    // Score of an unknown character: the lowest piece score minus 10 (kUnkPenalty).
    double unk_score() const { return unk_score_; }

private:
    // Pass 1 of encode: for each end offset, (piece id, start offset) of the best path's last
    // piece; `Score` is the accumulator type (PathScore).
    template <typename Score>
    void viterbi(std::string_view text, std::vector<std::pair<int32_t, int64_t>>& best) const;
    // Byte trie: node 0 is the root; `child` maps (node << 8 | byte) to the next node.
    int32_t child(int32_t node, uint8_t byte) const;

    Vocab vocab_;
    std::vector<double> scores_;
    std::vector<int32_t> node_piece_{-1};  // piece ending at each trie node (-1: none)
    std::unordered_map<uint64_t, int32_t> edges_;
    int32_t unk_id_ = -1;
    bool byte_fallback_ = false;
    PathScore sums_ = PathScore::Double;
    double unk_score_ = 0;
    std::array<int32_t, 256> byte_ids_{};
};

}  // namespace sinkscope::tokenizer
