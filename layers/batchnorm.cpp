// batchnorm through the backend's batchnorm ops.
#include "layers/batchnorm.h"

#include <cmath>

#include "engine/error.h"

namespace tandem {

BatchNorm::BatchNorm(ConfigMap& args) {
  momentum_ = static_cast<float>(args.get_double("momentum", 0.1));
  if (!(momentum_ >= 0 && momentum_ <= 1))
    args.fail("momentum", "expected the running averages' update weight in [0, 1]");
  eps_ = static_cast<float>(args.get_double("eps", 1e-5));
  if (!(eps_ > 0) || !std::isfinite(eps_))
    args.fail("eps", "expected a positive epsilon (1.0e-5 is usual)");
  // The last normalization of a residual branch may start at zero, so that the block starts as
  // the identity (torchvision's zero_init_residual).
  zero_init_ = args.get_bool("zero_init", false);
}

Shape BatchNorm::setup(const Shape& in) {
  if (in.rank() != 1 && in.rank() != 3)
    throw ConfigError("batchnorm expects a (C,H,W) or flat (C) input",
                      "put it after a conv2d or dense layer");
  in_ = out_ = in;
  const int64_t c = in[0];
  add_param("weight", Shape{c}, zero_init_ ? Init::kZeros : Init::kOnes, c, c);
  add_param("bias", Shape{c}, Init::kZeros, c, c);
  return out_;
}

void BatchNorm::allocate(Backend& backend, int64_t) {
  const Shape c{in_[0]};
  running_mean_ = Tensor(backend, c);
  running_var_ = Tensor(backend, c);
  mean_ = Tensor(backend, c);
  inv_std_ = Tensor(backend, c);
  backend.fill(running_mean_, 0.f);
  backend.fill(running_var_, 1.f);
  backend.fill(mean_, 0.f);
  backend.fill(inv_std_, 1.f);
  if (!trainable()) {
    zeros_ = Tensor(backend, c);
    backend.fill(zeros_, 0.f);
  }
}

std::vector<std::pair<std::string, Shape>> BatchNorm::buffer_shapes() const {
  return {{name() + ".running_mean", Shape{in_[0]}}, {name() + ".running_var", Shape{in_[0]}}};
}

std::vector<std::pair<std::string, Tensor>> BatchNorm::buffers() {
  return {{name() + ".running_mean", running_mean_}, {name() + ".running_var", running_var_}};
}

void BatchNorm::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const Tensor& gamma = params()[0].value;
  const Tensor& beta = params()[1].value;
  if (!ctx.training || !trainable()) {
    if (fused_relu())
      ctx.backend.batchnorm_relu_forward_inference(y, x, gamma, beta, running_mean_, running_var_,
                                                   eps_);
    else
      ctx.backend.batchnorm_forward_inference(y, x, gamma, beta, running_mean_, running_var_, eps_);
    return;
  }
  if (x.dim(0) < min_training_batch())
    throw ConfigError(name() +
                          ": batch normalization of a flat input needs at least 2 samples a "
                          "batch while training, got a batch of " +
                          std::to_string(x.dim(0)),
                      "use a batch size of 2 or more, or set train.drop_last: true when the last "
                      "batch of an epoch holds one sample");
  if (fused_relu())
    ctx.backend.batchnorm_relu_forward_training(y, mean_, inv_std_, running_mean_, running_var_, x,
                                                gamma, beta, momentum_, eps_);
  else
    ctx.backend.batchnorm_forward_training(y, mean_, inv_std_, running_mean_, running_var_, x,
                                           gamma, beta, momentum_, eps_);
}

// A frozen one's backward is the inference op on dy, which a fused relu's gradient would have to
// go through first: only a trained one fuses.
bool BatchNorm::can_fuse_relu(const Backend& backend, DType d) const {
  return trainable() && backend.fuses_relu(Backend::ReluFusion::kBatchnorm, d);
}

void BatchNorm::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  if (!trainable()) {
    // y = gamma (x - running_mean) / sqrt(running_var + eps) + beta, the statistics constants:
    // dx = gamma dy / sqrt(running_var + eps), the inference op on dy with no mean and no shift.
    if (dx)
      ctx.backend.batchnorm_forward_inference(*dx, dy, params()[0].value, zeros_, zeros_,
                                              running_var_, eps_);
    return;
  }
  if (fused_relu())
    ctx.backend.batchnorm_relu_backward(dx, params()[0].grad, params()[1].grad, dy, y, x,
                                        params()[0].value, mean_, inv_std_);
  else
    ctx.backend.batchnorm_backward(dx, params()[0].grad, params()[1].grad, dy, x, params()[0].value,
                                   mean_, inv_std_);
}

}  // namespace tandem
