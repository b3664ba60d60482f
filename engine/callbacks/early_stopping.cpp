#include "engine/callbacks/early_stopping.h"

#include <fmt/format.h>

namespace tandem {

EarlyStopping::EarlyStopping(const TrainConfig& train, std::FILE* out)
    : train_(train),
      out_(out),
      watch_(*find_epoch_metric(train.early_stopping.metric), train.early_stopping.min_delta) {}

bool EarlyStopping::observe(const EpochStats& e) {
  watch_.observe(e);
  return watch_.epochs_without_improvement() >= train_.early_stopping.patience;
}

void EarlyStopping::run_start(const RunStart& e) {
  for (const EpochStats& earlier : e.earlier) observe(earlier);
}

void EarlyStopping::epoch_end(const EpochEnd& e) {
  if (e.cut_short || !observe(e.stats)) return;
  e.state.stop = true;
  const EarlyStoppingConfig& c = train_.early_stopping;
  fmt::print(out_,
             "early stopping: {} has not improved by more than {:g} for {} epoch{} (best by "
             "more than {:g}: {} at epoch {}); the run ends after epoch {} of {}\n",
             watch_.metric().name, c.min_delta, c.patience, c.patience == 1 ? "" : "s", c.min_delta,
             metric_text(watch_.metric(), watch_.best()), watch_.best_epoch(), e.stats.epoch,
             train_.epochs);
  std::fflush(out_);
}

}  // namespace tandem
