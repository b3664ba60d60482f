#include "engine/callbacks/plateau_schedule.h"

#include <fmt/format.h>

namespace tandem {

PlateauSchedule::PlateauSchedule(const TrainConfig& train, bool quiet, std::FILE* out)
    : schedule_(train.schedule),
      quiet_(quiet),
      out_(out),
      watch_(*find_epoch_metric(train.schedule.metric), train.schedule.min_delta) {}

bool PlateauSchedule::observe(const EpochStats& e) {
  watch_.observe(e);
  if (watch_.epochs_without_improvement() < schedule_.patience) return false;
  watch_.reset_wait();  // the next cut comes after as many epochs again (PyTorch's and Keras')
  scale_ *= schedule_.factor;
  return true;
}

void PlateauSchedule::run_start(const RunStart& e) {
  for (const EpochStats& earlier : e.earlier) observe(earlier);
  e.state.lr_scale = scale_;
}

void PlateauSchedule::epoch_end(const EpochEnd& e) {
  if (e.cut_short) return;
  const double before = scale_;
  if (!observe(e.stats)) return;
  e.state.lr_scale = scale_;
  if (quiet_) return;
  fmt::print(out_,
             "plateau: {} has not improved by more than {:g} for {} epoch{} (best {} at epoch "
             "{}): learning rate {:g} -> {:g}\n",
             watch_.metric().name, schedule_.min_delta, schedule_.patience,
             schedule_.patience == 1 ? "" : "s", metric_text(watch_.metric(), watch_.best()),
             watch_.best_epoch(), e.base_lr * before, e.base_lr * scale_);
  std::fflush(out_);
}

}  // namespace tandem
