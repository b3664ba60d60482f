// The training plot (--plot FILE.png): loss, accuracy and images/s of every run of a command, per
// epoch and, with --log-every, per logged step; redrawn after every epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/callback.h"
#include "engine/epoch_stats.h"
#include "tools/plot.h"

namespace tandem {

struct PlotRun {
  std::string label;               // the device (and precision) of the run
  std::vector<EpochStats> epochs;  // every epoch, those before a resume included
  // Where a resume took over, in epochs: those completed before it plus the share of the next
  // one's batches done (a stop inside an epoch); negative: not resumed.
  double resumed_at = -1;
  std::vector<LoggedStep> steps;  // logged steps, in order
  bool ran = true;                // false: its legend says "not run"
};

// The three panels of the runs (loss, accuracy, images/s), each titled with the config's name.
std::vector<PlotPanel> training_panels(const std::string& config_name,
                                       const std::vector<PlotRun>& runs);
// Draws them into `path` (PNG), side by side. Throws UsageError when it cannot be written.
void draw_training_plot(const std::string& path, const std::string& config_name,
                        const std::vector<PlotRun>& runs);

// The plot of a command's runs as a callback of each: the run under way gets every epoch and
// logged step, and the plot is redrawn after every epoch, so that a long run can be watched and a
// stopped one keeps its picture.
class TrainingPlot : public Callback {
 public:
  // Checks the path at once (UsageError), before any run.
  TrainingPlot(std::string path, std::string config_name);
  // The next run of the list. A device that could not run gets one too, with no epochs: its
  // legend says "not run".
  void start_run(const std::string& label);
  // The run under way was resumed: its epochs before the resume, and the share of the next
  // epoch's batches done before it (a stop inside an epoch; 0 between epochs).
  void resumed(std::vector<EpochStats> earlier, double into_epoch = 0);
  void epoch_end(const EpochEnd& e) override;
  void logged(const LoggedStep& s) override;
  // Throws UsageError when it cannot be written.
  void draw() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_, config_name_;
  std::vector<PlotRun> runs_;
};

}  // namespace tandem
