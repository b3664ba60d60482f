// load_data: dispatch on data.format and the checks against the model's input and classes.
#include <gtest/gtest.h>

#include "datasets/dataset.h"
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

}  // namespace
}  // namespace tandem
