// softmax_cross_entropy through the backend's fused op.
#include "layers/softmax_cross_entropy.h"

namespace tandem {

void SoftmaxCrossEntropy::allocate(Backend& backend, int64_t max_batch, int64_t classes) {
  probs_ = Tensor(backend, Shape{max_batch, classes});
}

void SoftmaxCrossEntropy::forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                  Tensor& loss) {
  Tensor probs = probs_.prefix(logits.dim(0));
  ctx.backend.softmax_cross_entropy_forward(loss, probs, logits, labels, smoothing_);
}

void SoftmaxCrossEntropy::backward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor& dlogits) {
  ctx.backend.softmax_cross_entropy_backward(dlogits, probs_.prefix(logits.dim(0)), labels,
                                             smoothing_);
}

}  // namespace tandem
