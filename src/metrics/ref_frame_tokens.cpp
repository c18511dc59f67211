// Reference-frame member "tokens": token specialisation (spec 8, 10.m; compat on the layers of
// B.10): each head's top key per input, the share of inputs whose top key is the first, last or
// another position, and at the end each head's modal key, its consistency over inputs, whether
// the head is specialised, and per layer the share of heads whose modal key is each key.
#include <map>

#include "ref_frame_member.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

class Tokens final : public Member {
public:
    const char* name() const override { return "tokens"; }
    std::vector<std::string> tables() const override { return {n::kTokens}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override { return {.top = true}; }
    void layer(const LayerView& v) const override {
        if (!v.in_layers(topology_layers(v.model_layers(), v.c.compat))) return;
        for (int64_t h = 0; h < v.in.n_heads; ++h) {
            const int64_t j = v.top[static_cast<size_t>(h)];
            const auto cls = classify_position(j, v.in.length);
            const std::string key = v.token_strings ? (*v.token_strings)[static_cast<size_t>(j)]
                                                    : "#" + std::to_string(j);
            v.out.top_keys.emplace_back(h, key);
            for (auto k : {PositionClass::First, PositionClass::Last, PositionClass::Other})
                v.put(n::kTokens, h, n::kSharePrefix + std::string(position_class_name(k)), "",
                      cls == k ? 1.0 : 0.0);
        }
    }
    void apply(const RefFrameLayerOutput& out, int64_t l, int64_t input_id,
               RefFrameResults& state) const override {
        for (const auto& [h, key] : out.top_keys) {
            ++state.top_keys[{l, h}][key];
            state.top_key_first_input[{l, h}].emplace(key, input_id);  // kept if seen
        }
    }
    void merge(const RefFrameResults& other, int64_t n_before,
               RefFrameResults& into) const override {
        for (const auto& [lh, counts] : other.top_keys)
            for (const auto& [key, cnt] : counts) into.top_keys[lh][key] += cnt;
        // The other shard's inputs come after this one's.
        for (const auto& [lh, firsts] : other.top_key_first_input)
            for (const auto& [key, first] : firsts)
                into.top_key_first_input[lh].emplace(key, first + n_before);
    }
    // Consistency of each head's top key over inputs, and per layer the share of heads whose
    // modal key is each key (B.10). Ties: compat keeps the key seen first in input order (the
    // notebook's dictionary); principled the lexicographically smallest.
    void finish(const RefFrameResults& state, RefFrameResults& r) const override {
        const RefFrameConfig& c = r.config;
        std::map<int64_t, std::map<std::string, int64_t>> modal_per_layer;
        for (const auto& [lh, counts] : state.top_keys) {
            int64_t total = 0, best = -1, best_first = 0;
            std::string modal;
            const auto firsts = state.top_key_first_input.find(lh);
            for (const auto& [key, cnt] : counts) {
                total += cnt;
                int64_t first = 0;
                if (c.compat) {
                    SS_CHECK(firsts != state.top_key_first_input.end() && firsts->second.count(key),
                             "token specialisation: no first input recorded for key ", key);
                    first = firsts->second.at(key);
                }
                if (cnt > best || (cnt == best && first < best_first))
                    best = cnt, best_first = first, modal = key;
            }
            const double consistency = static_cast<double>(best) / static_cast<double>(total);
            r.stats[RefFrameKey{n::kTokens, lh.first, lh.second, n::kConsistency, modal}].add(
                consistency);
            r.stats[RefFrameKey{n::kTokens, lh.first, lh.second, n::kSpecialised, ""}].add(
                consistency >= c.constants.specialised_share &&
                        total >= c.constants.specialised_min_inputs
                    ? 1.0
                    : 0.0);
            ++modal_per_layer[lh.first][modal];
        }
        for (const auto& [l, counts] : modal_per_layer) {
            int64_t n_heads = 0;
            for (const auto& kv : counts) n_heads += kv.second;
            for (const auto& [key, cnt] : counts)
                r.stats[RefFrameKey{n::kTokens, l, -1, n::kHeadsModalShare, key}].add(
                    static_cast<double>(cnt) / static_cast<double>(n_heads));
        }
    }
    void visit_state(FieldIo& io, RefFrameResults& s) const override {
        io(s.top_keys);
        io(s.top_key_first_input);
    }
};

const Tokens instance;

}  // namespace

const Member& tokens_member = instance;

}  // namespace sinkscope::metrics::ref_frame
