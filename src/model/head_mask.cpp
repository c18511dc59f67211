// HeadMask: which attention heads a forward pass ablates (families apply it in detail::attend).
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

HeadMask::HeadMask(Kind k, int64_t layers, int64_t heads)
    : kind(k), n_layers(layers), n_heads(heads), ablated(static_cast<size_t>(layers * heads), 0) {}

void HeadMask::ablate(int64_t layer, int64_t head) {
    if (layer < 0 || layer >= n_layers || head < 0 || head >= n_heads)
        throw UsageError("head mask: (layer " + std::to_string(layer) + ", head " +
                         std::to_string(head) + ") is outside the model");
    ablated[static_cast<size_t>(layer * n_heads + head)] = 1;
}

void HeadMask::ablate_layer(int64_t layer) {
    for (int64_t h = 0; h < n_heads; ++h) ablate(layer, h);
}

bool HeadMask::is_ablated(int64_t layer, int64_t head) const {
    return ablated[static_cast<size_t>(layer * n_heads + head)] != 0;
}

bool HeadMask::any_in_layer(int64_t layer) const {
    for (int64_t h = 0; h < n_heads; ++h)
        if (is_ablated(layer, h)) return true;
    return false;
}

}  // namespace sinkscope::model
