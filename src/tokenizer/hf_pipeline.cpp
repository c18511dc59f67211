// The generic BPE tokenizer: added tokens split first, then normalizer, pre-tokenizer and the
// BPE model per piece (with a per-call cache of pieces), as HF tokenizers does.
#include "sinkscope/tokenizer/hf_pipeline.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_map>

#include "sinkscope/core/error.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

std::string apply_normalizer(const std::vector<NormalizerStep>& steps, std::string text) {
    for (const NormalizerStep& s : steps) {
        switch (s.kind) {
            case NormalizerStep::Kind::Prepend:
                if (!text.empty()) text = s.a + text;
                break;
            case NormalizerStep::Kind::Replace: {
                if (s.regex) {
                    std::string out;
                    out.reserve(text.size());
                    size_t prev = 0;
                    for (auto [b, e] : s.regex->find_all(text)) {
                        out.append(text, prev, b - prev);
                        out += s.b;
                        prev = e;
                    }
                    out.append(text, prev, std::string::npos);
                    text = std::move(out);
                    break;
                }
                if (s.a.empty()) break;
                std::string out;
                out.reserve(text.size());
                size_t pos = 0;
                for (size_t hit; (hit = text.find(s.a, pos)) != std::string::npos;
                     pos = hit + s.a.size()) {
                    out.append(text, pos, hit - pos);
                    out += s.b;
                }
                out.append(text, pos, std::string::npos);
                text = std::move(out);
                break;
            }
            case NormalizerStep::Kind::Nfc:
                text = nfc_normalize(text);
                break;
            case NormalizerStep::Kind::Lowercase:
                text = to_lower(text);
                break;
            case NormalizerStep::Kind::Bert:
                text = bert_normalize(text, s);
                break;
            case NormalizerStep::Kind::Precompiled:
                if (s.charsmap) text = s.charsmap->normalize(text);
                break;
            case NormalizerStep::Kind::SentencePiece: {
                static const PrecompiledCharsMap kNoRules("", "");
                text = (s.charsmap ? *s.charsmap : kNoRules).normalize_spm(text, s.spm);
                break;
            }
            case NormalizerStep::Kind::Strip: {
                auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
                size_t b = 0, e = text.size();
                if (s.a.find('l') != std::string::npos)
                    while (b < e && ws(text[b])) ++b;
                if (s.a.find('r') != std::string::npos)
                    while (e > b && ws(text[e - 1])) --e;
                text = text.substr(b, e - b);
                break;
            }
        }
    }
    return text;
}

namespace {

bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_word_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || std::isalnum(u) || c == '_';
}

// Leftmost-longest matcher over a small set of added tokens.
class AddedMatcher {
public:
    void add(std::string pattern, const AddedToken* token) {
        if (pattern.empty()) return;
        first_[static_cast<uint8_t>(pattern[0])] = true;
        patterns_.emplace_back(std::move(pattern), token);
        std::stable_sort(patterns_.begin(), patterns_.end(), [](const auto& x, const auto& y) {
            return x.first.size() > y.first.size();
        });
    }
    bool empty() const { return patterns_.empty(); }

    struct Piece {
        std::string_view text;  // when token == nullptr
        const AddedToken* token = nullptr;
    };
    std::vector<Piece> split(std::string_view text) const {
        std::vector<Piece> out;
        if (patterns_.empty()) {
            if (!text.empty()) out.push_back({text, nullptr});
            return out;
        }
        size_t seg_begin = 0, pos = 0;
        while (pos < text.size()) {
            const Match m = match_at(text, pos);
            if (!m.token) {
                ++pos;
                continue;
            }
            size_t b = pos, e = pos + m.length;
            if (m.token->lstrip)
                while (b > seg_begin && is_ascii_space(text[b - 1])) --b;
            if (m.token->rstrip)
                while (e < text.size() && is_ascii_space(text[e])) ++e;
            if (b > seg_begin) out.push_back({text.substr(seg_begin, b - seg_begin), nullptr});
            out.push_back({{}, m.token});
            seg_begin = pos = e;
        }
        if (seg_begin < text.size()) out.push_back({text.substr(seg_begin), nullptr});
        return out;
    }

private:
    struct Match {
        const AddedToken* token = nullptr;
        size_t length = 0;
    };
    Match match_at(std::string_view text, size_t pos) const {
        if (!first_[static_cast<uint8_t>(text[pos])]) return {};
        for (const auto& [p, token] : patterns_) {
            if (text.compare(pos, p.size(), p) != 0) continue;
            if (token->single_word) {
                const bool before = pos > 0 && is_word_byte(text[pos - 1]);
                const bool after =
                    pos + p.size() < text.size() && is_word_byte(text[pos + p.size()]);
                if (before || after) continue;
            }
            return {token, p.size()};
        }
        return {};
    }
    std::vector<std::pair<std::string, const AddedToken*>> patterns_;
    std::array<bool, 256> first_{};
};

class PipelineTokenizer final : public Tokenizer {
public:
    PipelineTokenizer(PipelineConfig config, std::unique_ptr<PieceModel> model)
        : cfg_(std::move(config)), model_(std::move(model)) {
        n_vocab_ = model_->vocab().size();
        for (const AddedToken& t : cfg_.added) {
            SS_CHECK(t.id >= 0, "added token without id: ", t.content);
            n_vocab_ = std::max<int64_t>(n_vocab_, int64_t{t.id} + 1);
            added_by_id_[t.id] = &t;
            if (t.normalized) {
                normalized_.add(apply_normalizer(cfg_.normalizer, t.content), &t);
            } else {
                raw_.add(t.content, &t);
            }
        }
        // The post-processor's ids (and BOS/EOS) are emitted around every text: each must be a
        // token of this vocabulary, or every encoding would hold an id no model row exists for.
        auto check_id = [&](int32_t id, const char* what) {
            if (id < -1 || id >= n_vocab_)
                throw InputError(cfg_.origin, detail::concat(what, " token id ", id,
                                                             " is outside the vocabulary (size ",
                                                             n_vocab_, ")"));
        };
        for (const int32_t id : cfg_.prefix) check_id(id, "post_processor template");
        for (const int32_t id : cfg_.suffix) check_id(id, "post_processor template");
        for (const TemplatePiece& piece : cfg_.pair)
            for (const int32_t id : piece.ids) check_id(id, "post_processor pair template");
        check_id(cfg_.bos, "BOS");
        check_id(cfg_.eos, "EOS");
    }

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int32_t> out;
        std::unordered_map<std::string, std::vector<int32_t>> cache;
        bool first_segment = true;
        for (const auto& seg : raw_.split(text)) {
            if (seg.token) {
                out.push_back(seg.token->id);
                continue;
            }
            const std::string normalized = apply_normalizer(cfg_.normalizer, std::string(seg.text));
            for (const auto& part : normalized_.split(normalized)) {
                if (part.token) {
                    out.push_back(part.token->id);
                    continue;
                }
                for (const std::string& piece : pre_tokenize(part.text, first_segment))
                    encode_piece(piece, cache, out);
                first_segment = false;
            }
        }
        return out;
    }

    std::string decode_token(int32_t id) const override {
        SS_CHECK(id >= 0 && id < n_vocab_, "token id out of range: ", id);
        if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second->content;
        if (id >= model_->vocab().size()) return {};
        const std::string& p = model_->vocab().piece(id);
        const DecoderConfig& d = cfg_.decoder;
        if (d.byte_fallback && p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
            const int v = std::stoi(p.substr(3, 2), nullptr, 16);
            return std::string(1, static_cast<char>(v));
        }
        if (d.byte_level) return byte_level_to_bytes(p);
        if (d.space_marker.empty() || p.find(d.space_marker) == std::string::npos) return p;
        std::string out;
        size_t pos = 0;
        for (size_t hit; (hit = p.find(d.space_marker, pos)) != std::string::npos;
             pos = hit + d.space_marker.size()) {
            out.append(p, pos, hit - pos);
            out += ' ';
        }
        out.append(p, pos, std::string::npos);
        return out;
    }

    std::string piece(int32_t id) const override {
        SS_CHECK(id >= 0 && id < n_vocab_, "token id out of range: ", id);
        if (id < model_->vocab().size() && !model_->vocab().piece(id).empty())
            return model_->vocab().piece(id);
        if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second->content;
        return {};
    }

    int64_t vocab_size() const override { return n_vocab_; }
    int32_t bos_id() const override { return cfg_.bos; }
    int32_t eos_id() const override { return cfg_.eos; }
    bool adds_bos_by_default() const override {
        return !cfg_.prefix.empty() && cfg_.prefix.front() == cfg_.bos;
    }
    std::string kind() const override { return cfg_.kind; }
    std::vector<int32_t> template_prefix() const override { return cfg_.prefix; }
    std::vector<int32_t> template_suffix() const override { return cfg_.suffix; }

    EncodedPair encode_pair(std::string_view a, std::string_view b) const override {
        if (cfg_.pair.empty()) return Tokenizer::encode_pair(a, b);
        EncodedPair out;
        for (const TemplatePiece& t : cfg_.pair) {
            const std::vector<int32_t> ids =
                t.sequence == 0 ? t.ids : encode(t.sequence == 1 ? a : b);
            out.ids.insert(out.ids.end(), ids.begin(), ids.end());
            out.type_ids.insert(out.type_ids.end(), ids.size(), t.type_id);
        }
        return out;
    }

protected:
    std::string decode_ids(const std::vector<int32_t>& ids) const override {
        if (!cfg_.decoder.wordpiece_prefix.empty()) return decode_wordpiece(ids);
        std::string out = Tokenizer::decode_ids(ids);
        size_t n = 0;
        while (n < out.size() && n < static_cast<size_t>(cfg_.decoder.strip_leading_spaces) &&
               out[n] == ' ')
            ++n;
        return out.substr(n);
    }
    bool is_special(int32_t id) const override {
        if (id == cfg_.bos || id == cfg_.eos) return true;
        auto it = added_by_id_.find(id);
        return it != added_by_id_.end() && it->second->special;
    }

private:
    std::string decode_wordpiece(const std::vector<int32_t>& ids) const {
        const std::string& prefix = cfg_.decoder.wordpiece_prefix;
        std::string out;
        bool first = true;
        for (int32_t id : ids) {
            if (is_special(id)) continue;
            std::string t = decode_token(id);
            if (t.compare(0, prefix.size(), prefix) == 0) {
                t.erase(0, prefix.size());
            } else if (!first) {
                out += ' ';
            }
            out += t;
            first = false;
        }
        if (!cfg_.decoder.wordpiece_cleanup) return out;
        // HF decoders::wordpiece::cleanup.
        static const std::pair<const char*, const char*> kCleanup[] = {
            {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
            {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
        };
        for (const auto& [from, to] : kCleanup)
            out = apply_normalizer({{NormalizerStep::Kind::Replace, from, to}}, out);
        return out;
    }

    std::vector<std::string> pre_tokenize(std::string_view text, bool first_segment) const {
        std::vector<std::string> pieces{std::string(text)};
        for (const PreTokenizerStep& s : cfg_.pre_tokenizer) {
            std::vector<std::string> next;
            next.reserve(pieces.size());
            for (size_t k = 0; k < pieces.size(); ++k) {
                std::string& p = pieces[k];
                switch (s.kind) {
                    case PreTokenizerStep::Kind::Split:
                        for (auto [b, e] : split_by_regex(p, *s.regex, s.behavior, s.invert))
                            next.push_back(p.substr(b, e - b));
                        break;
                    case PreTokenizerStep::Kind::ByteLevel: {
                        if (s.add_prefix_space && !p.empty() && p[0] != ' ') {
                            std::string spaced(1, ' ');
                            spaced.append(p);
                            p.swap(spaced);
                        }
                        if (s.regex) {
                            for (auto [b, e] :
                                 split_by_regex(p, *s.regex, SplitBehavior::Isolated, false))
                                next.push_back(
                                    bytes_to_byte_level(std::string_view(p).substr(b, e - b)));
                        } else if (!p.empty()) {
                            next.push_back(bytes_to_byte_level(p));
                        }
                        break;
                    }
                    case PreTokenizerStep::Kind::Metaspace: {
                        std::string q = apply_normalizer(
                            {{NormalizerStep::Kind::Replace, " ", s.replacement}}, p);
                        const bool prepend = s.prepend == PreTokenizerStep::Prepend::Always ||
                                             (s.prepend == PreTokenizerStep::Prepend::First &&
                                              first_segment && k == 0);
                        if (prepend && !q.empty() &&
                            q.compare(0, s.replacement.size(), s.replacement) != 0)
                            q.insert(0, s.replacement);
                        if (!s.split) {
                            if (!q.empty()) next.push_back(std::move(q));
                            break;
                        }
                        size_t start = 0;
                        for (size_t hit = q.find(s.replacement, 1); hit != std::string::npos;
                             hit = q.find(s.replacement, hit + 1)) {
                            if (hit > start) next.push_back(q.substr(start, hit - start));
                            start = hit;
                        }
                        if (start < q.size()) next.push_back(q.substr(start));
                        break;
                    }
                }
            }
            pieces = std::move(next);
        }
        return pieces;
    }

    void encode_piece(const std::string& piece,
                      std::unordered_map<std::string, std::vector<int32_t>>& cache,
                      std::vector<int32_t>& out) const {
        constexpr size_t kMaxCachedPiece = 64;  // long pieces are rarely repeated
        if (piece.size() > kMaxCachedPiece) {
            model_->encode(piece, out);
            return;
        }
        auto it = cache.find(piece);
        if (it == cache.end()) {
            std::vector<int32_t> ids;
            model_->encode(piece, ids);
            it = cache.emplace(piece, std::move(ids)).first;
        }
        out.insert(out.end(), it->second.begin(), it->second.end());
    }

    PipelineConfig cfg_;
    std::unique_ptr<PieceModel> model_;
    int64_t n_vocab_ = 0;
    std::unordered_map<int32_t, const AddedToken*> added_by_id_;
    AddedMatcher raw_, normalized_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineConfig config,
                                                   std::unique_ptr<PieceModel> model) {
    return std::make_unique<PipelineTokenizer>(std::move(config), std::move(model));
}

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineConfig config, BpeModel model) {
    return make_pipeline_tokenizer(std::move(config), std::make_unique<BpeModel>(std::move(model)));
}

}  // namespace sinkscope::tokenizer
