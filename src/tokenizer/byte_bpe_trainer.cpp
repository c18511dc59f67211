// Byte-level BPE training and its tokenizer.json (tokenizer/byte_bpe_trainer.hpp). The file
// layout follows Hugging Face tokenizers' serialisation (model.type "BPE" with vocab and merges,
// pre_tokenizer / decoder "ByteLevel", post_processor "TemplateProcessing").
#include "sinkscope/tokenizer/byte_bpe_trainer.hpp"

#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "sinkscope/tokenizer/pretokenize.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

namespace {
std::string byte_symbol(uint8_t b) {
    return bytes_to_byte_level(std::string_view(reinterpret_cast<const char*>(&b), 1));
}
}  // namespace

std::vector<Merge> train_byte_bpe(std::string_view text, int64_t n_merges) {
    // Distinct pieces with their counts, each as a list of symbol ids.
    std::map<std::string, int64_t> piece_count;
    const Regex re(kGpt2Pattern);
    for (const auto& [b, e] : split_by_regex(text, re, SplitBehavior::Isolated, false))
        ++piece_count[std::string(text.substr(b, e - b))];
    std::vector<std::vector<int32_t>> words;
    std::vector<int64_t> counts;
    for (const auto& [piece, n] : piece_count) {
        std::vector<int32_t> w;
        for (unsigned char ch : piece) w.push_back(ch);
        words.push_back(std::move(w));
        counts.push_back(n);
    }
    std::vector<std::string> symbol(257);
    for (int b = 0; b < 256; ++b) symbol[b] = byte_symbol(static_cast<uint8_t>(b));
    symbol[kByteBpeBosId] = kBosToken;
    std::vector<Merge> merges;
    for (int64_t m = 0; m < n_merges; ++m) {
        // Pair counts recomputed each round: the corpora `train` uses are small.
        std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
        for (size_t w = 0; w < words.size(); ++w)
            for (size_t i = 0; i + 1 < words[w].size(); ++i)
                pairs[{words[w][i], words[w][i + 1]}] += counts[w];
        std::pair<int32_t, int32_t> best{-1, -1};
        int64_t best_n = 1;
        for (const auto& [p, n] : pairs)  // ascending (left, right): first of the maxima wins
            if (n > best_n) best = p, best_n = n;
        if (best.first < 0) break;
        const auto id = static_cast<int32_t>(symbol.size());
        symbol.push_back(symbol[best.first] + symbol[best.second]);
        merges.emplace_back(symbol[best.first], symbol[best.second]);
        for (auto& w : words) {
            std::vector<int32_t> out;
            out.reserve(w.size());
            for (size_t i = 0; i < w.size(); ++i) {
                if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) {
                    out.push_back(id);
                    ++i;
                } else {
                    out.push_back(w[i]);
                }
            }
            w = std::move(out);
        }
    }
    return merges;
}

std::string byte_bpe_tokenizer_json(const std::vector<Merge>& merges) {
    using json = nlohmann::ordered_json;
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_symbol(static_cast<uint8_t>(b))] = b;
    vocab[kBosToken] = kByteBpeBosId;
    int32_t next = kByteBpeBosId + 1;
    json merge_list = json::array();
    for (const Merge& m : merges) {
        vocab[m.first + m.second] = next++;
        merge_list.push_back(m.first + " " + m.second);
    }
    const json byte_level = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", true}};
    json j;
    j["version"] = "1.0";
    j["truncation"] = nullptr;
    j["padding"] = nullptr;
    j["added_tokens"] = json::array({{{"id", kByteBpeBosId},
                                      {"content", kBosToken},
                                      {"single_word", false},
                                      {"lstrip", false},
                                      {"rstrip", false},
                                      {"normalized", false},
                                      {"special", true}}});
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = byte_level;
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", kBosToken}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", json::array({{{"SpecialToken", {{"id", kBosToken}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
        {"special_tokens",
         {{kBosToken, {{"id", kBosToken}, {"ids", {kByteBpeBosId}}, {"tokens", {kBosToken}}}}}}};
    j["decoder"] = byte_level;
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merge_list}};
    return j.dump(1) + "\n";
}

}  // namespace sinkscope::tokenizer
