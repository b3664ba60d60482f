// User-facing output: aligned tables on stdout, and metrics files (JSON lines or CSV).
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/trainer.h"

namespace tandem {

using Row = std::vector<std::string>;

// Columns padded to their widest cell; numeric-looking cells right-aligned; a rule under the
// header.
std::string format_table(const Row& header, const std::vector<Row>& rows);
// Two columns, "key  value", for the start-up table.
std::string format_pairs(const std::string& title, const InfoRows& rows);

// Makes sure a file can be written at `path` before a long run needs it: creates its folders,
// and throws UsageError naming `flag` ("--metrics") when the path is a folder (the hint offers
// `example` inside it) or the folder takes no new file. Leaves no file behind.
void prepare_output_file(const std::string& path, const std::string& flag,
                         const std::string& example);

// One line per epoch: JSON lines by default, CSV when the file name ends in ".csv". With
// `val` (a run with data.val_split) the CSV has val_loss and val_accuracy columns too; JSON lines
// carry them wherever an epoch has them.
class MetricsWriter {
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
