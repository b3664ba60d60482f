// drop_path through the backend's dropout masks (one per sample) and its per-sample multiply.
#include "layers/drop_path.h"

namespace tandem {

DropPath::DropPath(ConfigMap& args) {
  args.require("rate", " (the probability of dropping a sample's branch, e.g. rate: 0.1)");
  rate_ = static_cast<float>(args.get_double("rate", 0));
  if (!(rate_ >= 0 && rate_ < 1)) args.fail("rate", "expected a drop rate in [0, 1)");
}

Shape DropPath::setup(const Shape& in) {
  in_ = out_ = in;
  return out_;
}

void DropPath::allocate(Backend& backend, int64_t max_batch) {
  ones_ = Tensor(backend, Shape{max_batch});
  scale_ = Tensor(backend, Shape{max_batch});
  mask_ = Tensor(backend, Shape{max_batch});
  backend.fill(ones_, 1.f);
}

void DropPath::forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (!ctx.training || rate_ == 0.f) {
    ctx.backend.copy(y, x);
    return;
  }
  const int64_t n = x.dim(0);
  Tensor scale = scale_.prefix(n), mask = mask_.prefix(n);
  ctx.backend.dropout_forward(scale, mask, ones_.prefix(n), rate_, ctx.seed, mask_stream(ctx.step));
  ctx.backend.multiply(y, x, scale);
}

void DropPath::backward(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy,
                        Tensor* dx) {
  if (!dx) return;
  if (rate_ == 0.f) {
    ctx.backend.copy(*dx, dy);
    return;
  }
  ctx.backend.multiply_backward(dx, nullptr, dy, x, scale_.prefix(x.dim(0)));
}

}  // namespace tandem
