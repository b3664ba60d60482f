// train.early_stopping: ends the run once the watched metric has not improved by more than
// min_delta for `patience` epochs (Keras' EarlyStopping). A resumed run replays the epochs
// before the resume, to decide as the uninterrupted run would.
#pragma once

#include <cstdio>
#include <optional>

#include "engine/callback.h"
#include "engine/config.h"
#include "engine/run_control.h"

namespace tandem {

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(const TrainConfig& train, std::FILE* out = stdout);
  void run_start(const RunStart& e) override;
  // Sets RunState::stop and says why.
  void epoch_end(const EpochEnd& e) override;

 private:
  bool observe(const EpochStats& e);  // true: stop
  const TrainConfig& train_;
  std::FILE* out_;
  MetricWatch watch_;
};

}  // namespace tandem
