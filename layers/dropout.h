// dropout: zeroes a `rate` share of activations while training (inverted dropout), identity in eval.
#pragma once

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Dropout : public Layer {
 public:
  explicit Dropout(ConfigMap& args);  // keys: rate (0.5)
  std::string type() const override { return "dropout"; }
  Shape setup(const Shape& in) override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  // The RNG stream of this layer's mask at a step: distinct per (step, layer), the same on every
  // backend.
  uint64_t mask_stream(uint64_t step) const { return (step << 16) | static_cast<uint64_t>(index()); }

 private:
  float rate_;
  Tensor mask_;
};

}  // namespace tandem
