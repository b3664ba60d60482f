// CIFAR-10 binary reader: records written here load; truncated files and missing batches fail.
#include "datasets/cifar10.h"

#include <gtest/gtest.h>

#include "tests/datasets/data_test_util.h"

namespace tandem {
namespace {

using namespace testing_data;

void write_cifar(const ScratchDir& dir, int per_batch = 3, int test = 2) {
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(per_batch));
  write_file(dir.file("test_batch.bin"), cifar_records(test));
}

TEST(Cifar10, RecordsLoadWithLabelsPixelsAndClassNames) {
  ScratchDir dir;
  write_cifar(dir);
  Dataset d = load_cifar10(dir.str(), true, 10);
  ASSERT_EQ(d.size(), 15);
  EXPECT_EQ(d.sample_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(d.images.size(), 15u * 3072u);
  EXPECT_EQ(d.labels[4], 1);  // record 1 of batch 2
  EXPECT_EQ(d.images[4 * 3072 + 100], (1 + 100) % 256);
  ASSERT_EQ(d.class_names.size(), 10u);
  EXPECT_EQ(d.class_names.front(), "airplane");
  EXPECT_EQ(d.class_names.back(), "truck");
  EXPECT_EQ(load_cifar10(dir.str(), false, 10).size(), 2);
}

TEST(Cifar10, ArchiveSubfolderIsFound) {
  ScratchDir dir;
  fs::create_directories(dir.file("cifar-10-batches-bin"));
  write_file(dir.file("cifar-10-batches-bin/test_batch.bin"), cifar_records(4));
  EXPECT_EQ(load_cifar10(dir.str(), false, 10).size(), 4);
}

TEST(Cifar10, TruncatedBatchNamesTheFileAndRecordCount) {
  ScratchDir dir;
  write_cifar(dir);
  std::vector<uint8_t> bytes = cifar_records(3);
  bytes.resize(2 * 3073 + 1000);
  write_file(dir.file("data_batch_4.bin"), bytes);
  std::string msg = data_error([&] { load_cifar10(dir.str(), true, 10); });
  EXPECT_TRUE(contains(msg, "data_batch_4.bin")) << msg;
  EXPECT_TRUE(contains(msg, "2 records and 1000 bytes over")) << msg;
  EXPECT_TRUE(contains(msg, "record 2 is cut short at byte offset 7146")) << msg;
}

TEST(Cifar10, LabelOutOfRangeNamesTheRecordOffsetAndFile) {
  ScratchDir dir;
  write_cifar(dir);
  std::vector<uint8_t> bytes = cifar_records(2);
  bytes[3073] = 12;
  write_file(dir.file("test_batch.bin"), bytes);
  std::string msg = data_error([&] { load_cifar10(dir.str(), false, 10); });
  EXPECT_TRUE(contains(msg, "label 12 of record 1 (byte offset 3073)")) << msg;
  EXPECT_TRUE(contains(msg, "test_batch.bin")) << msg;
}

TEST(Cifar10, MissingBatchesAreNamed) {
  ScratchDir dir;
  write_cifar(dir);
  fs::remove(dir.file("data_batch_2.bin"));
  fs::remove(dir.file("data_batch_5.bin"));
  std::string msg = data_error([&] { load_cifar10(dir.str(), true, 10); });
  EXPECT_TRUE(contains(msg, "data_batch_2.bin, data_batch_5.bin are missing")) << msg;
}

// An image folder given to a CIFAR-10 config: the error says what the folder is and which format
// reads it.
TEST(Cifar10, AnImageFolderNamesTheFormatThatReadsIt) {
  ScratchDir dir;
  fs::create_directories(dir.file("train/cat"));
  fs::create_directories(dir.file("test/cat"));
  std::string msg = data_error([&] { load_cifar10(dir.str(), true, 10); });
  EXPECT_TRUE(contains(msg,
                       "data_batch_5.bin are missing; the folder holds train/ and test/ "
                       "folders, an image folder | hint: for images in class folders set "
                       "data: {format: image_folder, path: " +
                           dir.str() + "}"))
      << msg;
}

TEST(Cifar10, LabelAboveNineNamesTheRecord) {
  ScratchDir dir;
  std::vector<uint8_t> bytes = cifar_records(3);
  bytes[2 * 3073] = 12;
  write_file(dir.file("test_batch.bin"), bytes);
  std::string msg = data_error([&] { load_cifar10(dir.str(), false, 10); });
  EXPECT_TRUE(contains(msg, "label 12 of record 2")) << msg;
  EXPECT_TRUE(contains(msg, "test_batch.bin")) << msg;
}

}  // namespace
}  // namespace tandem
