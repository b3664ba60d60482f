// schedule: plateau: the learning rate times `factor` once the watched metric has not improved
// by more than min_delta for `patience` epochs, then again after as many more (PyTorch's
// ReduceLROnPlateau, Keras' ReduceLROnPlateau). A resumed run replays the epochs before the
// resume, so that it starts at the rate the uninterrupted run had.
#pragma once

#include <cstdio>

#include "engine/callback.h"
#include "engine/config.h"
#include "engine/run_control.h"

namespace tandem {

class PlateauSchedule : public Callback {
 public:
  // quiet: the cuts are not printed (they still apply).
  PlateauSchedule(const TrainConfig& train, bool quiet, std::FILE* out = stdout);
  void run_start(const RunStart& e) override;
  // Sets RunState::lr_scale and says so where it cuts the rate.
  void epoch_end(const EpochEnd& e) override;

 private:
  bool observe(const EpochStats& e);  // true: the rate is cut
  const ScheduleConfig& schedule_;
  bool quiet_;
  std::FILE* out_;
  MetricWatch watch_;
  double scale_ = 1;
};

}  // namespace tandem
