// conv2d: shape inference and the three convolution passes through the backend.
#include "layers/conv2d.h"

#include "engine/error.h"
#include "layers/init_choice.h"

namespace tandem {

namespace {
int positive(ConfigMap& args, const std::string& key, int64_t v, int64_t min) {
  if (v < min)
    args.fail(key,
              "expected a value of at least " + std::to_string(min) + ", got " + std::to_string(v));
  return static_cast<int>(v);
}
}  // namespace

Conv2d::Conv2d(ConfigMap& args) {
  filters_ = args.require_int("filters");
  if (filters_ < 1) args.fail("filters", "expected a positive number of filters");
  args.require("kernel", " (e.g. kernel: 3)");
  auto k = args.get_ints("kernel", {}, 2);
  auto s = args.get_ints("stride", {1, 1}, 2);
  auto pad = args.get_ints("padding", {0, 0}, 2);
  auto d = args.get_ints("dilation", {1, 1}, 2);
  kernel_h_ = positive(args, "kernel", k[0], 1);
  kernel_w_ = positive(args, "kernel", k[1], 1);
  p_.stride_h = positive(args, "stride", s[0], 1);
  p_.stride_w = positive(args, "stride", s[1], 1);
  p_.pad_h = positive(args, "padding", pad[0], 0);
  p_.pad_w = positive(args, "padding", pad[1], 0);
  p_.dilation_h = positive(args, "dilation", d[0], 1);
  p_.dilation_w = positive(args, "dilation", d[1], 1);
  p_.groups = positive(args, "groups", args.get_int("groups", 1), 1);
  bias_ = args.get_bool("bias", true);
  init_ = read_init(args);
}

void Conv2d::choose_init(const std::string& next_type) { chosen_ = resolve_init(init_, next_type); }

Shape Conv2d::setup(const Shape& in) {
  if (in.rank() != 3)
    throw ConfigError("conv2d expects an image input (channels, height, width), got " + in.str(),
                      "give the model input as shape: [C, H, W]");
  const int64_t eff_h = p_.dilation_h * (kernel_h_ - 1) + 1,
                eff_w = p_.dilation_w * (kernel_w_ - 1) + 1;
  if (eff_h > in[1] + 2 * p_.pad_h || eff_w > in[2] + 2 * p_.pad_w)
    throw ConfigError("the " + std::to_string(eff_h) + "x" + std::to_string(eff_w) +
                          " kernel is larger than its padded input " +
                          std::to_string(in[1] + 2 * p_.pad_h) + "x" +
                          std::to_string(in[2] + 2 * p_.pad_w),
                      "use a smaller kernel, add padding, or remove a pooling layer before it");
  const int64_t g = p_.groups;
  if (in[0] % g != 0 || filters_ % g != 0)
    throw ConfigError(
        "groups " + std::to_string(g) + " must divide both the input's " + std::to_string(in[0]) +
            " channels and the " + std::to_string(filters_) + " filters",
        in[0] % g != 0 ? "give a groups that divides " + std::to_string(in[0]) + " (groups " +
                             std::to_string(in[0]) + " is a depthwise convolution)"
                       : "give filters a multiple of " + std::to_string(g));
  in_ = in;
  out_ = Shape{filters_, conv_out_size(in[1], kernel_h_, p_.stride_h, p_.pad_h, p_.dilation_h),
               conv_out_size(in[2], kernel_w_, p_.stride_w, p_.pad_w, p_.dilation_w)};
  // Each filter sees its group's channels. Fan-in and fan-out as PyTorch counts them on the
  // (K, C/G, R, S) weight: C/G R S and K R S.
  const int64_t group_in = in[0] / g;
  const int64_t fan_in = group_in * kernel_h_ * kernel_w_,
                fan_out = filters_ * kernel_h_ * kernel_w_;
  add_param("weight", Shape{filters_, group_in, kernel_h_, kernel_w_}, chosen_, fan_in, fan_out);
  if (bias_) add_param("bias", Shape{filters_}, Init::kZeros, fan_in, fan_out);
  return out_;
}

void Conv2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  ctx.backend.conv2d_forward(y, x, params()[0].value, bias_ ? &params()[1].value : nullptr, p_);
}

void Conv2d::backward(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (trainable()) {
    ctx.backend.conv2d_backward_filter(params()[0].grad, dy, x, p_);
    if (bias_) ctx.backend.bias_backward(params()[1].grad, dy);
  }
  if (dx) ctx.backend.conv2d_backward_data(*dx, dy, params()[0].value, p_);
}

int64_t Conv2d::flops() const {
  return 2 * out_.numel() * (in_[0] / p_.groups) * kernel_h_ * kernel_w_;
}

}  // namespace tandem
