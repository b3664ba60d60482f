// Dataset: decoded samples held in memory as uint8 (or decoded on the fly), and the batches cut
// from them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/batch_source.h"
#include "engine/config.h"
#include "engine/tensor.h"

namespace tandem {

// Decodes sample i of a data set into `out` (sample_shape.numel() bytes, CHW). Called by several
// batch workers at once; throws DataError naming the file when the sample cannot be read.
using SampleReader = std::function<void(int64_t i, uint8_t* out)>;

struct Dataset {
  std::string name;                      // "mnist train (datasets/mnist-sample)"
  Shape sample_shape;                    // (C,H,W)
  int classes = 0;
  std::vector<std::string> class_names;  // "0".."9" where the format has no names
  std::vector<uint8_t> images;           // size() * sample_shape.numel() bytes, NCHW; or empty:
  SampleReader read;                     // set when the samples are decoded on the fly instead
  std::vector<int32_t> labels;           // size() entries in [0, classes)
  int64_t skipped = 0;                   // images left out with data.skip_bad
  std::vector<std::string> skipped_examples;  // the first ten of them: "path: why"
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  bool on_the_fly() const { return static_cast<bool>(read); }
};

// Samples which[0..n) of `data` into `out` (n * numel bytes), decoded in parallel when on the fly.
void read_samples(const Dataset& data, const int64_t* which, int64_t n, uint8_t* out);
// Decodes every sample into data.images and drops the reader: the cached form.
void cache_samples(Dataset& data);

struct DataSplits {
  Dataset train, test;
  int64_t decoded_bytes = 0;  // both splits as uint8
  int64_t cache_mb = 0;       // data.cache_mb they were held against
};

// Whether `bytes` of decoded samples stay in memory under data.cache_mb.
bool fits_cache(int64_t bytes, int64_t cache_mb);
// The start-up line that says the samples are decoded on the fly, and why; "" when cached.
std::string cache_report(const DataSplits& splits);

// Loads both splits of the configured data set and checks them against the model's input shape
// (C,H,W) and class count. Throws DataError naming the file (and record) on any problem. When the
// decoded samples of both splits exceed data.cache_mb, every file is still checked, but the
// splits keep readers that decode each sample on the fly instead of the pixels (synthetic data
// is always held).
// A flat model input (C*H*W) also accepts (C,H,W) samples: the batches hold the same floats.
// format: mnist, cifar10, image_folder, synthetic; test_path empty: the test split is read from
// train_path (mnist, cifar10). classes <= 0 skips the label check. with_train false: the test
// split alone, for evaluation (mnist, cifar10 and synthetic; image_folder reads the train split's
// class folders too, which name the labels).
DataSplits load_data(const DataConfig& config, const Shape& input_shape, int classes,
                     bool with_train = true);

// The start-up line that maps labels to class names ("Labels 0=cat, 1=dog\n"), or "" when the
// names are the labels themselves ("0", "1", ...).
std::string class_mapping(const Dataset& data);
// What skip_bad left out of each split: a count, then the first ten files with the reason; ""
// when nothing was skipped.
std::string skipped_report(const DataSplits& splits);

// Cuts a data set into batches of normalised fp32 samples, in an order shuffled per epoch from
// the seed: the same seed gives the same batches on every device.
class Batcher : public BatchSource {
 public:
  Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed,
          std::vector<float> mean, std::vector<float> std, bool drop_last = false);
  int64_t size() const override { return data_.size(); }
  int64_t batches_per_epoch() const override;
  // Starts epoch e (0-based): fixes the sample order.
  void start_epoch(int64_t epoch) override;
  // Fills batch b of the current epoch: images (n*C*H*W floats) and labels (n); returns n.
  int64_t fill(int64_t b, float* images, int32_t* labels) const override;
  // Augments every sample from now on (a training split): crop offsets and flips drawn from
  // (seed, epoch, position in the epoch). Samples must be (C,H,W).
  void set_augment(const AugmentConfig& augment);

 private:
  const Dataset& data_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<float> scale_, shift_;  // per channel: x * scale + shift == (x/255 - mean) / std
  bool drop_last_;
  // in: the n samples' bytes, one after the other.
  void fill_augmented(int64_t first, int64_t n, const uint8_t* in, float* images,
                      int32_t* labels) const;

  std::vector<int64_t> order_;
  int64_t epoch_ = 0;
  AugmentConfig augment_;
};

}  // namespace tandem
