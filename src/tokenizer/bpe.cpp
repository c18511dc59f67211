// BPE over a linked list of text spans with a priority queue of candidate merges:
// O(n log n) per pre-token, stale queue entries detected by span lengths (as llama.cpp does).
#include "sinkscope/tokenizer/bpe.hpp"

#include <cstdio>
#include <queue>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

void Vocab::set(int32_t id, std::string piece, bool prefer_last) {
    SS_CHECK(id >= 0, "negative token id ", id);
    if (static_cast<size_t>(id) >= pieces_.size()) pieces_.resize(static_cast<size_t>(id) + 1);
    auto it = ids_.find(piece);
    if (it == ids_.end()) {
        ids_.emplace(piece, id);
    } else if (prefer_last) {
        it->second = id;
    }
    pieces_[static_cast<size_t>(id)] = std::move(piece);
}

int32_t Vocab::find(std::string_view piece) const {
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
}

BpeModel::BpeModel(Vocab vocab, BpeOptions options) : vocab_(std::move(vocab)), options_(options) {
    for (int64_t id = 0; id < vocab_.size(); ++id) {
        const std::string& p = vocab_.piece(static_cast<int32_t>(id));
        for (size_t i = 0; i + 1 < p.size(); ++i) {
            const size_t k =
                (size_t{static_cast<uint8_t>(p[i])} << 8) | static_cast<uint8_t>(p[i + 1]);
            bigrams_[k >> 6] |= uint64_t{1} << (k & 63);
        }
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[static_cast<size_t>(b)] = vocab_.find(name);
    }
}

namespace {
uint64_t pair_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}
}  // namespace

bool BpeModel::add_merge(std::string_view left, std::string_view right, int32_t rank) {
    const int32_t l = vocab_.find(left), r = vocab_.find(right);
    std::string merged(left);
    merged += right;
    const int32_t m = vocab_.find(merged);
    if (l < 0 || r < 0 || m < 0) return false;
    merges_.try_emplace(pair_key(l, r), rank, m);  // the first (best) rank of a pair wins
    return true;
}

void BpeModel::set_scores(std::vector<float> scores) {
    scores_ = std::move(scores);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
    encode_symbols(piece, utf8_char_starts(piece), out);
}

namespace {
struct Symbol {
    uint32_t start, len;
    int32_t id;
    int32_t prev, next;
};
struct Candidate {
    double priority;  // smaller merges first
    int32_t left;     // index of the left symbol; ties go to the leftmost pair
    uint32_t left_len, right_len;
    int32_t result;
};
struct WorseCandidate {
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
    }
};
}  // namespace

void BpeModel::encode_symbols(std::string_view piece, const std::vector<size_t>& starts,
                              std::vector<int32_t>& out) const {
    if (piece.empty()) return;
    if (options_.ignore_merges) {
        const int32_t whole = vocab_.find(piece);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }
    constexpr size_t kLongPiece = 256, kMaxCachedChunk = 64;
    if (piece.size() <= kLongPiece) {
        encode_chunk(piece, starts.data(), starts.size(), out);
        return;
    }
    // Long text (SentencePiece input has no pre-tokenizer): cut where no merge can reach
    // across and encode the chunks independently, caching repeated short ones.
    std::unordered_map<std::string_view, std::vector<int32_t>> cache;
    std::vector<size_t> local;
    size_t first = 0;  // index in `starts` of the chunk's first symbol
    for (size_t i = 1; i <= starts.size(); ++i) {
        if (i < starts.size() && bigram_in_vocab(static_cast<uint8_t>(piece[starts[i] - 1]),
                                                 static_cast<uint8_t>(piece[starts[i]])))
            continue;
        const size_t b = starts[first], e = i < starts.size() ? starts[i] : piece.size();
        const std::string_view chunk = piece.substr(b, e - b);
        local.clear();
        for (size_t k = first; k < i; ++k) local.push_back(starts[k] - b);
        if (chunk.size() <= kMaxCachedChunk) {
            auto it = cache.find(chunk);
            if (it == cache.end()) {
                std::vector<int32_t> ids;
                encode_chunk(chunk, local.data(), local.size(), ids);
                it = cache.emplace(chunk, std::move(ids)).first;
            }
            out.insert(out.end(), it->second.begin(), it->second.end());
        } else {
            encode_chunk(chunk, local.data(), local.size(), out);
        }
        first = i;
    }
}

void BpeModel::encode_chunk(std::string_view piece, const size_t* starts, size_t n_starts,
                            std::vector<int32_t>& out) const {
    const auto n = static_cast<int32_t>(n_starts);
    std::vector<Symbol> sym(static_cast<size_t>(n));  // [n_symbols] linked list in text order
    for (int32_t i = 0; i < n; ++i) {
        const size_t b = starts[static_cast<size_t>(i)];
        const size_t e = i + 1 < n ? starts[static_cast<size_t>(i) + 1] : piece.size();
        sym[static_cast<size_t>(i)] = {static_cast<uint32_t>(b), static_cast<uint32_t>(e - b),
                                       vocab_.find(piece.substr(b, e - b)), i - 1,
                                       i + 1 < n ? i + 1 : -1};
    }

    std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> queue;
    auto try_pair = [&](int32_t l) {
        if (l < 0) return;
        const Symbol& a = sym[static_cast<size_t>(l)];
        if (a.next < 0) return;
        const Symbol& b = sym[static_cast<size_t>(a.next)];
        if (options_.order == MergeOrder::Ranks) {
            if (a.id < 0 || b.id < 0) return;
            auto it = merges_.find(pair_key(a.id, b.id));
            if (it == merges_.end()) return;
            queue.push({static_cast<double>(it->second.first), l, a.len, b.len, it->second.second});
        } else {
            if (!options_.merge_unknown && (a.id < 0 || b.id < 0)) return;
            const int32_t m = vocab_.find(piece.substr(a.start, a.len + b.len));
            if (m < 0) return;
            const double score =
                static_cast<size_t>(m) < scores_.size() ? scores_[static_cast<size_t>(m)] : 0.0;
            if (!(score > options_.min_score)) return;
            queue.push({-score, l, a.len, b.len, m});
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) try_pair(i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& a = sym[static_cast<size_t>(c.left)];
        if (a.len != c.left_len || a.next < 0) continue;  // stale
        Symbol& b = sym[static_cast<size_t>(a.next)];
        if (b.len != c.right_len) continue;  // stale
        a.len += b.len;
        a.id = c.result;
        b.len = 0;
        a.next = b.next;
        if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = c.left;
        try_pair(a.prev);
        try_pair(c.left);
    }

    bool last_unk = false;
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
        const Symbol& s = sym[static_cast<size_t>(i)];
        if (s.id >= 0) {
            out.push_back(s.id);
            last_unk = false;
            continue;
        }
        if (options_.byte_fallback) {
            for (uint32_t k = 0; k < s.len; ++k) {
                const int32_t id = byte_ids_[static_cast<uint8_t>(piece[s.start + k])];
                if (id < 0 && options_.unk_id < 0)
                    throw InputError("<text>",
                                     "byte fallback token <0x.."
                                     "> missing and no unknown token");
                out.push_back(id >= 0 ? id : options_.unk_id);
            }
            last_unk = false;
            continue;
        }
        if (options_.unk_id < 0)
            throw InputError("<text>",
                             detail::concat("character ", quote(piece.substr(s.start, s.len)),
                                            " is not in the vocabulary and the "
                                            "tokenizer has no unknown token"));
        if (!(options_.fuse_unk && last_unk)) out.push_back(options_.unk_id);
        last_unk = true;
    }
}

}  // namespace sinkscope::tokenizer
