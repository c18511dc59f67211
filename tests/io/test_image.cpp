// Images for vision models: PNG decoding (against PNGs written by a minimal encoder here, not by
// the code under test), .npy images, image sets, PIL-compatible bilinear resize and the
// ViTImageProcessor preprocessing against the zoo's golden pixel_values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {

// ---- a minimal PNG encoder: stored (uncompressed) deflate blocks, one IDAT, filter 0
// -------------
uint32_t crc32(const std::string& s) {
    uint32_t c = 0xffffffffu;
    for (unsigned char b : s) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

std::string be32(uint32_t v) {
    return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string chunk(const std::string& type, const std::string& data) {
    return be32(uint32_t(data.size())) + type + data + be32(crc32(type + data));
}

// zlib stream of stored blocks (RFC 1950/1951) with its Adler-32.
std::string zlib_stored(const std::string& raw) {
    std::string out = "\x78\x01";
    size_t pos = 0;
    do {
        const size_t n = std::min<size_t>(raw.size() - pos, 65535);
        const bool last = pos + n == raw.size();
        out += char(last ? 1 : 0);
        out += char(n & 0xff), out += char(n >> 8);
        out += char(~n & 0xff), out += char((~n >> 8) & 0xff);
        out += raw.substr(pos, n);
        pos += n;
    } while (pos < raw.size());
    uint32_t a = 1, b = 0;
    for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
    return out + be32((b << 16) | a);
}

// rows: packed scanlines without the filter byte.
std::string encode_png(uint32_t w, uint32_t h, int bit_depth, int color_type,
                       const std::vector<std::string>& rows, const std::string& plte = "",
                       const std::string& trns = "") {
    std::string ihdr = be32(w) + be32(h);
    ihdr += char(bit_depth), ihdr += char(color_type), ihdr += '\0', ihdr += '\0', ihdr += '\0';
    std::string raw;
    for (const auto& r : rows) raw += '\0' + r;
    std::string png = "\x89PNG\r\n\x1a\n";
    png += chunk("IHDR", ihdr);
    if (!plte.empty()) png += chunk("PLTE", plte);
    if (!trns.empty()) png += chunk("tRNS", trns);
    png += chunk("IDAT", zlib_stored(raw));
    return png + chunk("IEND", "");
}

void write_bytes(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}

std::string bytes(std::initializer_list<int> v) {
    std::string s;
    for (int x : v) s += char(x);
    return s;
}

// Expects an InputError whose message starts with the file's name.
template <typename F>
void expect_input_error(F&& f, const fs::path& file) {
    try {
        f();
        FAIL() << "no error for " << file;
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(file.string(), 0), 0u) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
}

}  // namespace

// An 8-bit RGB PNG decodes to its exact levels, channels first.
TEST(Png, Rgb8Levels) {
    testutil::ScratchDir tmp;
    write_bytes(
        tmp / "a.png",
        encode_png(2, 2, 8, 2, {bytes({1, 2, 3, 4, 5, 6}), bytes({250, 251, 252, 0, 128, 255})}));
    const Image img = read_png(tmp / "a.png");
    ASSERT_EQ(img.channels, 3);
    ASSERT_EQ(img.height, 2);
    ASSERT_EQ(img.width, 2);
    EXPECT_EQ(img.range, Image::Range::Levels);
    EXPECT_EQ(img.at(0, 0, 0), 1);
    EXPECT_EQ(img.at(2, 0, 1), 6);
    EXPECT_EQ(img.at(1, 1, 0), 251);
    EXPECT_EQ(img.at(2, 1, 1), 255);
}

// 1-bit gray expands to 0/255; 8-bit gray+alpha keeps two channels.
TEST(Png, GrayBitDepthsAndAlpha) {
    testutil::ScratchDir tmp;
    write_bytes(tmp / "g1.png", encode_png(3, 1, 1, 0, {bytes({0xa0})}));  // bits 1 0 1
    const Image g = read_png(tmp / "g1.png");
    ASSERT_EQ(g.channels, 1);
    EXPECT_EQ(g.data, (std::vector<float>{255, 0, 255}));
    write_bytes(tmp / "ga.png", encode_png(1, 1, 8, 4, {bytes({77, 9})}));
    const Image ga = read_png(tmp / "ga.png");
    ASSERT_EQ(ga.channels, 2);
    EXPECT_EQ(ga.data, (std::vector<float>{77, 9}));
}

// A palette PNG expands to RGB, and to RGBA when it has a tRNS chunk.
TEST(Png, PaletteExpands) {
    testutil::ScratchDir tmp;
    const std::string plte = bytes({10, 20, 30, 200, 100, 50});
    write_bytes(tmp / "p.png", encode_png(2, 1, 8, 3, {bytes({1, 0})}, plte));
    const Image p = read_png(tmp / "p.png");
    ASSERT_EQ(p.channels, 3);
    EXPECT_EQ(p.data, (std::vector<float>{200, 10, 100, 20, 50, 30}));
    write_bytes(tmp / "pt.png", encode_png(2, 1, 8, 3, {bytes({1, 0})}, plte, bytes({0})));
    const Image pt = read_png(tmp / "pt.png");
    ASSERT_EQ(pt.channels, 4);
    EXPECT_EQ(pt.at(3, 0, 0), 255);  // entry 1 has no tRNS value: opaque
    EXPECT_EQ(pt.at(3, 0, 1), 0);
}

// write_png (libpng) then read_png gives back the same levels for 1 to 4 channels.
TEST(Png, WriteReadRoundTrip) {
    testutil::ScratchDir tmp;
    for (int64_t c = 1; c <= 4; ++c) {
        Image img;
        img.channels = c, img.height = 3, img.width = 5;
        for (int64_t i = 0; i < c * 15; ++i) img.data.push_back(float((i * 37) % 256));
        write_png(tmp / "w.png", img);
        const Image back = read_png(tmp / "w.png");
        EXPECT_EQ(back.channels, c);
        EXPECT_EQ(back.data, img.data) << c << " channels";
    }
}

// Truncated, corrupted (bad CRC), empty and non-PNG files are one InputError naming the file.
TEST(Png, BadFilesNameTheFile) {
    testutil::ScratchDir tmp;
    const std::string good =
        encode_png(4, 4, 8, 2, std::vector<std::string>(4, std::string(12, 'x')));
    write_bytes(tmp / "trunc.png", good.substr(0, good.size() - 30));
    expect_input_error([&] { read_png(tmp / "trunc.png"); }, tmp / "trunc.png");
    std::string bad_crc = good;
    bad_crc[50] ^= 0x55;  // inside IDAT's data (IDAT data starts at byte 41)
    write_bytes(tmp / "crc.png", bad_crc);
    expect_input_error([&] { read_png(tmp / "crc.png"); }, tmp / "crc.png");
    write_bytes(tmp / "empty.png", "");
    expect_input_error([&] { read_png(tmp / "empty.png"); }, tmp / "empty.png");
    write_bytes(tmp / "text.png", "hello, not an image");
    expect_input_error([&] { read_png(tmp / "text.png"); }, tmp / "text.png");
}

// .npy images: [C, H, W] and [H, W, C] give the same channels-first image; a stack gives N.
TEST(NpyImages, LayoutsAndStack) {
    testutil::ScratchDir tmp;
    std::vector<float> chw(3 * 2 * 4);
    for (size_t i = 0; i < chw.size(); ++i) chw[i] = float(i) / 32.0f;
    std::vector<float> hwc(chw.size());
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 4; ++x) hwc[(y * 4 + x) * 3 + c] = chw[(c * 2 + y) * 4 + x];
    write_npy(tmp / "chw.npy", make_npy_f32({3, 2, 4}, chw));
    write_npy(tmp / "hwc.npy", make_npy_f32({2, 4, 3}, hwc));
    const auto a = read_npy_images(tmp / "chw.npy");
    const auto b = read_npy_images(tmp / "hwc.npy");
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(a[0].data, chw);
    EXPECT_EQ(b[0].data, chw);
    EXPECT_EQ(b[0].height, 2);
    EXPECT_EQ(a[0].range, Image::Range::Unit);
    std::vector<float> stack = chw;
    stack.insert(stack.end(), chw.begin(), chw.end());
    write_npy(tmp / "stack.npy", make_npy_f32({2, 3, 2, 4}, stack));
    EXPECT_EQ(read_npy_images(tmp / "stack.npy").size(), 2u);
}

// Values outside [0, 1], integer dtypes and wrong ranks are InputErrors naming the file.
TEST(NpyImages, BadArrays) {
    testutil::ScratchDir tmp;
    write_npy(tmp / "range.npy", make_npy_f32({3, 2, 2}, std::vector<float>(12, -0.5f)));
    expect_input_error([&] { read_npy_images(tmp / "range.npy"); }, tmp / "range.npy");
    write_npy(tmp / "int.npy", make_npy_i64({3, 2, 2}, std::vector<int64_t>(12, 1)));
    expect_input_error([&] { read_npy_images(tmp / "int.npy"); }, tmp / "int.npy");
    write_npy(tmp / "rank.npy", make_npy_f32({4, 4}, std::vector<float>(16, 0.5f)));
    expect_input_error([&] { read_npy_images(tmp / "rank.npy"); }, tmp / "rank.npy");
    const std::string whole = read_file(tmp / "range.npy");
    write_bytes(tmp / "cut.npy", whole.substr(0, whole.size() - 8));
    expect_input_error([&] { read_npy_images(tmp / "cut.npy"); }, tmp / "cut.npy");
}

// A directory of PNGs is read in name order and --samples caps it; other paths are refused.
TEST(ImageSetTest, DirectoryOrderAndErrors) {
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "imgs");
    write_bytes(tmp / "imgs/b.png", encode_png(1, 1, 8, 0, {bytes({2})}));
    write_bytes(tmp / "imgs/a.png", encode_png(1, 1, 8, 0, {bytes({1})}));
    write_bytes(tmp / "imgs/c.PNG", encode_png(1, 1, 8, 0, {bytes({3})}));
    write_bytes(tmp / "imgs/notes.txt", "ignored");
    const ImageSet all = ImageSet::open(tmp / "imgs");
    ASSERT_EQ(all.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(all.get(k).data[0], float(k + 1));
    EXPECT_EQ(ImageSet::open(tmp / "imgs", 2).size(), 2u);
    fs::create_directories(tmp / "none");
    expect_input_error([&] { ImageSet::open(tmp / "none"); }, tmp / "none");
    write_bytes(tmp / "x.txt", "text");
    expect_input_error([&] { ImageSet::open(tmp / "x.txt"); }, tmp / "x.txt");
}

// Resize equals PIL's Image.resize(BILINEAR) on 8-bit images (values printed by PIL 9.4):
// upscaling [0, 255] to 4 and downscaling an 8x6 ramp to 3x4 (antialiased support).
TEST(Resize, MatchesPilBilinear) {
    Image row;
    row.channels = 1, row.height = 1, row.width = 2, row.data = {0, 255};
    EXPECT_EQ(resize_bilinear(row, 1, 4).data, (std::vector<float>{0, 64, 191, 255}));
    Image ramp;
    ramp.channels = 1, ramp.height = 6, ramp.width = 8;
    for (int i = 0; i < 48; ++i) ramp.data.push_back(float(i * 5));
    EXPECT_EQ(resize_bilinear(ramp, 4, 3).data,
              (std::vector<float>{21, 33, 44, 77, 89, 100, 135, 147, 158, 191, 203, 214}));
}

// Without preprocessor_config.json nothing is changed, and a wrong size or channel count is an
// InputError naming the image; with do_convert_rgb gray becomes RGB.
TEST(ImageProcessorTest, DefaultsAndMismatches) {
    Image img;
    img.channels = 3, img.height = 2, img.width = 2, img.source = "img.png";
    img.data.assign(12, 7.0f);
    ImageProcessor p;
    EXPECT_EQ(p.preprocess(img, 3, 2), img.data);
    expect_input_error([&] { p.preprocess(img, 3, 4); }, "img.png");
    expect_input_error([&] { p.preprocess(img, 1, 2); }, "img.png");
    Image gray = img;
    gray.channels = 1;
    gray.data.assign(4, 9.0f);
    EXPECT_EQ(p.preprocess(gray, 3, 2), std::vector<float>(12, 9.0f));
    p.do_convert_rgb = false;
    expect_input_error([&] { p.preprocess(gray, 3, 2); }, "img.png");
}

// The zoo ViT's processor: a PNG of round(image.npy * 255) and image.npy itself both preprocess
// to the golden pixel_values.npy up to float32 rounding of the rescale and normalize; an upscaled
// image is resized back to 32x32.
TEST(ImageProcessorTest, ZooVitGoldenPixelValues) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path vit = shared / "zoo/vit";
    const ImageProcessor p = ImageProcessor::from_file(vit / "preprocessor_config.json");
    EXPECT_TRUE(p.do_resize && p.do_rescale && p.do_normalize);
    EXPECT_EQ(p.height, 32);
    EXPECT_EQ(p.image_mean, (std::vector<double>{0.5, 0.5, 0.5}));
    testutil::ScratchDir tmp;
    for (const char* name : {"img0", "img1", "img2"}) {
        SCOPED_TRACE(name);
        const auto images = read_npy_images(vit / "golden" / name / "image.npy");
        ASSERT_EQ(images.size(), 1u);
        const std::vector<double> want =
            read_npy(vit / "golden" / name / "pixel_values.npy").to_f64();
        Image levels = images[0];
        for (float& v : levels.data) v = std::round(v * 255.0f);
        levels.range = Image::Range::Levels;
        write_png(tmp / "x.png", levels);
        const std::vector<float> from_png = p.preprocess(read_png(tmp / "x.png"), 3, 32);
        const std::vector<float> from_npy = p.preprocess(images[0], 3, 32);
        ASSERT_EQ(from_png.size(), want.size());
        double worst = 0;
        for (size_t i = 0; i < want.size(); ++i)
            worst = std::max(
                {worst, std::fabs(from_png[i] - want[i]), std::fabs(from_npy[i] - want[i])});
        EXPECT_ERROR_WITHIN(worst, testutil::kF32FewOpsUnitAbs);  // rescale + normalize in f32
        // 64x64 nearest-neighbour upscale: resized back to 32x32 it stays close (bilinear mixes
        // neighbouring levels, so not exact) and has the model's shape.
        Image big = levels;
        big.height = big.width = 64;
        big.data.assign(size_t(3 * 64 * 64), 0.0f);
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 64; ++y)
                for (int x = 0; x < 64; ++x)
                    big.data[size_t((c * 64 + y) * 64 + x)] = levels.at(c, y / 2, x / 2);
        EXPECT_EQ(p.preprocess(big, 3, 32).size(), want.size());
    }
}
