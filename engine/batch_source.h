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

}  // namespace tandem
