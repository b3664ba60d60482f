// Graph: the model's layers in order, their activation buffers and parameters on one backend.
//
// A layer takes the output of the one before it, or, in a branching model, those of the earlier
// layers its `inputs:` name (layers are listed in an order where every input comes first). An
// output taken by several layers gets the sum of their gradients.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/layer.h"
#include "engine/precision.h"

namespace tandem {

struct SummaryRow {
  int index;         // 1-based
  std::string name;  // "conv2d_1"
  std::string type;
  Shape output;  // per sample
  int64_t params;
  int64_t flops;                    // forward, per sample
  std::vector<std::string> inputs;  // names of the layers it takes, for branching models only
  int64_t buffers = 0;              // values not trained (batch normalization's running statistics)
  bool named = false;               // the config gave its name (else it is type_k)
  bool frozen = false;              // a layer with parameters that does not train them
  double lr_mult = 1;               // train.optimizer.lr_multipliers' factor
};

class Graph {
 public:
  // Builds and checks the model of a config: layer types, keys and shapes. No backend yet. The
  // config's precision sets the activations' dtype (engine/precision.h).
  explicit Graph(Config& config);

  // Places the graph on a backend: parameters drawn from the seed (identical on every backend),
  // activation and gradient buffers for batches of up to max_batch samples. In a 16-bit run every
  // activation but the input and the logits is 16-bit. Each inner activation's memory order is
  // the backend's choice (Backend::activation_layout: images channels-last in 16 bits, oneDNN's
  // blocked order for fp32 on the CPU), so that the layers between them pass tensors in the
  // kernels' layout and only the graph's edges convert: the input, a flatten after an image, the
  // logits.
  void allocate(Backend& backend, int64_t max_batch, uint64_t seed);
  Precision precision() const { return precision_; }

  // The input buffer (max_batch, input...): upload a batch into input().prefix(n).
  Tensor& input() { return acts_.front(); }
  // Makes `other` (the input's shape, on the same backend) the input buffer and hands back the
  // old one: a second buffer can be filled while a step reads the first.
  void swap_input(Tensor& other);
  // x = input().prefix(n) -> logits (n, classes).
  Tensor forward(Context& ctx, int64_t n);
  // From dlogits (n, classes): every parameter's gradient.
  void backward(Context& ctx, const Tensor& dlogits);

  // Called before (done false) and after (done true) each layer's forward and backward pass, for
  // per-layer timing and placement; empty: nothing is called.
  using LayerHook = std::function<void(size_t layer, bool backward, bool done)>;
  void set_layer_hook(LayerHook hook) { hook_ = std::move(hook); }
  // Sets a hook for the guard's lifetime, also when an exception ends it.
  class ScopedHook {
   public:
    ScopedHook(Graph& graph, LayerHook hook) : graph_(graph) {
      graph_.set_layer_hook(std::move(hook));
    }
    ~ScopedHook() { graph_.set_layer_hook(nullptr); }
    ScopedHook(const ScopedHook&) = delete;
    ScopedHook& operator=(const ScopedHook&) = delete;

   private:
    Graph& graph_;
  };

  // Layer i's output, the gradient of that output and of its input, first n samples, as the last
  // forward and backward left them (NaN diagnosis); a layer with a fused relu (fused_into): the
  // relu's output and its gradient. The input gradient is undefined where the
  // backward computes none (at and below the first layer with parameters).
  Tensor output(size_t layer, int64_t n) const { return acts_[layer + 1].prefix(n); }
  Tensor output_gradient(size_t layer, int64_t n) const { return grads_[layer + 1].prefix(n); }
  Tensor input_gradient(size_t layer, int64_t n) const;

  // The layer that computes layer i, a relu fused into it (Backend::fuses_relu), or -1: the
  // layer before it (batchnorm, add: Layer::fuse_relu) or the one after (max pooling:
  // Layer::take_relu_before). A fused relu does not run: its output and that output's gradient
  // are its input's buffers (holding the relu's output where the layer before computes it, its
  // input where the layer after does).
  int fused_into(size_t i) const { return fused_into_.empty() ? -1 : fused_into_[i]; }

  std::vector<Param*> params();
  // Every parameter's value and gradient, packed back to back (packed_numel each; the gaps hold
  // zeros), one tensor each: what a data-parallel step sums over its processes.
  Tensor& packed_values() { return packed_values_; }
  Tensor& packed_grads() { return packed_grads_; }
  // Every layer's buffers (Layer::buffers), in model order; valid after allocate(). moving_only:
  // those that training moves (not a frozen batch normalization's).
  std::vector<std::pair<std::string, Tensor>> buffers(bool moving_only = false);
  // The names and shapes of every parameter, then of every buffer: what a checkpoint holds of
  // the model (train.init matches a file against them before allocate()).
  std::vector<std::pair<std::string, Shape>> tensor_shapes() const;
  // Fewest samples a training batch may hold (Layer::min_training_batch).
  int64_t min_training_batch() const;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // True where some layer takes another input than the output of the layer before it.
  bool branches() const { return branches_; }
  std::vector<SummaryRow> summary() const;
  const Shape& input_shape() const { return input_shape_; }
  int64_t classes() const { return classes_; }
  int64_t max_batch() const { return max_batch_; }
  int64_t parameter_count() const;         // every parameter, frozen ones included
  int64_t frozen_parameter_count() const;  // those of frozen layers
  int64_t forward_flops() const;           // per sample

  // Draws the initial values of every parameter on the host, in model order: stream k is the
  // k-th parameter, so a seed gives the same weights on every device.
  static std::vector<float> initial_values(const Param& p, uint64_t seed, uint64_t stream);

 private:
  // Marks the layers the config freezes (Layer::set_trainable, Param::trainable) and gives each
  // parameter its lr multiplier; refuses a freeze or multiplier named for a layer without
  // parameters, and a model with nothing left to train.
  void set_trainable(const Config& config);
  // Fuses each relu that alone takes the output of a layer that can compute it in the same pass
  // (Layer::can_fuse_relu), or else whose output one layer alone takes that can compute it
  // (Layer::can_take_relu_before), unless TANDEM_FUSION=off; dtype_of(k): activation k's dtype.
  void choose_fusions(const Backend& backend, const std::function<DType(size_t)>& dtype_of);
  // Activation k (0 the input, i+1 layer i's output) and its gradient buffer.
  Tensor& act(int k) { return acts_[static_cast<size_t>(k)]; }
  std::vector<std::unique_ptr<Layer>> layers_;
  Tensor packed_values_, packed_grads_;
  std::vector<std::vector<int>> inputs_;  // per layer, the activations it takes
  std::vector<int> consumers_;            // per activation, how many layer inputs take it
  std::vector<int> only_taker_;           // per activation, the layer that alone takes it, or -1
  // Per activation: whether the backward pass computes its gradient (some layer at or below it
  // has parameters).
  std::vector<bool> needs_grad_;
  // Per view layer (flatten): its input's gradient buffer is its output's, reshaped (the input
  // has no other taker), so its backward is nothing.
  std::vector<bool> shares_grad_;
  // Per layer: a view layer whose output really is its input reshaped (same dtype, plain order).
  // A flatten after a channels-last, blocked or fp32 activation copies instead (Backend::copy
  // converts, keeping the logical NCHW order, so dense weights mean the same in every precision).
  std::vector<bool> views_;
  std::vector<int> fused_into_;  // per layer: fused_into()
  Precision precision_ = Precision::kF32;
  bool branches_ = false;
  std::vector<bool> named_;  // by layer: the config gave its name
  // Gradients for an activation that already holds another taker's gradient are written here
  // and then added: one buffer per input slot of the widest layer.
  std::vector<Tensor> scratch_;
  Shape input_shape_;
  int64_t classes_ = 0;
  int64_t max_batch_ = 0;
  std::vector<Tensor> acts_;   // acts_[0] input, acts_[i+1] output of layer i (max batch)
  std::vector<Tensor> grads_;  // grads_[i] gradient of acts_[i]; grads_[0] unused
  LayerHook hook_;
};

}  // namespace tandem
