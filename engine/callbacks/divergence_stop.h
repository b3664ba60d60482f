// The divergence stop: a training loss that grows past kDivergenceFactor times its first value
// ends the run with a NumericsError, before the step reaches any other output.
#pragma once

#include "engine/callback.h"
#include "engine/config.h"
#include "engine/run_control.h"

namespace tandem {

class DivergenceStop : public Callback {
 public:
  DivergenceStop(int64_t classes, const OptimizerConfig& optimizer)
      : watch_(classes), optimizer_(optimizer) {}
  void step_end(const StepEnd& e) override;

 private:
  DivergenceWatch watch_;
  OptimizerConfig optimizer_;
};

}  // namespace tandem
