// add, multiply and concat: the layers that join the branches of a model (listed with `inputs:`).
#pragma once

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

// A layer of two or more inputs: the graph calls only the *_inputs forms.
class MergeLayer : public Layer {
 public:
  bool takes_several_inputs() const override { return true; }
  Shape setup(const Shape& in) override { return setup_inputs({in}); }
  void forward(Context& ctx, const Tensor& x, Tensor& y) override { forward_inputs(ctx, {x}, y); }
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override {
    backward_inputs(ctx, {x}, y, dy, {dx});
  }

 protected:
  std::vector<Shape> ins_;
};

// add: y = x1 + x2 + ..., inputs of one shape (a residual connection).
class Add : public MergeLayer {
 public:
  explicit Add(ConfigMap&) {}
  std::string type() const override { return "add"; }
  Shape setup_inputs(const std::vector<Shape>& in) override;
  void forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) override;
  void backward_inputs(Context& ctx, const std::vector<Tensor>& xs, const Tensor& y,
                       const Tensor& dy, const std::vector<Tensor*>& dxs) override;
  int64_t flops() const override;
  bool can_fuse_relu(const Backend& backend, DType d) const override;
};

// multiply: y = x1 * x2, elementwise; one input may be a gate of one value per channel, (C) or
// (C,1,1), against a (C,H,W) other, broadcast over its positions (squeeze-and-excitation).
class Multiply : public MergeLayer {
 public:
  explicit Multiply(ConfigMap&) {}
  std::string type() const override { return "multiply"; }
  Shape setup_inputs(const std::vector<Shape>& in) override;
  void forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) override;
  void backward_inputs(Context& ctx, const std::vector<Tensor>& xs, const Tensor& y,
                       const Tensor& dy, const std::vector<Tensor*>& dxs) override;
  int64_t flops() const override { return out_.numel(); }
  size_t gate() const { return gate_; }  // the input broadcast (or the second, of equal shapes)
  const Shape& gate_shape() const { return ins_[gate_]; }

 private:
  size_t gate_ = 1;
};

// concat: the inputs side by side along the channel axis (images (C, H, W) of one height and
// width) or the feature axis (flat inputs), in the order of `inputs:`.
class Concat : public MergeLayer {
 public:
  explicit Concat(ConfigMap&) {}
  std::string type() const override { return "concat"; }
  Shape setup_inputs(const std::vector<Shape>& in) override;
  void forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) override;
  void backward_inputs(Context& ctx, const std::vector<Tensor>& xs, const Tensor& y,
                       const Tensor& dy, const std::vector<Tensor*>& dxs) override;
};

}  // namespace tandem
