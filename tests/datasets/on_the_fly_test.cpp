// Decoding on the fly (data.cache_mb): the same batches as the cached samples, for image folders
// and record files, plain and augmented, with background workers; files that change after the
// start; the limit that picks the mode; bench, export-images and val_split in that mode.
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>

#include <random>

#include "datasets/dataset.h"
#include "datasets/split.h"
#include "engine/batch_queue.h"
#include "tests/datasets/data_test_util.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

using namespace testing_data;

// folder/CLASS/i.png: `count` RGB 10x9 images of seeded random pixels per class, so that every
// sample differs and reading one decodes, converts channels and resizes.
void write_random_classes(const std::string& folder, int classes, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int k = 0; k < classes; ++k) {
    fs::create_directories(folder + "/c" + std::to_string(k));
    for (int i = 0; i < count; ++i) {
      std::vector<uint8_t> px(10 * 9 * 3);
      for (uint8_t& p : px) p = static_cast<uint8_t>(rng());
      const std::string path = folder + "/c" + std::to_string(k) + "/" + std::to_string(i) + ".png";
      ASSERT_TRUE(stbi_write_png(path.c_str(), 10, 9, 3, px.data(), 10 * 3)) << path;
    }
  }
}

DataConfig image_folder_config(const ScratchDir& dir, int64_t cache_mb) {
  DataConfig c;
  c.format = "image_folder";
  c.train_path = dir.file("train");
  c.test_path = dir.file("test");
  c.cache_mb = cache_mb;
  return c;
}

// Every epoch's batches (images and labels, in order) that `workers` background threads cut.
struct Batches {
  std::vector<float> images;
  std::vector<int32_t> labels;
};
Batches all_batches(const Dataset& d, bool augment, int workers, int64_t batch = 4) {
  Batcher src(d, batch, true, 11, {0.5f}, {0.25f});
  if (augment) src.set_augment(AugmentConfig{2, true});
  const int64_t sample = d.sample_shape.numel();
  BatchQueue queue(src, sample, batch, workers, [](size_t bytes) {
    return std::shared_ptr<void>(::operator new(bytes), [](void* p) { ::operator delete(p); });
  });
  Batches out;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    queue.start_epoch(epoch);
    for (BatchQueue::Batch b = queue.next(); b.n; b = queue.next()) {
      out.images.insert(out.images.end(), b.images, b.images + b.n * sample);
      out.labels.insert(out.labels.end(), b.labels, b.labels + b.n);
    }
  }
  return out;
}

// Cached and on-the-fly splits cut bit-identical batches, plain and augmented, in the training
// thread and with three workers.
void expect_same_batches(const DataSplits& cached, const DataSplits& fly) {
  ASSERT_FALSE(cached.train.on_the_fly());
  ASSERT_TRUE(fly.train.on_the_fly());
  ASSERT_TRUE(fly.test.on_the_fly());
  EXPECT_TRUE(fly.train.images.empty());
  EXPECT_EQ(fly.train.labels, cached.train.labels);
  for (const auto& [a, b] :
       {std::pair{&cached.train, &fly.train}, std::pair{&cached.test, &fly.test}})
    for (bool augment : {false, true})
      for (int workers : {0, 3}) {
        const Batches want = all_batches(*a, augment, workers),
                      got = all_batches(*b, augment, workers);
        ASSERT_FALSE(want.images.empty());
        EXPECT_EQ(got.images, want.images)
            << a->name << (augment ? " augmented, " : ", ") << workers;
        EXPECT_EQ(got.labels, want.labels) << a->name;
      }
}

TEST(OnTheFly, ImageFolderBatchesAreTheCachedOnes) {
  ScratchDir dir;
  write_random_classes(dir.file("train"), 3, 5, 1);
  write_random_classes(dir.file("test"), 3, 2, 2);
  const Shape shape{1, 8, 8};  // gray from RGB, resized from 10x9
  const DataSplits cached = load_data(image_folder_config(dir, 4096), shape, 3);
  const DataSplits fly = load_data(image_folder_config(dir, 0), shape, 3);
  expect_same_batches(cached, fly);
  EXPECT_EQ(fly.decoded_bytes, 21 * 64);
}

TEST(OnTheFly, MnistAndCifarRecordBatchesAreTheCachedOnes) {
  ScratchDir dir;
  // Gzipped IDX files (read through a decompressed temporary copy) and plain CIFAR batches.
  write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_images(13, 6, 5));
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_labels(13));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_images(6, 6, 5));
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_labels(6));
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(b + 1));
  write_file(dir.file("test_batch.bin"), cifar_records(5));
  for (const char* format : {"mnist", "cifar10"}) {
    DataConfig c;
    c.format = format;
    c.train_path = dir.str();
    const Shape shape = c.format == "mnist" ? Shape{1, 6, 5} : Shape{3, 32, 32};
    const DataSplits cached = load_data(c, shape, 10);
    c.cache_mb = 0;
    const DataSplits fly = load_data(c, shape, 10);
    SCOPED_TRACE(format);
    expect_same_batches(cached, fly);
  }
}

TEST(OnTheFly, SkipBadLeavesTheBadFilesOutOfTheReader) {
  ScratchDir dir;
  write_random_classes(dir.file("train"), 2, 4, 3);
  write_random_classes(dir.file("test"), 2, 1, 4);
  write_file(dir.file("train/c1/9_corrupt.png"), {0x89, 'P', 'N', 'G', 1, 2, 3});
  DataConfig c = image_folder_config(dir, 0);
  c.skip_bad = true;
  const DataSplits fly = load_data(c, Shape{3, 8, 8}, 2);
  EXPECT_EQ(fly.train.size(), 8);
  EXPECT_EQ(fly.train.skipped, 1);
  c.cache_mb = 4096;
  expect_same_batches(load_data(c, Shape{3, 8, 8}, 2), fly);
}

TEST(OnTheFly, ValSplitAndNormaliseAutoWorkOnTheFly) {
  ScratchDir dir;
  write_random_classes(dir.file("train"), 2, 6, 5);
  write_random_classes(dir.file("test"), 2, 1, 6);
  DataSplits cached = load_data(image_folder_config(dir, 4096), Shape{3, 8, 8}, 2);
  DataSplits fly = load_data(image_folder_config(dir, 0), Shape{3, 8, 8}, 2);
  const Dataset val_cached = hold_out(cached.train, 0.25, 9);
  const Dataset val_fly = hold_out(fly.train, 0.25, 9);
  ASSERT_TRUE(val_fly.on_the_fly());
  EXPECT_EQ(val_fly.labels, val_cached.labels);
  EXPECT_EQ(all_batches(val_fly, false, 0).images, all_batches(val_cached, false, 0).images);
  EXPECT_EQ(all_batches(fly.train, true, 3).images, all_batches(cached.train, true, 3).images);
  const ChannelStats a = channel_stats(cached.train), b = channel_stats(fly.train);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
}

TEST(OnTheFly, AnImageDeletedAfterTheStartIsADataErrorNamingIt) {
  ScratchDir dir;
  write_random_classes(dir.file("train"), 2, 3, 7);
  write_random_classes(dir.file("test"), 2, 1, 8);
  const DataSplits fly = load_data(image_folder_config(dir, 0), Shape{1, 8, 8}, 2);
  const std::string gone = dir.file("train/c1/2.png");
  fs::remove(gone);
  Batcher src(fly.train, 2, false, 1, {}, {});
  std::vector<float> images(2 * 64);
  std::vector<int32_t> labels(2);
  // Samples are in file order: c1/2.png is the last, in batch 2 of 3.
  EXPECT_EQ(src.fill(0, images.data(), labels.data()), 2);
  const std::string msg = data_error([&] { src.fill(2, images.data(), labels.data()); });
  EXPECT_TRUE(contains(msg, "the image '" + gone + "' does not exist now")) << msg;
  // Through background workers the error reaches the step that needs the batch.
  BatchQueue queue(src, 64, 2, 3, [](size_t bytes) {
    return std::shared_ptr<void>(::operator new(bytes), [](void* p) { ::operator delete(p); });
  });
  queue.start_epoch(0);
  EXPECT_EQ(queue.next().n, 2);
  EXPECT_EQ(queue.next().n, 2);
  EXPECT_TRUE(contains(data_error([&] { queue.next(); }), gone));
}

TEST(OnTheFly, ARecordFileCutShortAfterTheStartIsADataErrorNamingIt) {
  ScratchDir dir;
  write_file(dir.file("test_batch.bin"), cifar_records(4));
  DataConfig c;
  c.format = "cifar10";
  c.train_path = dir.str();
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records(1));
  c.cache_mb = 0;
  const DataSplits fly = load_data(c, Shape{3, 32, 32}, 10);
  fs::resize_file(dir.file("test_batch.bin"), 2 * 3073);
  Batcher src(fly.test, 2, false, 1, {}, {});
  std::vector<float> images(2 * 3072);
  std::vector<int32_t> labels(2);
  EXPECT_EQ(src.fill(0, images.data(), labels.data()), 2);
  const std::string msg = data_error([&] { src.fill(1, images.data(), labels.data()); });
  EXPECT_TRUE(contains(msg, "'" + dir.file("test_batch.bin") + "' no longer holds bytes")) << msg;
}

TEST(OnTheFly, TheLimitIsInclusiveAndOnlyOnTheFlyIsReported) {
  EXPECT_TRUE(fits_cache(1 << 20, 1));
  EXPECT_FALSE(fits_cache((1 << 20) + 1, 1));
  EXPECT_TRUE(fits_cache(0, 0));
  EXPECT_FALSE(fits_cache(1, 0));
  EXPECT_TRUE(fits_cache(int64_t{4096} << 20, 4096));
  EXPECT_TRUE(fits_cache(INT64_MAX, INT64_MAX));
  ScratchDir dir;
  write_random_classes(dir.file("train"), 2, 2, 9);
  write_random_classes(dir.file("test"), 2, 1, 10);
  const DataSplits cached = load_data(image_folder_config(dir, 1), Shape{3, 8, 8}, 2);
  EXPECT_FALSE(cached.train.on_the_fly());
  EXPECT_EQ(cache_report(cached), "");
  const DataSplits fly = load_data(image_folder_config(dir, 0), Shape{3, 8, 8}, 2);
  EXPECT_EQ(cache_report(fly),
            "Data: 1.1 KiB decoded does not fit data.cache_mb 0: decoding on "
            "the fly\n");
}

// The bundled PNG sample with cache_mb 0, as a user's config.
std::string png_sample_config(const std::string& name) {
  return test::write_temp_file(name, R"(name: png_fly
input: {shape: [1, 28, 28]}
layers:
  - flatten
  - dense: {units: 10}
data: {format: image_folder, path: )" + test::source_path("datasets/mnist-png-sample") +
                                         R"(, cache_mb: 0}
train: {epochs: 1, batch_size: 32, optimizer: {type: sgd, lr: 0.01}, seed: 1}
)");
}

TEST(OnTheFly, TrainerAndBenchSayTheSamplesAreDecodedOnTheFly) {
  const std::string config = png_sample_config("png_fly.yaml");
  test::CliResult r = test::run_trainer("--config " + config);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "Data: 306.2 KiB decoded does not fit data.cache_mb 0: decoding on "
                       "the fly"))
      << r.out;
  r = test::run_trainer("bench --config " + config + " --device cpu --steps 1 --warmup 0");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "300 train samples checked in")) << r.out;
  EXPECT_TRUE(contains(r.out, "cut, decoded on the fly and normalised at")) << r.out;
}

TEST(OnTheFly, ExportImagesWritesTheSameFilesOnTheFly) {
  ScratchDir dir;
  const std::string config = png_sample_config("png_fly_export.yaml");
  test::CliResult r = test::run_trainer("export-images --config " + config + " --out " +
                                        dir.file("out") + " --limit-per-class 2,1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "wrote 20 train and 10 test images")) << r.out;
  // Written from the decoded samples, the PNGs hold the sample's pixels: the same as the source's.
  DataConfig back = image_folder_config(dir, 0);
  back.train_path = dir.file("out/train");
  back.test_path = dir.file("out/test");
  const DataSplits exported = load_data(back, Shape{1, 28, 28}, 10);
  ASSERT_EQ(exported.train.size(), 20);
  std::vector<uint8_t> a(784), b(784);
  const int64_t first = 0;
  read_samples(exported.train, &first, 1, a.data());
  DataConfig source = image_folder_config(dir, 4096);
  source.train_path = test::source_path("datasets/mnist-png-sample/train");
  source.test_path = test::source_path("datasets/mnist-png-sample/test");
  const DataSplits original = load_data(source, Shape{1, 28, 28}, 10);
  read_samples(original.train, &first, 1, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tandem
