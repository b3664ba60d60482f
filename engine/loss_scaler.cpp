// LossScaler's state machine (GradScaler's update rule).
#include "engine/loss_scaler.h"

#include "engine/error.h"

namespace tandem {

LossScaler::LossScaler(const Options& options) : options_(options), scale_(options.initial) {
  TANDEM_CHECK(options.initial > 0 && options.growth > 1 && options.backoff > 0 &&
                   options.backoff < 1 && options.interval > 0,
               "loss scaler options");
}

bool LossScaler::update(bool gradients_finite) {
  if (!gradients_finite) {
    scale_ *= options_.backoff;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ == options_.interval) {
    scale_ *= options_.growth;
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t good_steps) {
  TANDEM_CHECK(scale > 0 && good_steps >= 0 && good_steps < options_.interval,
               "loss scale " + std::to_string(scale) + " after " + std::to_string(good_steps) +
                   " good steps");
  scale_ = scale;
  good_ = good_steps;
}

}  // namespace tandem
