// Loss-curve parity between two runs.
#include "engine/parity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tandem {

Parity compare_runs(const std::vector<double>& a, const std::vector<double>& b, double accuracy_a,
                    double accuracy_b, double tolerance, int64_t checked_steps,
                    const std::vector<int64_t>& left_out) {
  Parity p;
  p.tolerance = tolerance;
  const int64_t steps = static_cast<int64_t>(std::min(a.size(), b.size()));
  const std::set<int64_t> out(left_out.begin(), left_out.end());
  for (int64_t i = 0; i < steps; ++i) {
    if (out.count(i)) {
      ++p.left_out;
      continue;
    }
    const double ref = a[static_cast<size_t>(i)], got = b[static_cast<size_t>(i)];
    double rel = std::fabs(got - ref) / std::max(std::fabs(ref), 1e-12);
    if (std::isnan(rel)) rel = INFINITY;
    p.max_relative = std::max(p.max_relative, rel);
    const bool checked = p.compared < checked_steps;
    ++p.compared;
    if (checked) {
      ++p.checked;
      p.max_relative_checked = std::max(p.max_relative_checked, rel);
    }
    if (rel > tolerance && p.first_divergent_step == 0) {
      p.first_divergent_step = i + 1;
      p.divergence = rel;
      p.divergent_checked = checked;
    }
  }
  p.final_accuracy_points = 100 * std::fabs(accuracy_a - accuracy_b);
  p.accuracy_agrees = p.final_accuracy_points <= 1.0;
  p.agree = p.compared > 0 && p.max_relative_checked <= tolerance && p.accuracy_agrees;
  return p;
}

std::string Parity::verdict() const {
  if (compared == 0) return "no steps to compare";
  std::string s;
  if (agree) {
    s = fmt::format("agree: first {} steps within {:.0e} (max rel diff {:.1e})", checked, tolerance,
                    max_relative_checked);
    if (first_divergent_step)
      s += fmt::format(
          "; curves drift apart from step {} ({:.1e}, up to {:.1e}) as rounding "
          "differences grow",
          first_divergent_step, divergence, max_relative);
  } else if (first_divergent_step && divergent_checked) {
    s = fmt::format("DIFFER from step {} (rel diff {:.1e} > {:.0e}; up to {:.1e})",
                    first_divergent_step, divergence, tolerance, max_relative);
    if (!accuracy_agrees)
      s += fmt::format("; final test accuracy {:.2f} points apart", final_accuracy_points);
  } else {
    s = fmt::format(
        "DIFFER: loss curves agree (max rel diff {:.1e}) but final test accuracy is "
        "{:.2f} points apart (> 1)",
        max_relative_checked, final_accuracy_points);
  }
  if (left_out)
    s += fmt::format("; {} overflowed fp16 step{} left out (not applied)", left_out,
                     left_out == 1 ? "" : "s");
  return s;
}

}  // namespace tandem
