// The elementwise activations (engine/activation_math.h): one layer class, a config name each:
// relu, leaky_relu, sigmoid, tanh, relu6, silu, hardswish, hardsigmoid, gelu, elu, softplus, mish.
#pragma once

#include "engine/backend.h"
#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class ActivationLayer : public Layer {
 public:
  // leaky_relu takes `alpha` (the negative slope, 0.01), elu `alpha` (1.0), gelu `approximate`
  // (none, or tanh); the others take no keys.
  ActivationLayer(ConfigMap& args, std::string type);
  std::string type() const override { return type_; }
  Shape setup(const Shape& in) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override { return in_.numel(); }
  Activation kind() const { return kind_; }
  float alpha() const { return alpha_; }  // leaky_relu's negative slope, elu's alpha

 private:
  std::string type_;
  Activation kind_;
  float alpha_ = 0.f;
};

}  // namespace tandem
