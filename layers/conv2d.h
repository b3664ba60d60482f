// conv2d: 2-D convolution (cross-correlation), x (N,C,H,W) * w (K,C/G,R,S) + b (K) -> y (N,K,P,Q),
// in G groups (grouped; G = C: depthwise).
#pragma once

#include "engine/backend.h"
#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Conv2d : public Layer {
 public:
  // Keys: filters (required), kernel (int or [h, w], required), stride (1), padding (0),
  // dilation (1), groups (1), bias (true), init.
  explicit Conv2d(ConfigMap& args);
  std::string type() const override { return "conv2d"; }
  Shape setup(const Shape& in) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override;
  void choose_init(const std::string& next_type) override;
  // Stride, padding, dilation and groups (the kernel is the weight's (K,C/G,R,S)); bias:
  // params()[1].
  const Conv2dParams& conv_params() const { return p_; }
  bool has_bias() const { return bias_; }

 private:
  int64_t filters_;
  int kernel_h_, kernel_w_;
  Conv2dParams p_;
  bool bias_;
  std::string init_;
  Init chosen_ = Init::kGlorotUniform;
};

}  // namespace tandem
