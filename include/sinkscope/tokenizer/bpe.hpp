// Byte-pair encoding over text spans: one engine for merge-rank BPE (Hugging Face, GGUF gpt2)
// and score-ordered SentencePiece BPE (GGUF llama, llama2.c), with byte fallback.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sinkscope::tokenizer {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// id <-> piece. Pieces are stored as the vocabulary spells them (byte-level alphabet, '▁').
class Vocab {
public:
    // Sets piece `id` (grows the table). When two ids share a piece, lookup returns the one
    // given by `prefer_last` (llama.cpp keeps the last, HF vocabularies are unique).
    void set(int32_t id, std::string piece, bool prefer_last = false);
    int32_t find(std::string_view piece) const;  // -1 when absent
    const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
    int64_t size() const { return static_cast<int64_t>(pieces_.size()); }

private:
    std::vector<std::string> pieces_;
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
};

// A subword model: one pre-token in, ids out (BPE, WordPiece).
class PieceModel {
public:
    virtual ~PieceModel() = default;
    virtual void encode(std::string_view piece, std::vector<int32_t>& out) const = 0;
    virtual const Vocab& vocab() const = 0;
};

enum class MergeOrder {
    Ranks,   // lowest merge rank first (HF BPE, GPT-2): pairs come from an explicit merge list
    Scores,  // highest score of the merged piece first (SentencePiece BPE): any two adjacent
             // symbols whose concatenation is in the vocabulary may merge
};

struct BpeOptions {
    MergeOrder order = MergeOrder::Ranks;
    bool byte_fallback = false;  // unknown characters become <0xXX> byte tokens
    int32_t unk_id = -1;         // used for unknown characters without byte fallback
    bool fuse_unk = false;       // consecutive unknowns become one unk
    bool ignore_merges = false;  // a pre-token that is itself in the vocabulary is kept whole
    // Scores order only: merges whose piece scores at most this never happen (llama2.c
    // starts its best-score search at -1e10).
    double min_score = -std::numeric_limits<double>::infinity();
    // Scores order only: whether a symbol that is not itself in the vocabulary may merge
    // (llama.cpp merges text spans: yes; llama2.c merges token ids: no).
    bool merge_unknown = true;
};

class BpeModel final : public PieceModel {
public:
    BpeModel(Vocab vocab, BpeOptions options);

    // Ranks order: registers merge `left right` with the given rank. Returns false when a
    // part or the merged piece is not in the vocabulary (such merges can never apply).
    bool add_merge(std::string_view left, std::string_view right, int32_t rank);
    // Scores order: one score per id.
    void set_scores(std::vector<float> scores);
    // Byte fallback ids; by default looked up as "<0xXX>" pieces.
    void set_byte_tokens(const std::array<int32_t, 256>& ids) { byte_ids_ = ids; }

    // Encodes one pre-token; appends ids. Initial symbols are its UTF-8 characters (an
    // invalid byte is a character of its own).
    void encode(std::string_view piece, std::vector<int32_t>& out) const override;
    // Same with explicit initial symbols: `starts` are the byte offsets where they begin.
    void encode_symbols(std::string_view piece, const std::vector<size_t>& starts,
                        std::vector<int32_t>& out) const;

    const Vocab& vocab() const override { return vocab_; }
    const BpeOptions& options() const { return options_; }
    size_t n_merges() const { return merges_.size(); }

private:
    // BPE on one chunk that no merge can cross.
    void encode_chunk(std::string_view piece, const size_t* starts, size_t n_starts,
                      std::vector<int32_t>& out) const;
    bool bigram_in_vocab(uint8_t a, uint8_t b) const {
        const size_t k = (size_t{a} << 8) | b;
        return (bigrams_[k >> 6] >> (k & 63)) & 1;
    }

    Vocab vocab_;
    // Byte pairs that occur inside some vocabulary piece: a merge (whose result is always a
    // piece) can never span two adjacent bytes outside this set, so long texts are cut there
    // into independent chunks with identical results.
    std::vector<uint64_t> bigrams_ = std::vector<uint64_t>(65536 / 64);
    BpeOptions options_;
    std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (l,r) -> (rank, id)
    std::vector<float> scores_;
    std::array<int32_t, 256> byte_ids_{};
};

}  // namespace sinkscope::tokenizer
