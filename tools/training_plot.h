// The training plot (--plot FILE.png): loss, accuracy and images/s of every run of a command, per
// epoch and, with --log-every, per logged step; redrawn after every epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/epoch_stats.h"

namespace tandem {

struct PlotRun {
  std::string label;               // the device (and precision) of the run
  std::vector<EpochStats> epochs;  // every epoch, those before a resume included
  int64_t resumed_after = 0;       // the epochs before a resume (0: not resumed)
  std::vector<LoggedStep> steps;   // logged steps, in order
  bool ran = true;                 // false: its legend says "not run"
};

// Draws the runs into `path` (PNG): three panels side by side, each titled with the config's name.
// Throws UsageError when it cannot be written.
void draw_training_plot(const std::string& path, const std::string& config_name,
                        const std::vector<PlotRun>& runs);

}  // namespace tandem
