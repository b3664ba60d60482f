// groupnorm through the backend's groupnorm ops.
#include "layers/groupnorm.h"

#include <cmath>

#include "engine/error.h"

namespace tandem {

GroupNorm::GroupNorm(ConfigMap& args) {
  args.require("groups", " (the number of channel groups, e.g. groups: 32)");
  const int64_t g = args.get_int("groups", 1);
  if (g < 1 || g > (1 << 20)) args.fail("groups", "expected a positive number of groups");
  groups_ = static_cast<int>(g);
  eps_ = static_cast<float>(args.get_double("eps", 1e-5));
  if (!(eps_ > 0) || !std::isfinite(eps_))
    args.fail("eps", "expected a positive epsilon (1.0e-5 is usual)");
}

Shape GroupNorm::setup(const Shape& in) {
  if (in.rank() != 1 && in.rank() != 3)
    throw ConfigError("groupnorm expects a (C,H,W) or flat (C) input, got " + in.str(),
                      "put it after a conv2d or dense layer");
  if (in[0] % groups_ != 0)
    throw ConfigError("groups " + std::to_string(groups_) + " must divide the input's " +
                          std::to_string(in[0]) + " channels",
                      "use a number of groups that divides " + std::to_string(in[0]));
  in_ = out_ = in;
  const int64_t c = in[0];
  add_param("weight", Shape{c}, Init::kOnes, c, c);
  add_param("bias", Shape{c}, Init::kZeros, c, c);
  return out_;
}

void GroupNorm::allocate(Backend& backend, int64_t max_batch) {
  mean_ = Tensor(backend, Shape{max_batch * groups_});
  inv_std_ = Tensor(backend, Shape{max_batch * groups_});
  if (!trainable()) {
    unused_dgamma_ = Tensor(backend, Shape{in_[0]});
    unused_dbeta_ = Tensor(backend, Shape{in_[0]});
  }
}

void GroupNorm::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const int64_t stats = x.dim(0) * groups_;
  Tensor mean = mean_.prefix(stats), inv_std = inv_std_.prefix(stats);
  ctx.backend.groupnorm_forward(y, mean, inv_std, x, params()[0].value, params()[1].value, groups_,
                                eps_);
}

void GroupNorm::backward(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy,
                         Tensor* dx) {
  const int64_t stats = x.dim(0) * groups_;
  if (!trainable() && !dx) return;
  Tensor& dgamma = trainable() ? params()[0].grad : unused_dgamma_;
  Tensor& dbeta = trainable() ? params()[1].grad : unused_dbeta_;
  ctx.backend.groupnorm_backward(dx, dgamma, dbeta, dy, x, params()[0].value, mean_.prefix(stats),
                                 inv_std_.prefix(stats), groups_);
}

}  // namespace tandem
