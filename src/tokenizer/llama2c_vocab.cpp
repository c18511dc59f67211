// llama2.c tok*.bin vocabularies, encoded and decoded exactly as karpathy's run.c does:
// dummy-prefix space, UTF-8 groups looked up whole, unknown groups as bytes (id = byte + 3),
// then greedy merging of the adjacent pair whose concatenation has the best score.
#include <cstring>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/tokenizer/bpe.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::tokenizer {

namespace {

constexpr int32_t kLlama2cBos = 1;  // run.c: BOS = 1, EOS = 2
constexpr int32_t kLlama2cEos = 2;

class Llama2cTokenizer final : public Tokenizer {
public:
    explicit Llama2cTokenizer(BpeModel model) : model_(std::move(model)) {}

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int32_t> out;
        if (text.empty()) return out;  // run.c adds the dummy prefix only to non-empty text
        std::string piece = " ";
        piece += text;
        // Initial symbols: the dummy-prefix space, then runs of a byte plus up to three
        // continuation bytes (run.c's UTF-8 grouping, also for invalid sequences).
        std::vector<size_t> starts{0};
        for (size_t i = 1; i < piece.size();) {
            starts.push_back(i);
            size_t n = 1;
            while (i + n < piece.size() && n < 4 &&
                   (static_cast<uint8_t>(piece[i + n]) & 0xC0) == 0x80)
                ++n;
            i += n;
        }
        model_.encode_symbols(piece, starts, out);
        return out;
    }

    std::string decode_token(int32_t id) const override {
        SS_CHECK(id >= 0 && id < vocab_size(), "token id out of range: ", id);
        const std::string& p = model_.vocab().piece(id);
        unsigned int byte = 0;
        if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &byte) == 1)
            return std::string(1, static_cast<char>(byte));
        return p;
    }
    std::string piece(int32_t id) const override {
        SS_CHECK(id >= 0 && id < vocab_size(), "token id out of range: ", id);
        return model_.vocab().piece(id);
    }
    int64_t vocab_size() const override { return model_.vocab().size(); }
    int32_t bos_id() const override { return kLlama2cBos; }
    int32_t eos_id() const override { return kLlama2cEos; }
    bool adds_bos_by_default() const override { return true; }  // run.c generate: bos=1
    std::string kind() const override { return "llama2c"; }

protected:
    // run.c strips the leading space of the piece after BOS; the dummy prefix is always the
    // first piece's space, so the first decoded piece loses it with or without BOS.
    std::string decode_ids(const std::vector<int32_t>& ids) const override {
        std::string out;
        bool first = true;
        for (int32_t id : ids) {
            if (is_special(id)) continue;
            std::string t = decode_token(id);
            if (first && !t.empty() && t[0] == ' ') t.erase(0, 1);
            first = false;
            out += t;
        }
        return out;
    }

private:
    BpeModel model_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& path,
                                                  int64_t vocab_size) {
    const std::string file = path.string();
    if (vocab_size <= 0 || vocab_size > (int64_t{1} << 24))
        throw UsageError(detail::concat("llama2.c tokenizer: bad vocab_size ", vocab_size));
    const std::string bytes = read_file(path);
    size_t pos = 0;
    auto take = [&](void* dst, size_t n, const char* what, int64_t index) {
        SS_CHECK_INPUT(n <= bytes.size() - pos, file, "truncated while reading ", what,
                       index >= 0 ? detail::concat(" of token ", index) : std::string(),
                       " (offset ", pos, ", file size ", bytes.size(), ")");
        std::memcpy(dst, bytes.data() + pos, n);
        pos += n;
    };
    int32_t max_token_length = 0;
    take(&max_token_length, 4, "max_token_length", -1);
    SS_CHECK_INPUT(max_token_length > 0 && max_token_length < (1 << 16), file,
                   "implausible max_token_length ", max_token_length);
    Vocab vocab;
    std::vector<float> scores(static_cast<size_t>(vocab_size));
    for (int64_t i = 0; i < vocab_size; ++i) {
        int32_t len = 0;
        take(&scores[static_cast<size_t>(i)], 4, "score", i);
        take(&len, 4, "length", i);
        SS_CHECK_INPUT(len >= 0 && len <= max_token_length, file, "token ", i, " has length ", len,
                       " (max_token_length ", max_token_length, ")");
        std::string piece(static_cast<size_t>(len), '\0');
        take(piece.data(), piece.size(), "bytes", i);
        // run.c compares pieces as C strings: a NUL ends the piece.
        piece.resize(std::strlen(piece.c_str()));
        vocab.set(static_cast<int32_t>(i), std::move(piece));
    }
    BpeOptions opt;
    opt.order = MergeOrder::Scores;
    opt.byte_fallback = true;
    opt.min_score = -1e10;
    opt.merge_unknown = false;
    BpeModel model(std::move(vocab), opt);
    model.set_scores(std::move(scores));
    std::array<int32_t, 256> byte_ids{};
    for (int b = 0; b < 256; ++b)
        byte_ids[static_cast<size_t>(b)] = b + 3 < vocab_size ? b + 3 : -1;
    model.set_byte_tokens(byte_ids);
    return std::make_unique<Llama2cTokenizer>(std::move(model));
}

}  // namespace sinkscope::tokenizer
