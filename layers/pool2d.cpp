// Pooling layers through the backend's pool2d ops.
#include "layers/pool2d.h"

#include "engine/error.h"

namespace tandem {

Pool2d::Pool2d(ConfigMap& args, std::string type) : type_(std::move(type)) {
  p_.mode = type_ == "maxpool" ? PoolMode::kMax : PoolMode::kAverage;
  if (type_ == "global_avgpool") {
    // (C,1,1) by default, as PyTorch's AdaptiveAvgPool2d(1) (a 1x1 convolution or a multiply can
    // take it); keep_dims: false gives (C), Keras' GlobalAveragePooling2D.
    keep_dims_ = args.get_bool("keep_dims", true);
    return;
  }
  args.require("kernel", " (e.g. kernel: 2)");
  auto k = args.get_ints("kernel", {}, 2);
  auto s = args.get_ints("stride", k, 2);
  auto pad = args.get_ints("padding", {0, 0}, 2);
  if (k[0] < 1 || k[1] < 1) args.fail("kernel", "expected a positive window size");
  if (s[0] < 1 || s[1] < 1) args.fail("stride", "expected a positive stride");
  if (pad[0] < 0 || pad[1] < 0) args.fail("padding", "expected zero or more padding");
  if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1])
    args.fail("padding", "padding must be at most half the window");
  p_.kernel_h = static_cast<int>(k[0]);
  p_.kernel_w = static_cast<int>(k[1]);
  p_.stride_h = static_cast<int>(s[0]);
  p_.stride_w = static_cast<int>(s[1]);
  p_.pad_h = static_cast<int>(pad[0]);
  p_.pad_w = static_cast<int>(pad[1]);
  p_.ceil_mode = args.get_bool("ceil_mode", false);
}

Shape Pool2d::setup(const Shape& in) {
  if (in.rank() != 3)
    throw ConfigError(type_ + " expects an image input (channels, height, width), got " + in.str(),
                      "pooling goes before '- flatten'");
  if (type_ == "global_avgpool") {
    p_.kernel_h = static_cast<int>(in[1]);
    p_.kernel_w = static_cast<int>(in[2]);
    p_.stride_h = p_.stride_w = 1;
  }
  if (p_.kernel_h > in[1] + 2 * p_.pad_h || p_.kernel_w > in[2] + 2 * p_.pad_w)
    throw ConfigError("the pooling window " + std::to_string(p_.kernel_h) + "x" +
                          std::to_string(p_.kernel_w) + " is larger than its input " +
                          std::to_string(in[1]) + "x" + std::to_string(in[2]),
                      "use a smaller window or remove a pooling layer before this one");
  in_ = in;
  out_ = pool_out_shape(in.with_batch(1), p_).without_batch();
  if (!keep_dims_) out_ = Shape{in[0]};  // the same values: (N,C) is (N,C,1,1) in memory
  return out_;
}

// The (N,C,1,1) view of a keep_dims: false output.
Tensor Pool2d::as_4d(const Tensor& t) const {
  return keep_dims_ ? t : t.reshape(Shape{t.dim(0), in_[0], 1, 1});
}

// Max pooling takes a relu before it; global_avgpool's type is a max pooling's only by name.
bool Pool2d::can_take_relu_before(const Backend& backend, DType d) const {
  return type_ == "maxpool" && p_.mode == PoolMode::kMax &&
         backend.fuses_relu(Backend::ReluFusion::kMaxPool, d);
}

void Pool2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  Tensor y4 = as_4d(y);
  if (relu_before())
    ctx.backend.relu_max_pool_forward(y4, x, p_);
  else
    ctx.backend.pool2d_forward(y4, x, p_);
}

void Pool2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx) {
  if (!dx) return;
  if (relu_before())
    ctx.backend.relu_max_pool_backward(*dx, as_4d(dy), x, as_4d(y), p_);
  else
    ctx.backend.pool2d_backward(*dx, as_4d(dy), x, as_4d(y), p_);
}

int64_t Pool2d::flops() const { return out_.numel() * p_.kernel_h * p_.kernel_w; }

}  // namespace tandem
