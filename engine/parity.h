// Do two runs of one config compute the same thing? Per-step loss curves compared step by step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct Parity {
  // Steps compared (the shorter run's length, less those left out) and of those, the first
  // `checked` that the verdict
  // rests on: fp32 rounding differences between devices grow with training, so only the start of
  // the curves has to agree to the tolerance (DESIGN.md: the first steps within 1e-3 relative).
  int64_t compared = 0, checked = 0;
  double tolerance = 0;
  bool agree = false;
  int64_t first_divergent_step = 0;  // 1-based first step beyond the tolerance; 0: none
  bool divergent_checked = false;    // that step is one of the checked ones
  double divergence = 0;             // the relative difference at that step
  double max_relative_checked = 0;   // the largest relative difference over the checked steps
  double max_relative = 0;           // ... over every compared step
  int64_t left_out = 0;  // steps not compared: an fp16 run's overflowed steps (not applied)
  double final_accuracy_points = 0;  // |final test accuracy a - b| in percentage points
  bool accuracy_agrees = true;       // within one point

  // One line for the side-by-side table: "agree (max rel diff 2.1e-07 over 125 steps)", ...
  std::string verdict() const;
};

// Compares curve b against the reference a. The verdict needs the first `checked_steps` steps
// compared within `tolerance` relative and the final test accuracies (fractions) within one
// point. `left_out`: step indices not compared (either run's overflowed fp16 steps, which
// applied no update: GradScaler's course, not a difference of arithmetic).
Parity compare_runs(const std::vector<double>& a, const std::vector<double>& b, double accuracy_a,
                    double accuracy_b, double tolerance = 1e-3, int64_t checked_steps = 20,
                    const std::vector<int64_t>& left_out = {});

}  // namespace tandem
