// MNIST IDX reader: the bundled sample, IDX files written here (plain and gzipped), and the
// messages for corrupt or mismatched files.
#include "datasets/mnist.h"

#include <gtest/gtest.h>

#include "datasets/dataset.h"
#include "tests/datasets/data_test_util.h"

namespace tandem {
namespace {

using namespace testing_data;

const Shape kMnistInput{1, 28, 28};

// A train pair of n 4x3 images and a test pair of m.
void write_small_mnist(const ScratchDir& dir, bool gz, uint32_t n = 12, uint32_t m = 5) {
  auto put = gz ? write_gz : write_file;
  std::string ext = gz ? ".gz" : "";
  put(dir.file("train-images-idx3-ubyte" + ext), idx_images(n, 4, 3));
  put(dir.file("train-labels-idx1-ubyte" + ext), idx_labels(n));
  put(dir.file("t10k-images-idx3-ubyte" + ext), idx_images(m, 4, 3));
  put(dir.file("t10k-labels-idx1-ubyte" + ext), idx_labels(m));
}

TEST(Mnist, BundledSampleLoads8000TrainAnd2000TestDigits) {
  DataConfig c;
  c.format = "mnist";
  c.train_path = std::string(TANDEM_SOURCE_DIR) + "/datasets/mnist-sample";
  DataSplits s = load_data(c, kMnistInput, 10);
  EXPECT_EQ(s.train.size(), 8000);
  EXPECT_EQ(s.test.size(), 2000);
  EXPECT_EQ(s.train.sample_shape, kMnistInput);
  EXPECT_EQ(s.train.classes, 10);
  EXPECT_EQ(s.train.images.size(), 8000u * 784u);
  EXPECT_EQ(s.test.images.size(), 2000u * 784u);
  std::vector<int> seen(10, 0);
  for (int32_t l : s.train.labels) seen.at(l)++;
  for (int k = 0; k < 10; ++k) EXPECT_GT(seen[k], 600) << "class " << k;
}

TEST(Mnist, PlainIdxFilesLoadWithTheirPixelsAndLabels) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  Dataset d = load_mnist(dir.str(), true, Shape{1, 4, 3}, 10);
  ASSERT_EQ(d.size(), 12);
  EXPECT_EQ(d.sample_shape, (Shape{1, 4, 3}));
  EXPECT_EQ(d.labels[11], 1);
  EXPECT_EQ(d.images[5 * 12 + 2], (5 * 7 + 2) % 256);
  EXPECT_EQ(load_mnist(dir.str(), false, Shape{1, 4, 3}, 10).size(), 5);
}

TEST(Mnist, GzippedIdxFilesLoadTheSameAsPlain) {
  ScratchDir plain("_plain"), gz("_gz");
  write_small_mnist(plain, false);
  write_small_mnist(gz, true);
  Dataset a = load_mnist(plain.str(), true, Shape{1, 4, 3}, 10);
  Dataset b = load_mnist(gz.str(), true, Shape{1, 4, 3}, 10);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
}

TEST(Mnist, TestSplitAcceptsTestPrefixedNames) {
  ScratchDir dir;
  write_file(dir.file("test-images-idx3-ubyte"), idx_images(3, 4, 3));
  write_file(dir.file("test-labels-idx1-ubyte"), idx_labels(3));
  EXPECT_EQ(load_mnist(dir.str(), false, Shape{1, 4, 3}, 10).size(), 3);
}

TEST(Mnist, FlatModelInputOfTheSameSizeIsAccepted) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  EXPECT_EQ(load_mnist(dir.str(), true, Shape{12}, 10).sample_shape, (Shape{1, 4, 3}));
}

TEST(Mnist, BadMagicNumberNamesTheFileAndBothNumbers) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  write_file(dir.file("train-images-idx3-ubyte"), idx_images(12, 4, 3, 1234));
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte")) << msg;
  EXPECT_TRUE(contains(msg, "1234")) << msg;
  EXPECT_TRUE(contains(msg, "2051")) << msg;
}

TEST(Mnist, LabelsFileInPlaceOfImagesIsRecognised) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  write_file(dir.file("train-images-idx3-ubyte"), idx_labels(12));
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "looks like a labels file")) << msg;
}

TEST(Mnist, TruncatedImagesFileGivesExpectedAndActualBytes) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  std::vector<uint8_t> bytes = idx_images(12, 4, 3);  // 16 + 144 bytes
  bytes.resize(100);
  write_file(dir.file("train-images-idx3-ubyte"), bytes);
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte")) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  EXPECT_TRUE(contains(msg, "160 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "100 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "byte offset 100, in record 7")) << msg;  // (100 - 16) / 12
}

// A damaged raw file is read before the good .gz beside it: the hint says how to read the .gz.
TEST(Mnist, ADamagedRawFileBesideItsGzipNamesTheGzipInTheHint) {
  ScratchDir dir;
  write_small_mnist(dir, true);
  std::vector<uint8_t> bytes = idx_images(12, 4, 3);
  bytes.resize(100);
  const std::string raw = dir.file("train-images-idx3-ubyte");
  write_file(raw, bytes);
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "hint: remove the damaged '" + raw + "' to read '" + raw +
                                ".gz' beside it, or download the MNIST IDX files again"))
      << msg;
  fs::remove(raw);
  EXPECT_EQ(load_mnist(dir.str(), true, Shape{1, 4, 3}, 10).size(), 12);
}

TEST(Mnist, TruncatedGzipStreamIsReportedAsCorrupt) {
  ScratchDir dir;
  write_small_mnist(dir, true);
  std::string path = dir.file("train-images-idx3-ubyte.gz");
  fs::resize_file(path, fs::file_size(path) / 2);
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "decompressed bytes")) << msg;
}

TEST(Mnist, ImageAndLabelCountMismatchNamesBothFiles) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels(11));
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "12 images")) << msg;
  EXPECT_TRUE(contains(msg, "11 labels")) << msg;
  EXPECT_TRUE(contains(msg, "train-labels-idx1-ubyte")) << msg;
}

TEST(Mnist, LabelOutOfRangeNamesTheRecordAndFile) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  std::vector<uint8_t> labels(12, 3);
  labels[7] = 10;
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels(12, labels));
  std::string msg = data_error([&] { load_mnist(dir.str(), true, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "label 10 of record 7 (byte offset 15)")) << msg;
  EXPECT_TRUE(contains(msg, "train-labels-idx1-ubyte")) << msg;
}

TEST(Mnist, MissingFileNamesWhatWasLookedFor) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  fs::remove(dir.file("t10k-labels-idx1-ubyte"));
  std::string msg = data_error([&] { load_mnist(dir.str(), false, Shape{1, 4, 3}, 10); });
  EXPECT_TRUE(contains(msg, "t10k-labels-idx1-ubyte[.gz]")) << msg;
  EXPECT_TRUE(contains(msg, "test-labels-idx1-ubyte[.gz]")) << msg;
  EXPECT_TRUE(contains(msg, dir.str())) << msg;
  EXPECT_TRUE(contains(msg, "MNIST IDX files")) << msg;
}

TEST(Mnist, MissingFolderIsNamed) {
  ScratchDir dir;
  std::string missing = dir.file("no-such-folder");
  std::string msg = data_error([&] { load_mnist(missing, true, kMnistInput, 10); });
  EXPECT_TRUE(contains(msg, missing)) << msg;
  EXPECT_TRUE(contains(msg, "does not exist")) << msg;
}

TEST(Mnist, ImageSizeOtherThanTheModelInputNamesBothShapes) {
  ScratchDir dir;
  write_small_mnist(dir, false);
  std::string msg = data_error([&] { load_mnist(dir.str(), true, kMnistInput, 10); });
  EXPECT_TRUE(contains(msg, "[1, 4, 3]")) << msg;
  EXPECT_TRUE(contains(msg, "[1, 28, 28]")) << msg;
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte")) << msg;
}

}  // namespace
}  // namespace tandem
