// mse: mean squared error between the outputs (N,C) and one-hot labels, averaged over N*C.
#pragma once

#include "engine/loss.h"

namespace tandem {

class Mse : public Loss {
 public:
  std::string type() const override { return "mse"; }
  void allocate(Backend&, int64_t, int64_t) override {}
  void forward(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor& loss) override {
    ctx.backend.mse_forward(loss, logits, labels);
  }
  void backward(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor& dlogits) override {
    ctx.backend.mse_backward(dlogits, logits, labels);
  }
};

}  // namespace tandem
