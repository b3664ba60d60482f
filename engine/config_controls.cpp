// The config keys of the run's controls: train.early_stopping, train.clip_grad_norm and the
// plateau schedule.
#include <cmath>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/epoch_metric.h"
#include "engine/run_control.h"

namespace tandem {
namespace {

// The metric named at `key` of `m` (default: val_loss with a validation split, else train_loss),
// checked as train.checkpoint.best is.
std::string watched_metric(ConfigMap& m, const Config& c) {
  const std::string name = m.get_string("metric", default_watched_metric(c));
  if (!find_epoch_metric(name)) {
    std::vector<std::string> names;
    for (const EpochMetric& e : epoch_metrics()) names.push_back(e.name);
    m.fail("metric", "unknown metric '" + name + "'" + did_you_mean(closest_names(name, names)) +
                         "; expected one of: " + epoch_metric_names());
  }
  if (name.rfind("val_", 0) == 0 && c.data.val_split == 0)
    m.fail("metric", name + " needs a validation split: set data.val_split, e.g. 0.1");
  return name;
}

int64_t patience_of(ConfigMap& m, int64_t fallback) {
  const int64_t p = m.get_int("patience", fallback);
  if (p < 1) m.fail("patience", "expected at least 1 epoch", "e.g. 'patience: 3'");
  return p;
}

double min_delta_of(ConfigMap& m) {
  const double d = m.get_double("min_delta", 0.0);
  if (!(d >= 0) || !std::isfinite(d))
    m.fail("min_delta", "expected zero or a positive finite change", "e.g. 'min_delta: 0.001'");
  return d;
}

}  // namespace

void parse_training_controls(ConfigMap& train, Config& c) {
  if (train.has("early_stopping")) {
    ConfigMap es = train.map("early_stopping");
    EarlyStoppingConfig& e = c.train.early_stopping;
    e.metric = watched_metric(es, c);
    e.patience = patience_of(es, e.patience);
    e.min_delta = min_delta_of(es);
    es.finish();
  }
  const double clip = train.get_double("clip_grad_norm", 0.0);
  if (!(clip >= 0) || !std::isfinite(clip))
    train.fail("clip_grad_norm", "expected zero (off) or a positive finite norm",
               "e.g. 'clip_grad_norm: 1.0'");
  c.train.clip_grad_norm = clip;
}

void parse_plateau_schedule(ConfigMap& schedule, Config& c) {
  ScheduleConfig& s = c.train.schedule;
  s.factor = schedule.get_double("factor", s.factor);
  if (!(s.factor > 0 && s.factor < 1))
    schedule.fail("factor", "expected a factor between 0 and 1 that lowers the rate",
                  "e.g. 'factor: 0.1'");
  s.patience = patience_of(schedule, s.patience);
  s.metric = watched_metric(schedule, c);
  s.min_delta = min_delta_of(schedule);
}

}  // namespace tandem
