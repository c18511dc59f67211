// Input data for model runs: plain text (one sample per line), JSONL (`text` or `ids`), CSV with
// a text column, .npy token ids, or the built-in prompt set shipped with sinkscope.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sinkscope::io {

struct Sample {
    std::string text;          // empty when the sample is given as ids
    std::vector<int64_t> ids;  // empty when the sample is given as text
    // Where the sample is in the file, 0-based: the line for text and JSONL (every line counts,
    // empty ones too), the data record after the header for CSV, the row for .npy.
    int64_t row = -1;
    std::vector<std::string> kept;  // the values of DatasetOptions::keep_columns, in that order
};

struct DatasetOptions {
    std::string text_column = "text";  // CSV column holding the text
    // Data columns carried along with each sample (CSV columns, JSONL fields; a JSONL number or
    // boolean as its JSON text). A name the file lacks is an InputError naming it; text and .npy
    // files have no columns.
    std::vector<std::string> keep_columns{};
    int64_t max_samples = 0;  // 0 = all
    // Format by extension (.txt, .jsonl, .csv, .npy); "auto" or one of those names.
    std::string format = "auto";
};

// Loads samples; empty lines/records are skipped. Errors name the file and the line.
std::vector<Sample> load_dataset(const std::filesystem::path& path,
                                 const DatasetOptions& opts = {});

// The built-in prompt set (data/prompts/default.txt, compiled into the binary): 200+ varied
// English sentences written for this project.
std::vector<Sample> builtin_prompts(int64_t max_samples = 0);

// Splits CSV text into records of fields (RFC 4180 quoting, CRLF or LF line ends).
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

}  // namespace sinkscope::io
