// The Fisher notebook's name-based grouping (fisher_notebook.hpp; spec/PAPERS.md B.8).
#include "sinkscope/metrics/fisher_notebook.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

namespace sinkscope::metrics {

namespace {
std::string base_name(const std::string& name) {
    const auto bracket = name.find('[');
    return bracket == std::string::npos ? name : name.substr(0, bracket);
}
}  // namespace

int64_t notebook_fisher_layer(const std::string& name, int64_t n_layers) {
    // The notebook asks, for k = 0 .. L-1, whether "layers.{k}." or "layer.{k}." is in the
    // name: the digits after either prefix, up to a dot, are k.
    for (const std::string prefix : {"layers.", "layer."}) {
        for (size_t at = name.find(prefix); at != std::string::npos;
             at = name.find(prefix, at + 1)) {
            size_t i = at + prefix.size();
            int64_t k = 0;
            size_t digits = 0;
            while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) &&
                   digits < 9)
                k = k * 10 + (name[i] - '0'), ++i, ++digits;
            if (digits > 0 && i < name.size() && name[i] == '.' && k < n_layers &&
                (digits == 1 || name[at + prefix.size()] != '0'))
                return k;
        }
    }
    return -1;
}

std::string notebook_fisher_group(const std::string& name) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    static const std::array<std::pair<const char*, std::array<const char*, 6>>, 3> kGroups{{
        {"attention", {"attention", "attn", "self", "q_proj", "k_proj", "v_proj"}},
        {"mlp", {"mlp", "feed_forward", "ffn", "dense", "fc", nullptr}},
        {"embedding", {"embed", "token", "wte", "wpe", nullptr, nullptr}},
    }};
    for (const auto& [group, patterns] : kGroups)
        for (const char* p : patterns)
            if (p && lower.find(p) != std::string::npos) return group;
    return "";
}

double NotebookFisher::attention_share() const {
    return attention + mlp > 0 ? attention / (attention + mlp)
                               : std::numeric_limits<double>::quiet_NaN();
}

NotebookFisher notebook_fisher(const std::vector<std::pair<std::string, double>>& tensors,
                               int64_t n_layers) {
    NotebookFisher out;
    for (const auto& [full, f] : tensors) {
        const std::string name = base_name(full);
        const int64_t k = notebook_fisher_layer(name, n_layers);
        if (k >= 0)
            out.layers[k] += f;
        else
            out.other += f;
        const std::string group = notebook_fisher_group(name);
        if (group == "attention") out.attention += f;
        if (group == "mlp") out.mlp += f;
        if (group == "embedding") out.embedding += f;
    }
    return out;
}

}  // namespace sinkscope::metrics
