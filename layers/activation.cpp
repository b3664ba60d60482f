// Elementwise activation layers through the backend's activation ops.
#include "layers/activation.h"

namespace tandem {

ActivationLayer::ActivationLayer(ConfigMap& args, std::string type) : type_(std::move(type)) {
  if (type_ == "relu") kind_ = Activation::kRelu;
  if (type_ == "sigmoid") kind_ = Activation::kSigmoid;
  if (type_ == "tanh") kind_ = Activation::kTanh;
  if (type_ == "leaky_relu") {
    kind_ = Activation::kLeakyRelu;
    alpha_ = static_cast<float>(args.get_double("alpha", 0.01));
    if (!(alpha_ >= 0 && alpha_ < 1)) args.fail("alpha", "expected a negative slope in [0, 1)");
  }
}

Shape ActivationLayer::setup(const Shape& in) {
  in_ = out_ = in;
  return out_;
}

void ActivationLayer::forward(Context& ctx, const Tensor& x, Tensor& y) {
  ctx.backend.activation_forward(y, x, kind_, alpha_);
}

void ActivationLayer::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                               Tensor* dx) {
  if (dx) ctx.backend.activation_backward(*dx, dy, x, y, kind_, alpha_);
}

}  // namespace tandem
