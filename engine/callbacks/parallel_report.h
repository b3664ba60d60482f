// A data-parallel run's start-up line: what sums its gradients ("Sums   gradients summed by
// NCCL's all-reduce ...").
#pragma once

#include <cstdio>

#include "engine/callback.h"

namespace tandem {

class ParallelReport : public Callback {
 public:
  explicit ParallelReport(std::FILE* out = stdout) : out_(out) {}
  void run_start(const RunStart& e) override;

 private:
  std::FILE* out_;
};

}  // namespace tandem
