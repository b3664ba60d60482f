// An epoch's figures by name ("test_accuracy"), for choosing the best checkpoint of a run.
#pragma once

#include <string>
#include <vector>

#include "engine/trainer.h"

namespace tandem {

struct EpochMetric {
  const char* name;
  bool lower_is_better;  // losses
  double (*of)(const EpochStats&);
};

// Every metric that can be asked for by name, in the order the docs list them.
const std::vector<EpochMetric>& epoch_metrics();
// The metric of that name, or nullptr.
const EpochMetric* find_epoch_metric(const std::string& name);
// "test_accuracy, test_loss, ..." for error messages.
std::string epoch_metric_names();

}  // namespace tandem
