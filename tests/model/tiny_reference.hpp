// The tiny Gemma-2 / Phi-3 checkpoints and float64 goldens of tests/model/tiny_decoder_ref.py,
// made at test time into a scratch folder (the script needs /usr/bin/python3 with NumPy).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "sinkscope/core/output_dir.hpp"

namespace sinkscope::testutil {

// Runs the reference script for `variant` into dir (dir/model: HF directory with golden/<input>/;
// dir/model.gguf where the variant has a GGUF twin). Returns "" on success, "skip" when
// /usr/bin/python3 lacks NumPy (the script exits 3), else the script's error output.
inline std::string make_reference(const std::string& variant, const std::filesystem::path& dir) {
    const std::filesystem::path script =
        std::filesystem::path(__FILE__).parent_path() / "tiny_decoder_ref.py";
    const std::filesystem::path err = dir / "reference_stderr.txt";
    const int rc = std::system(("/usr/bin/python3 '" + script.string() + "' " + variant + " '" +
                                dir.string() + "' 2> '" + err.string() + "'")
                                   .c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) return "skip";
    if (rc != 0) return "exit " + std::to_string(rc) + ": " + read_file(err);
    return "";
}

}  // namespace sinkscope::testutil

// Makes the reference of `variant` in `dir`; skips the test when NumPy is missing.
#define SINKSCOPE_REFERENCE(variant, dir)                                                    \
    do {                                                                                     \
        const std::string why_ = ::sinkscope::testutil::make_reference(variant, dir);        \
        if (why_ == "skip")                                                                  \
            GTEST_SKIP() << "/usr/bin/python3 with NumPy not found (Debian: python3-numpy)"; \
        ASSERT_EQ(why_, "") << "tiny_decoder_ref.py " << (variant);                          \
    } while (0)
