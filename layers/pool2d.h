// maxpool, avgpool and global_avgpool: one layer class, three config names (they differ only in
// the window they use).
#pragma once

#include "engine/backend.h"
#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Pool2d : public Layer {
 public:
  // maxpool / avgpool keys: kernel (int or [h, w], required), stride (= kernel), padding (0),
  // ceil_mode (false: a last, partial window is dropped, as PyTorch's default).
  // global_avgpool: the window is the whole input; keep_dims (true: (C,1,1); false: (C)).
  Pool2d(ConfigMap& args, std::string type);
  std::string type() const override { return type_; }
  Shape setup(const Shape& in) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override;
  bool can_take_relu_before(const Backend& backend, DType d) const override;
  // The window (global_avgpool's: the whole input, once set up), stride, padding and mode.
  const Pool2dParams& pool_params() const { return p_; }
  bool keep_dims() const { return keep_dims_; }

 private:
  Tensor as_4d(const Tensor& t) const;
  std::string type_;
  Pool2dParams p_;
  bool keep_dims_ = true;
};

}  // namespace tandem
