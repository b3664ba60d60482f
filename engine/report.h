// User-facing output: aligned tables on stdout, and metrics files (JSON lines or CSV).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "engine/trainer.h"

namespace tandem {

using Row = std::vector<std::string>;

// Columns padded to their widest cell; numeric-looking cells right-aligned; a rule under the header.
std::string format_table(const Row& header, const std::vector<Row>& rows);
// Two columns, "key  value", for the start-up table.
std::string format_pairs(const std::string& title, const InfoRows& rows);

// One line per epoch: JSON lines by default, CSV when the file name ends in ".csv". With
// `val` (a run with data.val_split) the CSV has val_loss and val_accuracy columns too; JSON lines
// carry them wherever an epoch has them.
class MetricsWriter {
 public:
  // Throws UsageError when it cannot write.
  explicit MetricsWriter(const std::string& path, bool val = false);
  void write(const EpochStats& e);

 private:
  std::ofstream out_;
  bool csv_, val_;
  std::string path_;
};

// A JSON string literal with the escapes it needs.
std::string json_string(const std::string& s);

}  // namespace tandem
