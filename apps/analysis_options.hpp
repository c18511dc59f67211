// CLI flags of analysis::AnalysisOptions, shared by `sinkscope metrics` and `sinkscope analyze`:
// one flag per option of analysis::option_specs() (its help, group and default), so the two
// commands, the Python keywords and run.json cannot drift apart.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::cli {

enum class AnalysisInput { AttentionFile, Model };

// The default as --help shows it ("" for none).
inline std::string shown_default(const analysis::OptionValue& value) {
    return std::visit(
        [](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                return v;
            else if constexpr (std::is_same_v<T, bool>)
                return "";
            else if constexpr (std::is_same_v<T, double>)
                return format_number(v);
            else if constexpr (std::is_same_v<T, std::vector<double>>) {
                std::string s;
                for (double x : v) s += (s.empty() ? "" : ",") + format_number(x);
                return s;
            } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                std::string s;
                for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
                return s;
            } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>)
                return v ? std::to_string(*v) : "";
            else if constexpr (std::is_same_v<T, std::pair<double, double>>)
                return format_number(v.first) + "," + format_number(v.second);
            else
                return std::to_string(v);
        },
        static_cast<const analysis::OptionValue::variant&>(value));
}

// One flag per option of analysis::option_specs() that this command's input offers.
inline void add_analysis_flags(CLI::App* cmd, analysis::AnalysisOptions& o, AnalysisInput input) {
    using analysis::OptionCommands;
    const bool model = input == AnalysisInput::Model;
    std::string names, named_only;
    for (const auto& info : analysis::registry())
        if (model || !info.needs.model_vectors())
            (info.in_all ? names : named_only) +=
                std::string((info.in_all ? names : named_only).empty() ? "" : ", ") + info.name;
    const analysis::AnalysisOptions defaults;
    for (const analysis::OptionSpec& spec : analysis::option_specs()) {
        if (spec.commands == OptionCommands::None ||
            (spec.commands == OptionCommands::ModelOnly && !model) ||
            (spec.commands == OptionCommands::AttentionFileOnly && model))
            continue;
        std::string help = spec.help;
        if (spec.key == "analyses")  // the names this command's input can feed
            help += ": " + names +
                    (named_only.empty() ? std::string()
                                        : "; only when named: " + named_only + " (all," +
                                              named_only + " adds it to the others)");
        const std::string flag = spec.cli_flag();
        auto set = spec.set;
        CLI::Option* opt = std::visit(
            [&](const auto& def) -> CLI::Option* {
                using T = std::decay_t<decltype(def)>;
                if constexpr (std::is_same_v<T, bool>) {
                    return cmd->add_flag_callback(
                        flag, [set, &o] { set(o, analysis::OptionValue(true)); }, help);
                } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
                    return cmd->add_option_function<uint64_t>(
                        flag,
                        [set, &o](const uint64_t& v) {
                            set(o, analysis::OptionValue(std::optional<uint64_t>(v)));
                        },
                        help);
                } else if constexpr (std::is_same_v<T, std::pair<double, double>>) {
                    return cmd
                        ->add_option_function<std::vector<double>>(
                            flag,
                            [set, &o, flag](const std::vector<double>& v) {
                                if (v.size() != 2) throw CLI::ValidationError(flag, "give LO,HI");
                                set(o, analysis::OptionValue(std::pair(v[0], v[1])));
                            },
                            help)
                        ->delimiter(',');
                } else {
                    CLI::Option* op = cmd->add_option_function<T>(
                        flag, [set, &o](const T& v) { set(o, analysis::OptionValue(v)); }, help);
                    if constexpr (std::is_same_v<T, std::vector<double>> ||
                                  std::is_same_v<T, std::vector<std::string>>)
                        op->delimiter(',');
                    return op;
                }
            },
            static_cast<const analysis::OptionValue::variant&>(spec.get(defaults)));
        if (const std::string d = shown_default(spec.get(defaults)); !d.empty())
            opt->default_str(d);
        if (!spec.group.empty()) opt->group(spec.group);
    }
}

}  // namespace sinkscope::cli
