// load_data: dispatch on data.format and the checks against the model's input and classes.
#include <gtest/gtest.h>

#include "datasets/dataset.h"
#include "engine/config.h"
#include "tests/datasets/data_test_util.h"

namespace tandem {
namespace {

using namespace testing_data;

DataConfig synthetic(int64_t train, int64_t test, uint64_t seed) {
  DataConfig c;
  c.format = "synthetic";
  c.train_size = train;
  c.test_size = test;
  c.seed = seed;
  return c;
}

TEST(LoadData, SyntheticTakesTheModelInputWhenNoShapeIsGiven) {
  DataSplits s = load_data(synthetic(30, 10, 1), Shape{3, 8, 8}, 10);
  EXPECT_EQ(s.train.size(), 30);
  EXPECT_EQ(s.test.size(), 10);
  EXPECT_EQ(s.train.sample_shape, (Shape{3, 8, 8}));
}

TEST(LoadData, SyntheticShapeOtherThanTheModelInputNamesBothShapes) {
  DataConfig c = synthetic(10, 10, 1);
  c.shape = Shape{1, 28, 28};
  std::string msg = data_error([&] { load_data(c, Shape{3, 32, 32}, 10); });
  EXPECT_TRUE(contains(msg, "[1, 28, 28]")) << msg;
  EXPECT_TRUE(contains(msg, "[3, 32, 32]")) << msg;
}

TEST(LoadData, MoreSyntheticClassesThanModelOutputsIsADataError) {
  DataConfig c = synthetic(20, 10, 1);
  c.classes = 12;
  std::string msg = data_error([&] { load_data(c, Shape{1, 4, 4}, 10); });
  EXPECT_TRUE(contains(msg, "out of range")) << msg;
  EXPECT_TRUE(contains(msg, "10 classes")) << msg;
}

TEST(LoadData, MnistTestSplitComesFromItsOwnFolderWhenGiven) {
  ScratchDir train("_train"), test("_test");
  write_file(train.file("train-images-idx3-ubyte"), idx_images(6, 2, 2));
  write_file(train.file("train-labels-idx1-ubyte"), idx_labels(6));
  write_file(test.file("t10k-images-idx3-ubyte"), idx_images(4, 2, 2));
  write_file(test.file("t10k-labels-idx1-ubyte"), idx_labels(4));
  DataConfig c;
  c.format = "mnist";
  c.train_path = train.str();
  c.test_path = test.str();
  DataSplits s = load_data(c, Shape{1, 2, 2}, 10);
  EXPECT_EQ(s.train.size(), 6);
  EXPECT_EQ(s.test.size(), 4);
}

TEST(LoadData, CifarFolderLoadsBothSplits) {
  ScratchDir dir;
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(2));
  write_file(dir.file("test_batch.bin"), cifar_records(3));
  DataConfig c;
  c.format = "cifar10";
  c.train_path = dir.str();
  DataSplits s = load_data(c, Shape{3, 32, 32}, 10);
  EXPECT_EQ(s.train.size(), 10);
  EXPECT_EQ(s.test.size(), 3);
}

TEST(LoadData, CifarForAnMnistSizedModelNamesBothShapes) {
  ScratchDir dir;
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(1));
  write_file(dir.file("test_batch.bin"), cifar_records(1));
  DataConfig c;
  c.format = "cifar10";
  c.train_path = dir.str();
  std::string msg = data_error([&] { load_data(c, Shape{1, 28, 28}, 10); });
  EXPECT_TRUE(contains(msg, "[3, 32, 32]")) << msg;
  EXPECT_TRUE(contains(msg, "[1, 28, 28]")) << msg;
}

TEST(LoadData, MnistWithoutAPathSaysSo) {
  DataConfig c;
  c.format = "mnist";
  c.where = "lenet.yaml:14:3";
  std::string msg = data_error([&] { load_data(c, Shape{1, 28, 28}, 10); });
  EXPECT_TRUE(contains(msg, "no folder")) << msg;
  EXPECT_TRUE(contains(msg, "lenet.yaml:14:3")) << msg;
}

// --data given to a config of synthetic data (the shipped CIFAR-sized configs): the folder's data
// set is trained on, in its own format; a folder without one is refused, not ignored.
TEST(LoadData, DataFolderForASyntheticConfigTakesTheFormatOfWhatItHolds) {
  ScratchDir cifar("cifar"), nested("nested"), mnist("mnist"), images("images");
  for (int b = 1; b <= 5; ++b)
    write_file(cifar.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(3));
  write_file(cifar.file("test_batch.bin"), cifar_records(2));
  fs::create_directories(nested.file("cifar-10-batches-bin"));
  write_file(nested.file("cifar-10-batches-bin/test_batch.bin"), cifar_records(2));
  write_file(mnist.file("train-images-idx3-ubyte.gz"), {});
  fs::create_directories(images.file("train"));
  const std::pair<const ScratchDir*, const char*> cases[] = {
      {&cifar, "cifar10"}, {&nested, "cifar10"}, {&mnist, "mnist"}, {&images, "image_folder"}};
  for (const auto& [dir, format] : cases) {
    DataConfig c = synthetic(10, 10, 1);
    set_data_path(c, dir->str(), "--data");
    EXPECT_EQ(c.format, format) << dir->str();
  }
  DataConfig c = synthetic(10, 10, 1);
  set_data_path(c, cifar.str(), "--data");
  DataSplits s = load_data(c, Shape{3, 32, 32}, 10);
  EXPECT_EQ(s.train.size(), 15) << "the folder's 5 x 3 records, not 10 synthetic samples";
  EXPECT_EQ(s.test.size(), 2);
}

TEST(LoadData, DataFolderWithoutADataSetForASyntheticConfigIsRefused) {
  ScratchDir empty;
  DataConfig c = synthetic(10, 10, 1);
  std::string msg = data_error([&] { set_data_path(c, empty.str(), "--data"); });
  EXPECT_TRUE(contains(msg, "--data " + empty.str() +
                                ": the config trains on synthetic data, "
                                "and this folder holds no data set tandem reads"))
      << msg;
  msg = data_error([&] { set_data_path(c, empty.file("missing"), "--data"); });
  EXPECT_TRUE(contains(msg, "missing: no such folder")) << msg;
}

TEST(LoadData, AConfigWithoutADataFolderTakesTheOneGivenByDataFlag) {
  ScratchDir cifar;
  for (int b = 1; b <= 5; ++b)
    write_file(cifar.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(2));
  write_file(cifar.file("test_batch.bin"), cifar_records(2));
  Config c = parse_config(R"(name: c10
input: {shape: [3, 32, 32]}
layers: [flatten, {dense: {units: 10}}]
data: {format: cifar10}
)",
                          "c10.yaml");
  EXPECT_TRUE(contains(data_error([&] {
                         load_data(c.data, Shape{3, 32, 32}, 10);
                       }),
                       "or pass --data"));
  set_data_path(c.data, cifar.str(), "--data");
  EXPECT_EQ(load_data(c.data, Shape{3, 32, 32}, 10).train.size(), 10);
}

}  // namespace
}  // namespace tandem
