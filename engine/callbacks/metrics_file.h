// The metrics file (--metrics): the run's epochs, and its logged steps, as JSON lines or CSV.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "engine/callback.h"

namespace tandem {

// One line per epoch: JSON lines by default, CSV when the file name ends in ".csv". With
// `val` (a run with data.val_split) the CSV has val_loss and val_accuracy columns too; JSON lines
// carry them wherever an epoch has them.
class MetricsWriter : public Callback {
 public:
  // Throws UsageError when it cannot write. The file is created (and an old one replaced) at the
  // first epoch, so a run that fails before it keeps the previous run's file.
  explicit MetricsWriter(const std::string& path, bool val = false);
  // A resumed run: the file starts with the epochs before the resume (the checkpoint's history),
  // and the new epochs follow them.
  void continue_after(std::vector<EpochStats> earlier) { earlier_ = std::move(earlier); }
  void write(const EpochStats& e);
  // A logged step (--log-every): a JSON line with "step" among the epochs' lines, or for CSV a
  // line of FILE.steps.csv beside it (another set of columns).
  void write_step(const LoggedStep& s);
  // As a run's callback: every epoch and every logged step.
  void epoch_end(const EpochEnd& e) override { write(e.stats); }
  void logged(const LoggedStep& s) override { write_step(s); }

 private:
  void open();  // at the first epoch: the header, and the earlier epochs of a resumed run
  void line(const EpochStats& e);
  std::string line_text(const EpochStats& e) const;  // one epoch's line, with its newline
  std::ofstream out_, steps_out_;
  bool csv_, val_;
  std::string path_;
  std::vector<EpochStats> earlier_;
};

}  // namespace tandem
