#include "engine/callbacks/parallel_report.h"

#include <fmt/format.h>

namespace tandem {

void ParallelReport::run_start(const RunStart& e) {
  if (!e.reductions.empty()) fmt::print(out_, "Sums   gradients summed by {}\n", e.reductions);
}

}  // namespace tandem
