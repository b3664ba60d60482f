// drop_path: stochastic depth. While training, each sample's input is dropped whole (zero) with
// probability `rate` and kept scaled by 1 / (1 - rate) otherwise; identity in eval. Placed last
// on a residual branch, before the add, it drops the branch for that sample (torchvision's
// StochasticDepth(p, "row")).
#pragma once

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class DropPath : public Layer {
 public:
  explicit DropPath(ConfigMap& args);  // keys: rate (required, in [0, 1))
  std::string type() const override { return "drop_path"; }
  Shape setup(const Shape& in) override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  // The RNG stream of a step's sample masks: dropout's rule (distinct per step and layer, the
  // same on every backend); element n of it decides sample n.
  uint64_t mask_stream(uint64_t step) const {
    return (step << 16) | static_cast<uint64_t>(index());
  }

 private:
  float rate_;
  Tensor ones_;   // (max_batch): what the per-sample scale is drawn onto
  Tensor scale_;  // (max_batch): 0 or 1 / (1 - rate) per sample, this step's
  Tensor mask_;   // (max_batch): the same, dropout_forward's own copy
};

}  // namespace tandem
