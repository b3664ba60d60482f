#include "engine/callbacks/divergence_stop.h"

#include <fmt/format.h>

#include "engine/numerics.h"
#include "engine/progress.h"

namespace tandem {

void DivergenceStop::step_end(const StepEnd& e) {
  // A step the gate held back changed no weight; one applied has (the checkpoint the error names
  // is the last one written before it).
  if (e.outcome != StepEnd::kApplied || !watch_.diverged(e.loss)) return;
  throw nonfinite_error(
      optimizer_, e.lr,
      fmt::format("the training loss diverged: {} at step {} (epoch {}, batch {} of {}), more "
                  "than {} times its first value {}; the run stops here rather than train on to "
                  "a result no better than chance",
                  loss_text(e.loss), e.step + 1, e.epoch + 1, e.batch + 1, e.batches,
                  format_count(kDivergenceFactor), loss_text(watch_.reference())));
}

}  // namespace tandem
