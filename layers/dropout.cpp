// dropout through the backend's counter-based masks.
#include "layers/dropout.h"

namespace tandem {

Dropout::Dropout(ConfigMap& args) {
  rate_ = static_cast<float>(args.get_double("rate", 0.5));
  if (!(rate_ >= 0 && rate_ < 1)) args.fail("rate", "expected a drop rate in [0, 1)");
}

Shape Dropout::setup(const Shape& in) {
  in_ = out_ = in;
  return out_;
}

void Dropout::allocate(Backend& backend, int64_t max_batch) {
  mask_ = Tensor(backend, in_.with_batch(max_batch));
}

void Dropout::forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (!ctx.training || rate_ == 0.f) {
    ctx.backend.copy(y, x);
    return;
  }
  Tensor mask = mask_.prefix(x.dim(0));
  ctx.backend.dropout_forward(y, mask, x, rate_, ctx.seed, mask_stream(ctx.step));
}

void Dropout::backward(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  if (rate_ == 0.f) {
    ctx.backend.copy(*dx, dy);
    return;
  }
  ctx.backend.dropout_backward(*dx, dy, mask_.prefix(x.dim(0)));
}

}  // namespace tandem
