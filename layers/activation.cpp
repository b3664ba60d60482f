// Elementwise activation layers through the backend's activation ops (engine/activation_math.h).
#include "layers/activation.h"

#include <cmath>

namespace tandem {

ActivationLayer::ActivationLayer(ConfigMap& args, std::string type) : type_(std::move(type)) {
  for (Activation a : kActivations)
    if (type_ == activation_name(a)) kind_ = a;
  if (type_ == "leaky_relu") {
    alpha_ = static_cast<float>(args.get_double("alpha", 0.01));
    if (!(alpha_ >= 0 && alpha_ < 1)) args.fail("alpha", "expected a negative slope in [0, 1)");
  }
  if (type_ == "elu") {
    alpha_ = static_cast<float>(args.get_double("alpha", 1.0));
    if (!(alpha_ > 0) || !std::isfinite(alpha_))
      args.fail("alpha", "expected a positive finite alpha, e.g. 'alpha: 1.0'");
  }
  // PyTorch's GELU(approximate='none' | 'tanh').
  if (type_ == "gelu" && args.get_choice("approximate", "none", {"none", "tanh"}) == "tanh")
    kind_ = Activation::kGeluTanh;
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
