// dense: y (N,units) = x (N,features) W^T + b, W (units,features) as in PyTorch's Linear.
#pragma once

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Dense : public Layer {
 public:
  // Keys: units (required), bias (true), init (he_normal after relu-like layers, else glorot_uniform).
  explicit Dense(ConfigMap& args);
  std::string type() const override { return "dense"; }
  Shape setup(const Shape& in) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override;
  void choose_init(const std::string& next_type) override;
  bool has_bias() const { return bias_; }  // params()[1]

 private:
  int64_t units_;
  bool bias_;
  std::string init_;  // empty: chosen from the next layer
  Init chosen_ = Init::kGlorotUniform;
};

}  // namespace tandem
