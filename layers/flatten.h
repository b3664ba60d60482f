// flatten: (N,C,H,W) -> (N,C*H*W), a view sharing storage (no copy).
#pragma once

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Flatten : public Layer {
 public:
  explicit Flatten(ConfigMap&) {}
  std::string type() const override { return "flatten"; }
  Shape setup(const Shape& in) override {
    in_ = in;
    out_ = Shape{in.numel()};
    return out_;
  }
  bool is_view() const override { return true; }
  // Never called: the graph makes y a reshaped view of x (and dx of dy).
  void forward(Context&, const Tensor&, Tensor&) override {}
  void backward(Context&, const Tensor&, const Tensor&, const Tensor&, Tensor*) override {}
};

}  // namespace tandem
