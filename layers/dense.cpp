// dense: a fully connected layer through the backend's gemm.
#include "layers/dense.h"

#include "engine/error.h"
#include "layers/init_choice.h"

namespace tandem {

Dense::Dense(ConfigMap& args) {
  units_ = args.require_int("units");
  if (units_ < 1) args.fail("units", "expected a positive number of units");
  bias_ = args.get_bool("bias", true);
  init_ = read_init(args);
}

void Dense::choose_init(const std::string& next_type) { chosen_ = resolve_init(init_, next_type); }

Shape Dense::setup(const Shape& in) {
  if (in.rank() != 1)
    throw ConfigError("dense expects a flat input (features), got " + in.str(),
                      "add '- flatten' before this layer");
  in_ = in;
  out_ = Shape{units_};
  add_param("weight", Shape{units_, in[0]}, chosen_, in[0], units_);
  if (bias_) add_param("bias", Shape{units_}, Init::kZeros, in[0], units_);
  return out_;
}

void Dense::forward(Context& ctx, const Tensor& x, Tensor& y) {
  // y (N,U) = x (N,F) * W^T (F,U)
  ctx.backend.gemm(y, x, params()[0].value, false, true, 1.f, 0.f);
  if (bias_) ctx.backend.bias_add(y, params()[1].value);
}

void Dense::backward(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  // dW (U,F) = dy^T (U,N) * x (N,F); db (U) = sum_n dy; dx (N,F) = dy (N,U) * W (U,F)
  if (trainable()) {
    ctx.backend.gemm(params()[0].grad, dy, x, true, false, 1.f, 0.f);
    if (bias_) ctx.backend.bias_backward(params()[1].grad, dy);
  }
  if (dx) ctx.backend.gemm(*dx, dy, params()[0].value, false, false, 1.f, 0.f);
}

int64_t Dense::flops() const { return 2 * in_[0] * units_; }

}  // namespace tandem
