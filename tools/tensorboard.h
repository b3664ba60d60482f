// --tensorboard DIR: TensorBoard event files, one run folder per device (DIR/cpu, DIR/gpu).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "engine/callback.h"
#include "engine/epoch_stats.h"

namespace tandem {

// One run's event file, DIR/RUN/events.out.tfevents.TIME.HOST.PID: TFRecords (a length, its
// masked CRC32C, an Event protobuf, its masked CRC32C), the first one naming the file version.
class TensorBoardWriter : public Callback {
 public:
  // Throws UsageError when the folder cannot be created or the build has no TensorBoard output.
  TensorBoardWriter(const std::string& dir, const std::string& run);
  ~TensorBoardWriter();
  // One scalar at a step ("epoch/test_loss" at epoch 3, "step/loss" at step 500).
  void scalar(const std::string& tag, int64_t step, double value);
  // The epoch's figures at step = its number, Keras' way: epoch/train_loss, epoch/test_accuracy,
  // ... (validation ones where the epoch has them).
  void epoch(const EpochStats& e);
  // A logged step's figures (--log-every): step/loss, step/accuracy, step/learning_rate,
  // step/images_per_second, step/grad_norm where the run computes it, and step/loss_scale (and
  // epoch/loss_scale) where the run scales its loss (fp16).
  void step(const LoggedStep& s);
  // As a run's callback: every epoch and every logged step.
  void epoch_end(const EpochEnd& e) override { epoch(e.stats); }
  void logged(const LoggedStep& s) override { step(s); }
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& data);
  std::string path_;
  std::ofstream out_;
};

// TFRecord's checksum: CRC32C rotated right by 15 bits plus a constant, so that a CRC of data
// holding CRCs stays well distributed.
uint32_t masked_crc32c(const void* data, size_t n);

// Whether this build writes TensorBoard files (protobuf and ISA-L were found).
bool tensorboard_available();

}  // namespace tandem
