// Image decoding (datasets/image_decode.h): the checks made before a header is trusted, the kinds
// refused by content, libjpeg-turbo's scaled decoding against a full decode and resize, PNG pixels
// exact, and every input a fuzz target once crashed on (tests/fuzz/regressions/image/).
#include "datasets/image_decode.h"

#include <gtest/gtest.h>
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "datasets/file_io.h"
#include "datasets/image_folder.h"
#include "tests/datasets/data_test_util.h"

namespace tandem {
namespace {

using namespace testing_data;

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

DecodedImage decode(const std::vector<uint8_t>& b, int c, int h, int w,
                    std::vector<uint8_t>* out = nullptr, bool resize = true) {
  std::vector<uint8_t> scratch(static_cast<size_t>(c) * h * w);
  std::vector<uint8_t>& o = out ? *out : scratch;
  o.resize(scratch.size());
  return decode_image_bytes(b.data(), b.size(), c, h, w, resize, o.data());
}

// An w x h RGB image of smooth gradients and a little noise, interleaved (HWC).
std::vector<uint8_t> photo_like(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k)
        px[(static_cast<size_t>(y) * w + x) * 3 + k] = static_cast<uint8_t>(std::clamp(
            128 + 90 * std::sin(x / (40.0 + 10 * k)) * std::cos(y / 55.0) + int(rng() % 9) - 4, 0.0,
            255.0));
  return px;
}

std::vector<uint8_t> encode(int (*write)(stbi_write_func*, void*, int, int, int, const void*, int),
                            int w, int h, int c, const std::vector<uint8_t>& px, int arg) {
  std::vector<uint8_t> out;
  write(
      [](void* ctx, void* data, int n) {
        auto* o = static_cast<std::vector<uint8_t>*>(ctx);
        o->insert(o->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + n);
      },
      &out, w, h, c, px.data(), arg);
  return out;
}

std::vector<uint8_t> jpeg(int w, int h, const std::vector<uint8_t>& px, int quality) {
  return encode([](stbi_write_func* f, void* ctx, int w, int h, int c, const void* d,
                   int q) { return stbi_write_jpg_to_func(f, ctx, w, h, c, d, q); },
                w, h, 3, px, quality);
}

std::vector<uint8_t> png(int w, int h, int c, const std::vector<uint8_t>& px) {
  return encode([](stbi_write_func* f, void* ctx, int w, int h, int c, const void* d,
                   int) { return stbi_write_png_to_func(f, ctx, w, h, c, d, w * c); },
                w, h, c, px, 0);
}

// The PGM header whose height field is not a number: stb_image decodes it as 9x0, which once
// aborted the process in stb_image_resize's assertion (exit 134, no message).
TEST(ImageDecode, APgmWhoseHeightIsNotANumberIsRefusedAsHavingNoPixels) {
  std::vector<uint8_t> b = bytes_of("P5\n9 \xb1 1\n255\n");
  b.resize(b.size() + 200, 0x80);
  const DecodedImage d = decode(b, 1, 28, 28);
  EXPECT_EQ(d.status, DecodedImage::kBad);
  EXPECT_EQ(d.why, "has no pixels (its header says 9x0)");
}

TEST(ImageDecode, TheRefusalNamesTheFileInImageFoldersAndPredict) {
  ScratchDir dir;
  fs::create_directories(dir.file("a"));
  const std::string path = dir.file("a/bad.pgm");
  fs::copy_file(
      std::string(TANDEM_SOURCE_DIR) + "/tests/fuzz/regressions/image/pgm-height-not-a-number.pgm",
      path);
  const std::string msg = data_error([&] {
    load_image_folder(dir.str(), "train", Shape{1, 8, 8}, 2, {});
  });
  EXPECT_TRUE(contains(msg, "the image '" + path + "' has no pixels")) << msg;
  std::vector<uint8_t> out(64);
  const std::string why = data_error([&] { decode_image(path, Shape{1, 8, 8}, out.data()); });
  EXPECT_TRUE(contains(why, "the image '" + path + "' has no pixels")) << why;
}

TEST(ImageDecode, PsdHdrAndPicAreRefusedByContentNamingTheKindsRead) {
  for (const std::string& head : {std::string("8BPS"), std::string("#?RADIANCE\n"),
                                  std::string("#?RGBE\n"), std::string("\x53\x80\xF6\x34")}) {
    std::vector<uint8_t> b = bytes_of(head);
    b.resize(200, 1);
    const DecodedImage d = decode(b, 3, 8, 8);
    EXPECT_EQ(d.status, DecodedImage::kBad) << head;
    EXPECT_TRUE(contains(d.why,
                         "not one of the kinds tandem reads (PNG, JPEG, BMP, GIF, TGA, "
                         "PGM or PPM)"))
        << d.why;
  }
  EXPECT_TRUE(has_image_extension("x.HDR"));  // listed, so that a folder's HDR files are named
}

TEST(ImageDecode, AnAspectRatioBeyondTheLimitIsRefusedBeforeResizing) {
  std::vector<uint8_t> b = bytes_of("P5\n2000 1\n255\n");
  b.resize(b.size() + 2000, 7);
  const DecodedImage d = decode(b, 1, 28, 28);
  EXPECT_EQ(d.status, DecodedImage::kBad);
  EXPECT_TRUE(contains(d.why, "an aspect ratio beyond 1000:1")) << d.why;
  b = bytes_of("P5\n1000 1\n255\n");  // at the limit: resized
  b.resize(b.size() + 1000, 7);
  EXPECT_EQ(decode(b, 1, 28, 28).status, DecodedImage::kOk);
}

// stb_image fills what an uncompressed file lacks with zeros: 54 bytes could make it fill 2^27.
TEST(ImageDecode, ABmpOrPgmAnnouncingMorePixelsThanItHoldsIsRefused) {
  std::vector<uint8_t> bmp =
      encode([](stbi_write_func* f, void* ctx, int w, int h, int c, const void* d,
                int) { return stbi_write_bmp_to_func(f, ctx, w, h, c, d); },
             4, 4, 3, std::vector<uint8_t>(48, 9), 0);
  bmp[18] = 0x10, bmp[19] = 0x27;  // width 10000
  bmp[22] = 0x10, bmp[23] = 0x27;  // height 10000
  DecodedImage d = decode(bmp, 3, 8, 8);
  EXPECT_EQ(d.status, DecodedImage::kBad);
  EXPECT_TRUE(contains(d.why, "is cut short: its header announces 10000x10000 pixels")) << d.why;
  std::vector<uint8_t> pgm = bytes_of("P5\n5000 5000\n255\n");
  pgm.resize(pgm.size() + 100, 1);
  d = decode(pgm, 1, 8, 8);
  EXPECT_TRUE(contains(d.why, "is cut short")) << d.why;
}

TEST(ImageDecode, MorePixelsThanTheLimitAreRefusedBeforeDecoding) {
  std::vector<uint8_t> b = png(4, 4, 1, std::vector<uint8_t>(16, 3));
  for (int at : {16, 20}) b[at] = 0, b[at + 1] = 0, b[at + 2] = 0x4E, b[at + 3] = 0x20;  // 20000
  const uint32_t crc = static_cast<uint32_t>(crc32(0, b.data() + 12, 17));  // "IHDR" and its data
  for (int i = 0; i < 4; ++i) b[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  const DecodedImage d = decode(b, 1, 8, 8);
  EXPECT_EQ(d.status, DecodedImage::kBad);
  EXPECT_TRUE(contains(d.why, "announces 20000x20000 pixels")) << d.why;
}

// libjpeg-turbo decodes a 640x480 JPEG for an 80x60 input at 1/8: the model's size directly, and
// pixels within a few levels of a full decode (stb_image) resized (stb_image_resize).
TEST(ImageDecode, ScaledJpegDecodingGivesTheSizeAndPixelsCloseToAFullDecodeAndResize) {
  const std::vector<uint8_t> px = photo_like(640, 480, 1);
  const std::vector<uint8_t> file = jpeg(640, 480, px, 90);
  for (const auto& [h, w] : {std::pair{60, 80}, std::pair{28, 28}, std::pair{100, 150}}) {
    std::vector<uint8_t> scaled;
    ASSERT_EQ(decode(file, 3, h, w, &scaled).status, DecodedImage::kOk);
    int fw = 0, fh = 0, fc = 0;
    stbi_uc* full =
        stbi_load_from_memory(file.data(), static_cast<int>(file.size()), &fw, &fh, &fc, 3);
    ASSERT_TRUE(full);
    std::vector<uint8_t> ref(static_cast<size_t>(h) * w * 3);
    ASSERT_TRUE(stbir_resize_uint8(full, fw, fh, 0, ref.data(), w, h, 0, 3));
    stbi_image_free(full);
    double sum = 0;
    int worst = 0;
    for (int k = 0; k < 3; ++k)
      for (int p = 0; p < h * w; ++p) {
        const int diff = std::abs(scaled[k * h * w + p] - ref[p * 3 + k]);
        sum += diff, worst = std::max(worst, diff);
      }
    EXPECT_LE(sum / (3.0 * h * w), 2.0) << w << "x" << h;
    EXPECT_LE(worst, 16) << w << "x" << h;
  }
}

// At the file's own size a JPEG decodes within a few levels of stb_image's decode (the IDCT and
// chroma upsampling differ slightly between decoders).
TEST(ImageDecode, JpegAtItsOwnSizeIsWithinAFewLevelsOfStbImage) {
  const std::vector<uint8_t> file = jpeg(64, 48, photo_like(64, 48, 2), 95);
  std::vector<uint8_t> ours;
  ASSERT_EQ(decode(file, 3, 48, 64, &ours, false).status, DecodedImage::kOk);
  int w = 0, h = 0, c = 0;
  stbi_uc* theirs =
      stbi_load_from_memory(file.data(), static_cast<int>(file.size()), &w, &h, &c, 3);
  ASSERT_TRUE(theirs);
  int worst = 0;
  for (int k = 0; k < 3; ++k)
    for (int p = 0; p < 64 * 48; ++p)
      worst = std::max(worst, std::abs(ours[k * 64 * 48 + p] - theirs[p * 3 + k]));
  stbi_image_free(theirs);
  EXPECT_LE(worst, 6);
}

// PNG is lossless: every channel conversion gives exactly stb_image's pixels (its formulas).
TEST(ImageDecode, PngDecodesExactlyInEveryChannelConversion) {
  std::mt19937 rng(3);
  for (int file_c = 1; file_c <= 4; ++file_c) {
    std::vector<uint8_t> px(static_cast<size_t>(13) * 9 * file_c);
    for (uint8_t& v : px) v = static_cast<uint8_t>(rng());
    const std::vector<uint8_t> file = png(13, 9, file_c, px);
    for (int c = 1; c <= 4; ++c) {
      std::vector<uint8_t> ours;
      ASSERT_EQ(decode(file, c, 9, 13, &ours, false).status, DecodedImage::kOk);
      int w = 0, h = 0, n = 0;
      stbi_uc* ref =
          stbi_load_from_memory(file.data(), static_cast<int>(file.size()), &w, &h, &n, c);
      ASSERT_TRUE(ref);
      int differ = 0;
      for (int k = 0; k < c; ++k)
        for (int p = 0; p < 13 * 9; ++p) differ += ours[k * 13 * 9 + p] != ref[p * c + k];
      stbi_image_free(ref);
      EXPECT_EQ(differ, 0) << file_c << " channels in the file, " << c << " asked";
    }
  }
}

TEST(ImageDecode, ResizeOffRefusesAnotherSizeWithoutDecoding) {
  const DecodedImage d = decode(png(4, 4, 1, std::vector<uint8_t>(16, 3)), 1, 8, 8, nullptr, false);
  EXPECT_EQ(d.status, DecodedImage::kWrongSize);
  EXPECT_EQ(d.why, "is 4x4 (width x height) but the model's input is 8x8");
}

// Every input a fuzz target found a crash, a hang or a runaway allocation with: decoded or
// refused with a reason, at the model inputs the fuzz target tries.
TEST(ImageDecode, EveryFuzzRegressionInputDecodesOrIsRefused) {
  const fs::path dir = fs::path(TANDEM_SOURCE_DIR) / "tests/fuzz/regressions/image";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::vector<uint8_t> b = data_io::read_file(e.path().string());
    ++files;
    for (int c = 1; c <= 4; ++c)
      for (const auto& [h, w] : {std::pair{28, 28}, std::pair{224, 224}, std::pair{5, 7}}) {
        const DecodedImage d = decode(b, c, h, w);
        if (d.status != DecodedImage::kOk) {
          EXPECT_FALSE(d.why.empty()) << e.path();
        }
      }
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace tandem
