// `sinkscope report --run DIR`: run.json, frame.json and the CSV tables of a run folder, read
// back into figures and rendered as HTML. Input: files separated by lines "=== NAME" (NAME a
// plain file name such as run.json or heads.csv; at most 24 files).
#include <string>

#include "fuzz_common.hpp"
#include "sinkscope/report/report.hpp"

using namespace sinkscope;

namespace {

bool plain_name(std::string_view n) {
    if (n.empty() || n.size() > 64 || n.front() == '.') return false;
    for (const char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
            return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto dir = fuzz::fresh_dir("run");
    std::string_view rest = fuzz::as_view(data, size);
    int n_files = 0;
    while (rest.starts_with("=== ") && n_files < 24) {
        const size_t eol = rest.find('\n');
        if (eol == std::string_view::npos) break;
        const std::string_view name = rest.substr(4, eol - 4);
        rest = rest.substr(eol + 1);
        const size_t next = rest.find("\n=== ");
        const std::string_view body = rest.substr(0, next);
        rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
        if (!plain_name(name)) continue;
        fuzz::write_file(dir / std::string(name), body);
        ++n_files;
    }
    fuzz::expect_clean([&] { (void)report::render_html(report::collect_report(dir)); });
    return 0;
}
