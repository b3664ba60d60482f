// Image folders: class mapping, channel conversion, resizing, the bad-input errors, skip_bad, the
// export-images round trip, and randomly corrupted PNG, IDX and CIFAR-10 files that never crash.
#include "datasets/image_folder.h"

#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "datasets/cifar10.h"
#include "datasets/file_io.h"
#include "datasets/mnist.h"
#include "engine/config.h"
#include "tests/datasets/data_test_util.h"
#include "tests/log_capture.h"
#include "tests/tools/timeout_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

using namespace testing_data;

// A w x h image of `c` interleaved channels, every pixel `value` in every channel.
void write_png(const std::string& path, int w, int h, int c, uint8_t value) {
  fs::create_directories(fs::path(path).parent_path());
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * c, value);
  ASSERT_TRUE(stbi_write_png(path.c_str(), w, h, c, px.data(), w * c)) << path;
}

// folder/CLASS/i.png for each class: `count` gray 4x4 images of value 10 * (class position + 1).
void write_classes(const std::string& folder, const std::vector<std::string>& classes,
                   int count = 2) {
  for (size_t k = 0; k < classes.size(); ++k)
    for (int i = 0; i < count; ++i)
      write_png(folder + "/" + classes[k] + "/" + std::to_string(i) + ".png", 4, 4, 1,
                static_cast<uint8_t>(10 * (k + 1)));
}

Dataset load(const std::string& folder, const Shape& shape, ImageFolderOptions o = {},
             int classes = 10) {
  return load_image_folder(folder, "train", shape, classes, o);
}

TEST(ImageFolder, ClassesAreTheSubFoldersInSortedOrder) {
  ScratchDir dir;
  write_classes(dir.str(), {"zebra", "ant", "cat"});  // values: zebra 10, ant 20, cat 30
  Dataset d = load(dir.str(), Shape{1, 4, 4});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ant", "cat", "zebra"}));
  EXPECT_EQ(d.classes, 3);
  ASSERT_EQ(d.size(), 6);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(d.images[0], 20);       // ant
  EXPECT_EQ(d.images[5 * 16], 10);  // zebra
  EXPECT_EQ(class_mapping(d), "Labels 0=ant, 1=cat, 2=zebra\n");
}

// Files that are left out are counted in words that agree with the count: "1 file ... is".
TEST(ImageFolder, FilesLeftOutAreCountedInTheirOwnNumber) {
  ScratchDir dir;
  write_classes(dir.str(), {"ant", "cat"});
  std::ofstream(dir.str() + "/ant/notes.txt") << "x";
  std::ofstream(dir.str() + "/readme.md") << "x";
  std::string log = test::log_of([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_NE(log.find("1 file outside the class sub-folders is not used"), std::string::npos) << log;
  EXPECT_NE(log.find("1 file that is not"), std::string::npos) << log;
  std::ofstream(dir.str() + "/ant/more.txt") << "x";
  std::ofstream(dir.str() + "/license") << "x";
  log = test::log_of([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_NE(log.find("2 files outside the class sub-folders are not used"), std::string::npos)
      << log;
  EXPECT_NE(log.find("2 files that are not"), std::string::npos) << log;
}

TEST(ImageFolder, TestSplitUsesTheTrainMappingAndMayLackAClass) {
  ScratchDir dir;
  write_classes(dir.file("train"), {"ant", "bee", "cat"});
  write_classes(dir.file("test"), {"cat"});
  DataConfig c;
  c.format = "image_folder";
  set_data_path(c, dir.str(), "");
  DataSplits s = load_data(c, Shape{1, 4, 4}, 3);
  ASSERT_EQ(s.test.size(), 2);
  EXPECT_EQ(s.test.labels[0], 2);
  EXPECT_EQ(s.test.class_names, s.train.class_names);
}

TEST(ImageFolder, TestClassUnknownToTrainIsNamed) {
  ScratchDir dir;
  write_classes(dir.file("train"), {"ant"});
  write_classes(dir.file("test"), {"ant", "wasp"});
  DataConfig c;
  c.format = "image_folder";
  set_data_path(c, dir.str(), "");
  std::string msg = data_error([&] { load_data(c, Shape{1, 4, 4}, 2); });
  EXPECT_TRUE(contains(msg, "test/wasp")) << msg;
}

TEST(ImageFolder, GrayImagesBecomeRgbAndRgbBecomesGray) {
  ScratchDir dir;
  write_png(dir.file("gray/a.png"), 4, 4, 1, 77);
  fs::create_directories(dir.file("rgb"));
  const uint8_t red[] = {255, 0, 0, 255, 0, 0, 255, 0, 0, 255, 0, 0};
  ASSERT_TRUE(stbi_write_png(dir.file("rgb/r.png").c_str(), 2, 2, 3, red, 6));
  Dataset rgb = load(dir.str(), Shape{3, 2, 2});
  ASSERT_EQ(rgb.size(), 2);
  // Sample 0 (gray, resized 4x4 -> 2x2 stays uniform): every plane 77. Sample 1: planes R, G, B.
  for (int p = 0; p < 12; ++p) EXPECT_EQ(rgb.images[p], 77) << p;
  EXPECT_EQ(rgb.images[12], 255);
  EXPECT_EQ(rgb.images[12 + 4], 0);
  EXPECT_EQ(rgb.images[12 + 8], 0);
  Dataset gray = load(dir.str(), Shape{1, 2, 2});
  EXPECT_NEAR(gray.images[4], 0.299 * 255, 1.0);  // red's luma
}

TEST(ImageFolder, ImagesAreResizedToTheModelInput) {
  ScratchDir dir;
  // 8x4: left half 0, right half 200 -> 4x2 keeps the halves.
  std::vector<uint8_t> px(8 * 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 8; ++x) px[y * 8 + x] = x < 4 ? 0 : 200;
  fs::create_directories(dir.file("a"));
  ASSERT_TRUE(stbi_write_png(dir.file("a/halves.png").c_str(), 8, 4, 1, px.data(), 8));
  Dataset d = load(dir.str(), Shape{1, 2, 4});
  ASSERT_EQ(d.images.size(), 8u);
  for (int y = 0; y < 2; ++y) {
    EXPECT_LE(d.images[y * 4 + 0], 5);
    EXPECT_GE(d.images[y * 4 + 3], 195);
  }
}

TEST(ImageFolder, ResizeOffMakesASizeMismatchAnErrorNamingTheFile) {
  ScratchDir dir;
  write_png(dir.file("a/ok.png"), 4, 4, 1, 1);
  write_png(dir.file("a/wide.png"), 6, 4, 1, 1);
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}, {false, false}); });
  EXPECT_TRUE(contains(msg, "a/wide.png")) << msg;
  EXPECT_TRUE(contains(msg, "6x4")) << msg;
  EXPECT_TRUE(contains(msg, "resize")) << msg;
  EXPECT_EQ(load(dir.str(), Shape{1, 4, 4}).size(), 2);  // resize on (the default) takes both
}

TEST(ImageFolder, MissingFolderIsNamed) {
  ScratchDir dir;
  std::string msg = data_error([&] { load(dir.file("nowhere"), Shape{1, 4, 4}); });
  EXPECT_TRUE(contains(msg, "nowhere")) << msg;
  EXPECT_TRUE(contains(msg, "does not exist")) << msg;
}

TEST(ImageFolder, FolderWithoutClassSubFoldersIsAnError) {
  ScratchDir dir;
  write_png(dir.file("loose.png"), 4, 4, 1, 1);
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_TRUE(contains(msg, "no class sub-folders")) << msg;
  EXPECT_TRUE(contains(msg, "loose.png")) << msg;
}

TEST(ImageFolder, EmptyClassFolderIsNamed) {
  ScratchDir dir;
  write_classes(dir.str(), {"ant"});
  fs::create_directories(dir.file("bee"));
  write_file(dir.file("bee/notes.txt"), {'h', 'i'});
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_TRUE(contains(msg, "bee' holds no images")) << msg;
  EXPECT_TRUE(contains(msg, "(only 1 file of other types)")) << msg;
}

TEST(ImageFolder, MoreClassFoldersThanModelOutputsIsAnError) {
  ScratchDir dir;
  write_classes(dir.str(), {"a", "b", "c"}, 1);
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}, {}, 2); });
  EXPECT_TRUE(contains(msg, "3 class sub-folders but the model has 2 outputs")) << msg;
}

TEST(ImageFolder, FlatModelInputIsRefused) {
  ScratchDir dir;
  write_classes(dir.str(), {"a"});
  std::string msg = data_error([&] { load(dir.str(), Shape{16}); });
  EXPECT_TRUE(contains(msg, "[16]")) << msg;
}

TEST(ImageFolder, CorruptImageStopsTheLoadNamingTheFile) {
  ScratchDir dir;
  write_classes(dir.str(), {"ant"});
  write_file(dir.file("ant/broken.png"), {0x89, 'P', 'N', 'G', 1, 2, 3});
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_TRUE(contains(msg, "ant/broken.png")) << msg;
  EXPECT_TRUE(contains(msg, "skip_bad")) << msg;
}

// A small file can announce a huge image (its header's width and height): refused by what it
// announces, before stb_image allocates it.
TEST(ImageFolder, AnImageAnnouncingHugeDimensionsIsRefusedBeforeDecoding) {
  ScratchDir dir;
  write_classes(dir.str(), {"a"});
  const std::string path = dir.file("a/0.png");
  std::vector<uint8_t> png = data_io::read_file(path);
  // The IHDR chunk's width and height: big-endian, at bytes 16 and 20; then its CRC (libpng
  // checks it), over the chunk's type and data, at byte 29.
  for (int at : {16, 20}) {
    png[at] = 0, png[at + 1] = 0, png[at + 2] = 0x4E, png[at + 3] = 0x20;  // 20000
  }
  const uint32_t crc = static_cast<uint32_t>(crc32(0, png.data() + 12, 17));
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  write_file(path, png);
  const std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}); });
  EXPECT_TRUE(contains(msg, "the image '" + path + "' announces 20000x20000 pixels")) << msg;
}

// Only regular files are images: one that is a FIFO is refused by name when read directly.
TEST(ImageFolder, AFifoGivenAsAnImageIsRefusedByName) {
  ScratchDir dir;
  const std::string fifo = dir.file("pipe.png");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // In a child, killed if it waits for a writer, so that a regression fails rather than hangs.
  const test::ChildResult r = test::run_in_child(10, [&] {
    std::vector<uint8_t> out(16);
    const std::string msg = data_error([&] { decode_image(fifo, Shape{1, 4, 4}, out.data()); });
    return contains(msg, "the image '" + fifo + "' is a FIFO (named pipe), not a file") ? 0 : 1;
  });
  EXPECT_FALSE(r.timed_out) << "reading the FIFO waited";
  EXPECT_EQ(r.exit_code, 0);
}

TEST(ImageFolder, SkipBadLeavesCorruptImagesOutCountsThemAndListsTheFirstTen) {
  ScratchDir dir;
  write_classes(dir.str(), {"ant", "bee"}, 3);
  for (int i = 0; i < 12; ++i)
    write_file(dir.file("bee/bad" + std::to_string(10 + i) + ".jpg"), {0xFF, 0xD8, 0xFF, 0});
  Dataset d = load(dir.str(), Shape{1, 4, 4}, {true, true});
  EXPECT_EQ(d.size(), 6);
  EXPECT_EQ(d.skipped, 12);
  ASSERT_EQ(d.skipped_examples.size(), 10u);
  EXPECT_TRUE(contains(d.skipped_examples[0], "bee/bad10.jpg")) << d.skipped_examples[0];
  DataSplits s{d, Dataset{}};
  std::string report = skipped_report(s);
  EXPECT_TRUE(contains(report, "Skipped 12 images")) << report;
  EXPECT_TRUE(contains(report, "the first 10")) << report;
}

TEST(ImageFolder, SkipBadStillRefusesAClassLeftWithoutImages) {
  ScratchDir dir;
  write_classes(dir.str(), {"ant"});
  fs::create_directories(dir.file("bee"));
  write_file(dir.file("bee/bad.png"), {1, 2, 3});
  std::string msg = data_error([&] { load(dir.str(), Shape{1, 4, 4}, {true, true}); });
  EXPECT_TRUE(contains(msg, "bee' holds no image that decodes")) << msg;
}

// --- config keys ---------------------------------------------------------------------------------

std::string config_text(const std::string& data) {
  return "input: {shape: [1, 4, 4]}\nlayers: [flatten, {dense: {units: 2}}]\ndata: " + data + "\n";
}

std::string config_error(const std::string& data) {
  try {
    parse_config(config_text(data), "bad.yaml");
  } catch (const ConfigError& e) {
    return e.cause();
  }
  ADD_FAILURE() << "accepted: " << data;
  return "";
}

TEST(ImageFolderConfig, PathHoldsTheTrainAndTestFolders) {
  Config c = parse_config(config_text("{format: image_folder, path: /data/pets, resize: false, "
                                      "skip_bad: true}"),
                          "/cfg/pets.yaml");
  EXPECT_EQ(c.data.train_path, "/data/pets/train");
  EXPECT_EQ(c.data.test_path, "/data/pets/test");
  EXPECT_FALSE(c.data.resize);
  EXPECT_TRUE(c.data.skip_bad);
  Config d = parse_config(config_text("{format: image_folder, path: /data/pets}"), "/cfg/x.yaml");
  EXPECT_TRUE(d.data.resize);
  EXPECT_FALSE(d.data.skip_bad);
}

TEST(ImageFolderConfig, ResizeMustBeABoolean) {
  std::string e = config_error("{format: image_folder, path: /p, resize: maybe}");
  EXPECT_TRUE(contains(e, "bad.yaml:3:")) << e;
  EXPECT_TRUE(contains(e, "'resize': expected true or false, got 'maybe'")) << e;
}

TEST(ImageFolderConfig, SkipBadMustBeABoolean) {
  std::string e = config_error("{format: image_folder, path: /p, skip_bad: 3}");
  EXPECT_TRUE(contains(e, "'skip_bad': expected true or false")) << e;
}

TEST(ImageFolderConfig, ImageKeysOnAnotherFormatAreRefused) {
  std::string e = config_error("{format: mnist, path: /p, skip_bad: true}");
  EXPECT_TRUE(contains(e, "'skip_bad': applies to format image_folder only, not mnist")) << e;
  e = config_error("{format: cifar10, path: /p, resize: false}");
  EXPECT_TRUE(contains(e, "'resize': applies to format image_folder only")) << e;
}

TEST(ImageFolderConfig, TrainFolderAloneIsRefused) {
  std::string e = config_error("{format: image_folder, train: /p/train}");
  EXPECT_TRUE(contains(
      e, "needs a test split: data.test, data.path holding train/ and test/, or data.test_split"))
      << e;
}

// --- export-images round trip --------------------------------------------------------------------

// The samples of `d` in the order an exported folder reads back: by label, then by position.
std::vector<int64_t> by_class(const Dataset& d) {
  std::vector<int64_t> order(static_cast<size_t>(d.size()));
  for (int64_t i = 0; i < d.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return d.labels[a] < d.labels[b]; });
  return order;
}

void expect_round_trip(const std::string& data_yaml, const std::string& shape, int classes) {
  ScratchDir dir;
  const std::string yaml = "input: {shape: " + shape +
                           "}\nlayers: [flatten, {dense: {units: " + std::to_string(classes) +
                           "}}]\ndata: " + data_yaml + "\n";
  write_file(dir.file("source.yaml"), std::vector<uint8_t>(yaml.begin(), yaml.end()));
  RunRequest r;
  r.config_path = dir.file("source.yaml");
  r.out_dir = dir.file("exported");
  ASSERT_EQ(run_export_images(r), 0);

  Config source = load_config(r.config_path);
  DataSplits original = load_data(source.data, source.input, classes);
  DataConfig exported;
  exported.format = "image_folder";
  exported.resize = false;
  set_data_path(exported, r.out_dir, "--data");
  DataSplits back = load_data(exported, source.input, classes);
  for (auto [a, b] : {std::pair{&original.train, &back.train}, {&original.test, &back.test}}) {
    ASSERT_EQ(a->size(), b->size());
    const std::vector<int64_t> order = by_class(*a);
    const size_t n = static_cast<size_t>(a->sample_shape.numel());
    for (int64_t k = 0; k < b->size(); ++k) {
      ASSERT_EQ(b->labels[k], a->labels[order[k]]) << "sample " << k;
      ASSERT_TRUE(std::equal(b->images.begin() + k * n, b->images.begin() + (k + 1) * n,
                             a->images.begin() + order[k] * n))
          << "sample " << k;
    }
  }
}

TEST(ExportImages, MnistRoundTripGivesTheSamePixelsAndLabels) {
  ScratchDir idx("_idx");
  write_file(idx.file("train-images-idx3-ubyte"), idx_images(13, 5, 3));
  write_file(idx.file("train-labels-idx1-ubyte"), idx_labels(13));
  write_file(idx.file("t10k-images-idx3-ubyte"), idx_images(4, 5, 3));
  write_file(idx.file("t10k-labels-idx1-ubyte"), idx_labels(4));
  expect_round_trip("{format: mnist, path: " + idx.str() + "}", "[1, 5, 3]", 10);
}

TEST(ExportImages, RgbSyntheticWithTwelveClassesRoundTripsItsLabels) {
  // Names "0".."11" do not sort as numbers: the folders are "00-0" .. "11-11".
  expect_round_trip("{format: synthetic, classes: 12, train_size: 30, test_size: 12, seed: 5}",
                    "[3, 5, 7]", 12);
}

TEST(ExportImages, LimitPerClassKeepsTheFirstSamplesOfEachClass) {
  ScratchDir dir;
  const std::string yaml =
      "input: {shape: [1, 4, 4]}\nlayers: [flatten, {dense: {units: 3}}]\n"
      "data: {format: synthetic, classes: 3, train_size: 30, test_size: 9}\n";
  write_file(dir.file("s.yaml"), std::vector<uint8_t>(yaml.begin(), yaml.end()));
  RunRequest r;
  r.config_path = dir.file("s.yaml");
  r.out_dir = dir.file("out");
  r.limit_per_class = 4;
  r.test_limit_per_class = 1;
  ASSERT_EQ(run_export_images(r), 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("out/train/1")), {}), 4);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("out/test/2")), {}), 1);
  EXPECT_TRUE(fs::exists(dir.file("out/train/1/00001.png")));  // sample 1 is the first of class 1
  EXPECT_THROW(run_export_images(r), UsageError);              // the folder is no longer empty
}

// --- randomised corruption -----------------------------------------------------------------------

std::vector<uint8_t> corpus(const std::string& name) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/datasets/corpus/" + name,
                   std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

// Cuts the file short, flips a few bits or overwrites a few bytes (or several of these).
std::vector<uint8_t> mutate(std::vector<uint8_t> b, std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 4);
  if ((kind == 0 || kind == 3) && !b.empty()) b.resize(rng() % b.size());
  if ((kind == 1 || kind == 3) && !b.empty())
    for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
      b[rng() % b.size()] ^= 1 << (rng() % 8);
  if (kind == 2 && !b.empty())
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
      b[rng() % b.size()] = static_cast<uint8_t>(rng());
  return b;
}

TEST(ImageFolder, PngJpegBmpTgaAndGifFilesAllLoad) {
  ScratchDir dir;
  const std::vector<std::string> names = {"digit.png", "rgb.png",   "rgb.jpg",
                                          "rgb.bmp",   "digit.tga", "dot.gif"};
  fs::create_directories(dir.file("a"));
  for (const std::string& name : names) write_file(dir.file("a/" + name), corpus(name));
  Dataset d = load(dir.str(), Shape{3, 8, 8});
  EXPECT_EQ(d.size(), static_cast<int64_t>(names.size()));
}

// The kinds training reads are the kinds predict reads (one list): binary PGM and PPM too, in any
// case of the extension; a text file among them is left out.
TEST(ImageFolder, PgmAndPpmFilesLoadAsPredictReadsThem) {
  ScratchDir dir;
  fs::create_directories(dir.file("a"));
  std::string pgm = "P5\n4 4\n255\n", ppm = "P6\n4 4\n255\n";
  pgm.append(16, static_cast<char>(200));
  for (int i = 0; i < 16; ++i) ppm += std::string{char(10), char(20), char(30)};
  write_file(dir.file("a/g.pgm"), std::vector<uint8_t>(pgm.begin(), pgm.end()));
  write_file(dir.file("a/c.PPM"), std::vector<uint8_t>(ppm.begin(), ppm.end()));
  write_file(dir.file("a/notes.txt"), std::vector<uint8_t>{'h', 'i'});
  Dataset d = load(dir.str(), Shape{1, 4, 4});
  EXPECT_EQ(d.size(), 2);
  EXPECT_TRUE(has_image_extension("x.Pnm"));
  EXPECT_FALSE(has_image_extension("x.txt"));
}

TEST(ImageFolder, PixelsOfWrittenPngBmpTgaAndJpegFilesDecodeInPlanes) {
  ScratchDir dir;
  // An 8x8 RGB gradient, interleaved as the files hold it; smooth, so JPEG keeps it closely.
  std::vector<uint8_t> hwc(8 * 8 * 3);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      for (int k = 0; k < 3; ++k)
        hwc[(y * 8 + x) * 3 + k] = static_cast<uint8_t>(20 * x + 8 * y + 40 * k);
  fs::create_directories(dir.file("a"));
  const std::string stem = dir.file("a/p");
  ASSERT_TRUE(stbi_write_bmp((stem + ".bmp").c_str(), 8, 8, 3, hwc.data()));
  ASSERT_TRUE(stbi_write_jpg((stem + ".jpg").c_str(), 8, 8, 3, hwc.data(), 100));
  ASSERT_TRUE(stbi_write_png((stem + ".png").c_str(), 8, 8, 3, hwc.data(), 8 * 3));
  ASSERT_TRUE(stbi_write_tga((stem + ".tga").c_str(), 8, 8, 3, hwc.data()));
  Dataset d = load(dir.str(), Shape{3, 8, 8});
  ASSERT_EQ(d.size(), 4);  // p.bmp, p.jpg, p.png, p.tga
  for (int64_t i = 0; i < 4; ++i) {
    int worst = 0;
    for (int k = 0; k < 3; ++k)
      for (int p = 0; p < 64; ++p)
        worst = std::max(worst, std::abs(d.images[i * 192 + k * 64 + p] - hwc[p * 3 + k]));
    EXPECT_LE(worst, i == 1 ? 4 : 0) << "file " << i << " of p.bmp, p.jpg, p.png, p.tga";
  }
}

TEST(Corruption, RandomlyDamagedFilesLoadOrThrowADataErrorNeverCrash) {
  const std::vector<std::string> images = {"digit.png", "rgb.png",   "rgb.jpg",
                                           "rgb.bmp",   "digit.tga", "dot.gif"};
  std::map<std::string, std::vector<uint8_t>> seeds;
  for (const std::string& name : images) seeds[name] = corpus(name);
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "test_batch.bin"})
    seeds[name] = corpus(name);
  for (const auto& [name, bytes] : seeds) ASSERT_FALSE(bytes.empty()) << "corpus file " << name;

  ScratchDir dir;
  std::mt19937_64 rng(20240605);
  int loaded = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string case_dir = dir.file(std::to_string(round));
    fs::create_directories(case_dir);
    std::string what;
    try {
      switch (round % 3) {
        case 0: {  // an image folder of one damaged image beside an intact one
          const std::string& name = images[rng() % images.size()];
          what = name;
          fs::create_directories(case_dir + "/a");
          fs::create_directories(case_dir + "/b");
          write_file(case_dir + "/a/ok.png", seeds["digit.png"]);
          write_file(case_dir + "/b/" + name, mutate(seeds[name], rng));
          load_image_folder(case_dir, "train", Shape{3, 8, 8}, 10, {true, rng() % 2 == 0});
          break;
        }
        case 1: {  // an IDX pair with one damaged file, plain or gzipped
          const bool images_file = rng() % 2 == 0, gz = rng() % 3 == 0;
          what = images_file ? "IDX images" : "IDX labels";
          std::string images_name = "train-images-idx3-ubyte",
                      labels_name = "train-labels-idx1-ubyte";
          std::vector<uint8_t> img = seeds[images_name], lab = seeds[labels_name];
          (images_file ? img : lab) = mutate(images_file ? img : lab, rng);
          if (gz) {
            write_gz(case_dir + "/" + images_name + ".gz", img);
            write_file(case_dir + "/" + labels_name, lab);
          } else {
            write_file(case_dir + "/" + images_name, img);
            write_file(case_dir + "/" + labels_name, lab);
          }
          load_mnist(case_dir, true, Shape{1, 4, 4}, 10);
          break;
        }
        default:  // a damaged CIFAR-10 test batch
          what = "CIFAR-10 batch";
          write_file(case_dir + "/test_batch.bin", mutate(seeds["test_batch.bin"], rng));
          load_cifar10(case_dir, false, 10);
      }
      ++loaded;
    } catch (const DataError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "round " << round << " (" << what << "): not a DataError: " << e.what();
    }
    fs::remove_all(case_dir);
  }
  // Both outcomes occur: truncations are refused, a flipped pixel still loads.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tandem
