// softmax_cross_entropy: mean over the batch of -log softmax(logits)[label], numerically stable;
// with label smoothing e, of -sum_j t_j log softmax(logits)_j, t = (1 - e) onehot + e / classes.
#pragma once

#include "engine/loss.h"

namespace tandem {

class SoftmaxCrossEntropy : public Loss {
 public:
  explicit SoftmaxCrossEntropy(float label_smoothing = 0.f) : smoothing_(label_smoothing) {}
  std::string type() const override { return "softmax_cross_entropy"; }
  void allocate(Backend& backend, int64_t max_batch, int64_t classes) override;
  void forward(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor& loss) override;
  void backward(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor& dlogits) override;

 private:
  float smoothing_;
  Tensor probs_;  // (max_batch, classes): the softmax kept for backward
};

}  // namespace tandem
