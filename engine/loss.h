// Loss: turns the model's output (N,C) and the labels (N) into a scalar and its gradient.
#pragma once

#include <string>

#include "engine/backend.h"
#include "engine/layer.h"

namespace tandem {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string type() const = 0;
  // Allocates per-run buffers for batches of up to max_batch rows of `classes` scores.
  virtual void allocate(Backend& backend, int64_t max_batch, int64_t classes) = 0;
  // logits (N,C), labels int32 (N) -> loss (1), the mean over the batch, on the backend.
  virtual void forward(Context& ctx, const Tensor& logits, const Tensor& labels, Tensor& loss) = 0;
  // dlogits (N,C): the gradient of the forward's loss (call right after forward).
  virtual void backward(Context& ctx, const Tensor& logits, const Tensor& labels,
                        Tensor& dlogits) = 0;
};

}  // namespace tandem
