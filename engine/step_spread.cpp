// The spread of a benchmark's step times: quartiles and extremes.
#include <algorithm>
#include <vector>

#include "engine/trainer.h"

namespace tandem {

StepSpread step_spread(std::vector<double> ms) {
  StepSpread s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  // The value at fraction p of the sorted steps, linear between neighbours (numpy's default).
  auto at = [&](double p) {
    const double x = p * static_cast<double>(ms.size() - 1);
    const size_t lo = static_cast<size_t>(x);
    const size_t hi = std::min(lo + 1, ms.size() - 1);
    return ms[lo] + (x - static_cast<double>(lo)) * (ms[hi] - ms[lo]);
  };
  s.min = ms.front();
  s.q1 = at(0.25);
  s.median = ms[ms.size() / 2];  // the middle step, as bench's medians have always been
  s.q3 = at(0.75);
  s.max = ms.back();
  return s;
}

}  // namespace tandem
