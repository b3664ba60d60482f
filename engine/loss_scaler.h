// Dynamic loss scaling for fp16 training, with the rules of PyTorch's torch.cuda.amp.GradScaler.
//
// fp16 keeps 5 exponent bits: gradients below 2^-24 round to zero. The loss (and so every
// gradient) is multiplied by `scale()` before the backward pass and the gradients divided by it
// before the update. A step whose gradients hold an inf or NaN (the scale was too large) is
// skipped and the scale halved; after `interval` good steps in a row it is doubled. bf16 has
// fp32's exponent range and needs none of this.
#pragma once

#include <cstdint>

namespace tandem {

class LossScaler {
 public:
  struct Options {
    double initial = 65536.0;  // 2^16
    double growth = 2.0;
    double backoff = 0.5;
    int64_t interval = 2000;  // good steps before the scale grows
  };

  LossScaler() : LossScaler(Options{}) {}
  explicit LossScaler(const Options& options);

  double scale() const { return scale_; }
  // Good steps since the scale last changed.
  int64_t good_steps() const { return good_; }
  int64_t skipped_steps() const { return skipped_; }

  // Records a step's outcome and returns whether its update is applied: false (skip it) where
  // its gradients held a non-finite value.
  bool update(bool gradients_finite);

  // Continues a run from a checkpoint's scale and good-step count.
  void restore(double scale, int64_t good_steps);

 private:
  Options options_;
  double scale_;
  int64_t good_ = 0, skipped_ = 0;
};

}  // namespace tandem
