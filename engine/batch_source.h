// BatchSource: what the trainer needs of a data set: batches of normalised samples and labels.
#pragma once

#include <cstdint>

namespace tandem {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;  // samples per epoch
  virtual int64_t batches_per_epoch() const = 0;
  virtual void start_epoch(int64_t epoch) = 0;  // fixes the sample order of epoch (0-based)
  // Fills batch b of the current epoch: images (n * sample floats) and labels (n); returns n.
  virtual int64_t fill(int64_t b, float* images, int32_t* labels) const = 0;
};

// One process's share of a data set in a data-parallel run of `processes`: step b of an epoch is
// the source's batches b*processes .. b*processes+processes-1, this process's the one at offset
// `rank`. So the processes together see every batch the source cuts, in its order, and the
// samples of a step are those of one batch `processes` times as large. Where the epoch's last
// step has fewer batches than processes, the last processes fill none (n = 0).
class ShardedSource : public BatchSource {
 public:
  ShardedSource(BatchSource& source, int rank, int processes)
      : source_(source), rank_(rank), processes_(processes) {}
  int64_t size() const override { return source_.size(); }
  int64_t batches_per_epoch() const override {
    return (source_.batches_per_epoch() + processes_ - 1) / processes_;
  }
  void start_epoch(int64_t epoch) override { source_.start_epoch(epoch); }
  int64_t fill(int64_t b, float* images, int32_t* labels) const override {
    const int64_t mine = b * processes_ + rank_;
    return mine < source_.batches_per_epoch() ? source_.fill(mine, images, labels) : 0;
  }

 private:
  BatchSource& source_;
  int rank_, processes_;
};

}  // namespace tandem
