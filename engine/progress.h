// A Keras-like progress bar on stdout: step/total, bar, ETA, loss, accuracy, images/s.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

class ProgressBar {
 public:
  // enabled false: prints nothing. On a terminal the line redraws in place; otherwise (logs, CI)
  // a line is printed at every quarter of the epoch.
  ProgressBar(int64_t total, bool enabled);
  void update(int64_t done, double loss, double accuracy, double images_per_second);
  // Ends the line with the epoch's summary text.
  void finish(const std::string& summary);

 private:
  std::string line(int64_t done, double loss, double accuracy, double ips, bool final) const;
  int64_t total_;
  bool enabled_, tty_;
  int64_t last_quarter_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  double loss_ = 0, accuracy_ = 0, ips_ = 0;
  int64_t done_ = 0;
};

// Ends a progress line on the terminal that has no end yet, so that what is printed next (a
// warning, an error) starts a line of its own; the bar's next update draws on the line after it.
void end_progress_line();

// A loss as printed: "0.1500"; "1.301e+26" where four decimals would be a row of digits.
std::string format_loss(double loss);
// "3.2s", "1m 04s", "1h 02m"
std::string format_duration(double seconds);
// "12,345"
std::string format_count(double v);
// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(size_t bytes);

}  // namespace tandem
