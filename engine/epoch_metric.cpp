#include "engine/epoch_metric.h"

namespace tandem {

const std::vector<EpochMetric>& epoch_metrics() {
  static const std::vector<EpochMetric> metrics = {
      {"test_accuracy", false, [](const EpochStats& e) { return e.test_accuracy; }},
      {"test_loss", true, [](const EpochStats& e) { return e.test_loss; }},
      {"train_accuracy", false, [](const EpochStats& e) { return e.train_accuracy; }},
      {"train_loss", true, [](const EpochStats& e) { return e.train_loss; }},
      {"val_accuracy", false, [](const EpochStats& e) { return e.val_accuracy; }},
      {"val_loss", true, [](const EpochStats& e) { return e.val_loss; }},
  };
  return metrics;
}

const EpochMetric* find_epoch_metric(const std::string& name) {
  for (const EpochMetric& m : epoch_metrics())
    if (name == m.name) return &m;
  return nullptr;
}

std::string epoch_metric_names() {
  std::string list;
  for (const EpochMetric& m : epoch_metrics())
    list += (list.empty() ? "" : ", ") + std::string(m.name);
  return list;
}

}  // namespace tandem
