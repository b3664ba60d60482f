// A Keras-like progress bar on stdout that fits the terminal: step/total, bar, ETA of the epoch
// and of the run, loss, accuracy, images/s; and the number formats of all user-facing output.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/text.h"  // format_bytes, for the users of these formatters

namespace tandem {

// Where the progress goes: a terminal redraws one line in place, within `width` columns; a file
// or pipe (logs, CI) gets whole lines, a few per epoch, of any length and without '\r'.
struct ProgressOutput {
  std::FILE* file = stdout;
  bool tty = false;
  int width = 80;
  // stdout, with its terminal's width (else $COLUMNS, else 80) when it is a terminal.
  static ProgressOutput standard();
};

// Where an epoch stands in its run, for the whole run's ETA.
struct ProgressRun {
  int64_t epoch = 0, epochs = 1;  // 0-based epoch of this bar, and the run's total
  // Mean wall time of this run's finished epochs, evaluation included; 0: none has finished, and
  // this epoch's projected time stands for the others.
  double epoch_seconds = 0;
  // Epochs of the devices after this one in a device list, which the run's time left counts at
  // this device's pace (the best guess before they start).
  int64_t later_epochs = 0;
};

// The figures of one line of the bar.
struct ProgressFigures {
  int64_t done = 0, total = 0;
  double elapsed = 0;    // seconds of this epoch so far
  double run_left = -1;  // seconds left in the run after this epoch; < 0: not shown
  double loss = 0, accuracy = 0, images_per_second = 0;
  double loss_scale = 0;  // fp16's dynamic loss scale, shown while running; 0: none
  bool final = false;     // the epoch's closing line: its time instead of an ETA
};

// The running line within `width` columns: the bar narrows, then the fields least needed go
// (the loss scale, images/s, the run's ETA, the bar, accuracy) until it fits.
std::string progress_line(const ProgressFigures& f, int width);

// `head` then `fields`, joined by `separator`, broken into lines of at most `width` columns
// between fields (never inside one); lines after the first are indented by `indent` spaces. A
// field wider than a line gets a line of its own.
std::vector<std::string> fit_fields(const std::string& head, const std::vector<std::string>& fields,
                                    int width, const std::string& separator = " - ",
                                    int indent = 2);
// A start-up line ("Run    5 epochs, batch 64, ...") as fit_fields breaks it for a terminal's
// width; on one line where stdout is no terminal. Ends with a newline.
std::string wrap_to_terminal(const std::string& head, const std::vector<std::string>& parts,
                             const std::string& separator, int indent);

class ProgressBar {
 public:
  // verbose: 0 prints nothing; 1 the bar (redrawn on a terminal, a line at every quarter of the
  // epoch elsewhere) and the epoch's closing line; 2 the closing line only, after `heading`.
  ProgressBar(int64_t total, int verbose, ProgressRun run = {},
              ProgressOutput out = ProgressOutput::standard());
  // loss_scale: fp16's dynamic loss scale (0: none).
  void update(int64_t done, double loss, double accuracy, double images_per_second,
              double loss_scale = 0);
  // Ends the bar with the epoch's closing line: the bar's figures, then `fields` (test loss and
  // accuracy, peak memory, ...), in as many lines of the width as they need. `heading` starts the
  // line at verbose 2 ("Epoch 3/10").
  void finish(const std::vector<std::string>& fields, const std::string& heading = "");

 private:
  ProgressFigures figures(bool final) const;
  int64_t total_;
  int verbose_;
  ProgressRun run_;
  ProgressOutput out_;
  int64_t last_quarter_ = 0;
  // last_update_: the last step's end; the closing line's training time stops there, so that the
  // evaluation passes between it and finish() are not counted as training.
  std::chrono::steady_clock::time_point start_, last_draw_, last_update_;
  double loss_ = 0, accuracy_ = 0, ips_ = 0, scale_ = 0;
  int64_t done_ = 0;
};

// Ends a progress line on the terminal that has no end yet, so that what is printed next (a
// warning, an error) starts a line of its own; the bar's next update draws on the line after it.
void end_progress_line();

// A loss as printed everywhere: four decimals at any magnitude a training run reaches ("0.1500",
// "85700000.0000"), so that a column of losses keeps one form; beyond 1e9 "1.3013e+26".
std::string format_loss(double loss);
// An accuracy (a fraction) as printed everywhere: "97.12%".
std::string format_accuracy(double fraction);
// "3.2s", "1m 04s", "1h 02m"
std::string format_duration(double seconds);
// "12,345"
std::string format_count(double v);
// A loss scale: "65,536", or "0.5" below 1.
std::string format_loss_scale(double scale);

}  // namespace tandem
