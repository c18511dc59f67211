// Unigram Viterbi segmentation over a byte trie of the vocabulary (sentencepiece
// unigram_model.cc EncodeOptimized; HF tokenizers models/unigram encode_optimized + tokenize).
#include "sinkscope/tokenizer/unigram.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

namespace {
// sentencepiece kUnkPenalty / HF K_UNK_PENALTY: an unknown character scores this much below
// the rarest piece.
constexpr double kUnkPenalty = 10.0;
}  // namespace

UnigramModel::UnigramModel(const std::vector<std::pair<std::string, double>>& pieces,
                           int32_t unk_id, bool byte_fallback, PathScore sums)
    : UnigramModel(pieces, UnigramOptions{unk_id, byte_fallback, sums, {}}) {}

UnigramModel::UnigramModel(const std::vector<std::pair<std::string, double>>& pieces,
                           const UnigramOptions& o)
    : unk_id_(o.unk_id), byte_fallback_(o.byte_fallback), sums_(o.sums) {
    SS_CHECK(o.unk_id < static_cast<int64_t>(pieces.size()), "unk_id ", o.unk_id,
             " outside a vocabulary of ", pieces.size());
    SS_CHECK(o.in_trie.empty() || o.in_trie.size() == pieces.size(), "in_trie has ",
             o.in_trie.size(), " entries for ", pieces.size(), " pieces");
    double min_score = std::numeric_limits<double>::infinity();
    scores_.reserve(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id) {
        const auto& [piece, score] = pieces[id];
        // Duplicate pieces: the last id wins, in the trie and in lookups (HF token_to_ids).
        vocab_.set(static_cast<int32_t>(id), piece, /*prefer_last=*/true);
        scores_.push_back(score);
        min_score = std::min(min_score, score);
        if (piece.empty() || (!o.in_trie.empty() && !o.in_trie[id])) continue;
        int32_t node = 0;
        for (char c : piece) {
            const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
            auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(node_piece_.size()));
            if (inserted) node_piece_.push_back(-1);
            node = it->second;
        }
        node_piece_[static_cast<size_t>(node)] = static_cast<int32_t>(id);
    }
    if (!std::isnan(o.min_score)) min_score = o.min_score;
    unk_score_ = (pieces.empty() ? 0.0 : min_score) - kUnkPenalty;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[static_cast<size_t>(b)] = vocab_.find(name);
    }
}

int32_t UnigramModel::child(int32_t node, uint8_t byte) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
}

template <typename Score>
void UnigramModel::viterbi(std::string_view text,
                           std::vector<std::pair<int32_t, int64_t>>& best) const {
    // best[e] = (id, start) of the last piece text[start, e) of the best segmentation of
    // text[0, e); start -1 = no segmentation reaches e yet.
    const size_t n = text.size();
    best.assign(n + 1, {-1, -1});
    std::vector<Score> score(n + 1, Score(0));
    const auto unk_score = static_cast<Score>(unk_score_);
    for (size_t start = 0; start < n;) {
        const Score base = score[start];
        const size_t char_len = utf8_char_len(text, start);
        bool has_single_char_piece = false;
        // `candidate` may be wider than Score: sentencepiece stores f32 path scores but adds a
        // piece score to one in f64 (its piece score expression is a double), and compares
        // that sum with the stored f32 value; unknowns are added in f32.
        auto offer = [&](size_t end, int32_t id, auto candidate) {
            using Wide = decltype(candidate);
            if (best[end].second < 0 || candidate > static_cast<Wide>(score[end])) {
                score[end] = static_cast<Score>(candidate);
                best[end] = {id, static_cast<int64_t>(start)};
            }
        };
        int32_t node = 0;
        for (size_t pos = start; pos < n; ++pos) {
            node = child(node, static_cast<uint8_t>(text[pos]));
            if (node < 0) break;
            const int32_t id = node_piece_[static_cast<size_t>(node)];
            if (id < 0) continue;
            const auto piece_score = static_cast<Score>(scores_[static_cast<size_t>(id)]);
            offer(pos + 1, id, static_cast<double>(base) + static_cast<double>(piece_score));
            if (pos + 1 - start == char_len) has_single_char_piece = true;
        }
        if (!has_single_char_piece) {
            if (unk_id_ < 0)
                throw InputError("<text>", "character " + quote(text.substr(start, char_len)) +
                                               " is not covered by the Unigram vocabulary and "
                                               "there is no unknown token");
            offer(start + char_len, unk_id_, static_cast<Score>(base + unk_score));
        }
        start += char_len;
    }
}

void UnigramModel::encode(std::string_view text, std::vector<int32_t>& out) const {
    const size_t n = text.size();
    if (n == 0) return;
    std::vector<std::pair<int32_t, int64_t>> best;
    if (sums_ == PathScore::Float) {
        viterbi<float>(text, best);
    } else {
        viterbi<double>(text, best);
    }

    // Pass 2: walk back from the end; runs of unknown pieces become one unknown (or its bytes).
    std::vector<int32_t> ids;
    auto flush_unknown = [&](size_t b, size_t e) {
        if (b == e) return;
        const std::string_view run = text.substr(b, e - b);
        if (const int32_t id = vocab_.find(run); id >= 0) {
            ids.push_back(id);  // the run is itself a piece (e.g. the text "<unk>")
            return;
        }
        if (byte_fallback_) {
            bool all_bytes = true;
            for (char c : run) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
            if (all_bytes) {
                for (auto it = run.rbegin(); it != run.rend(); ++it)
                    ids.push_back(byte_ids_[static_cast<uint8_t>(*it)]);
                return;
            }
        }
        ids.push_back(unk_id_);
    };
    size_t unknown_begin = n, unknown_end = n;  // pending run of unknowns [begin, end)
    for (size_t end = n; end > 0;) {
        const auto [id, start_or_none] = best[end];
        SS_CHECK(start_or_none >= 0, "Unigram Viterbi: position ", end, " unreached");
        const auto start = static_cast<size_t>(start_or_none);
        if (id == unk_id_) {
            unknown_begin = start;
        } else {
            flush_unknown(unknown_begin, unknown_end);
            ids.push_back(id);
            unknown_begin = unknown_end = start;
        }
        end = start;
    }
    flush_unknown(unknown_begin, unknown_end);
    out.insert(out.end(), ids.rbegin(), ids.rend());
}

}  // namespace sinkscope::tokenizer
