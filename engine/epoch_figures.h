// One record of an epoch's figures: each figure's name, where EpochStats keeps it, how the files
// write it and the progress line shows it, and which outputs carry it. The progress line's closing
// fields, the metrics file (CSV and JSON lines), a checkpoint's history and TensorBoard all read
// this table, so a new figure is a field of EpochStats and one line here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/epoch_stats.h"

namespace tandem {

// The outputs that carry a figure.
enum EpochOutput : unsigned {
  kMetricsFile = 1,  // --metrics: a CSV column and a JSON key, in the table's order
  kHistory = 2,      // a checkpoint's history (read back on resume: the figure must round-trip)
  kTensorBoard = 4,  // --tensorboard: "epoch/NAME" at step = the epoch
};

// How the progress line writes a figure (engine/progress.h's formats).
enum class Shown {
  kLoss,       // "0.1234"
  kAccuracy,   // "97.12%"
  kBytes,      // "3.0 GiB"
  kLossScale,  // "65,536", and the epoch's overflowed steps: "65,536 (2 overflowed steps skipped)"
};

struct EpochFigure {
  const char* name;  // the column, key and tag: "train_loss"
  // Where EpochStats keeps it: one of these.
  double EpochStats::*real = nullptr;
  int64_t EpochStats::*count = nullptr;
  size_t EpochStats::*bytes = nullptr;
  const char* format = "{:.6g}";  // how the metrics file writes a real one
  unsigned outputs = kMetricsFile | kHistory | kTensorBoard;
  enum When { kAlways, kWithTest, kWithValidation, kWithLossScaling } when = kAlways;
  // The epoch's closing progress line: "LABEL VALUE" at place `shown_at` (1 first; 0 not shown).
  const char* label = nullptr;
  Shown shown = Shown::kLoss;
  int shown_at = 0;
};

// The figures in the metrics file's column order.
const std::vector<EpochFigure>& epoch_figures();

// Whether epoch e has figure f (a validation figure where the epoch had a validation pass, the
// loss scale in a run that scales its loss).
bool has_figure(const EpochStats& e, const EpochFigure& f);

// f's value in e as a double (TensorBoard's scalars).
double figure_value(const EpochStats& e, const EpochFigure& f);

// The fields of e that the epoch's closing progress line shows, in their places: "val_loss
// 0.1234", "test_acc 97.12%", "peak mem 40.1 MiB".
std::vector<std::string> progress_fields(const EpochStats& e);

}  // namespace tandem
