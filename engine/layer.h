// Layer: one step of a model, written against the Backend interface only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

namespace tandem {

// How a parameter's first values are drawn (from the engine's Philox RNG, on the host).
enum class Init {
  kZeros,
  kOnes,
  kHeNormal,       // N(0, 2/fan_in): layers followed by a relu-like activation
  kHeUniform,      // U(+-sqrt(6/fan_in))
  kGlorotNormal,   // N(0, 2/(fan_in+fan_out))
  kGlorotUniform,  // U(+-sqrt(6/(fan_in+fan_out))): every other layer
  kPytorch,        // U(+-1/sqrt(fan_in)), PyTorch's default for Linear and Conv2d
};

struct Param {
  std::string name;  // "conv2d_1.weight"
  Shape shape;
  Init init = Init::kZeros;
  int64_t fan_in = 1, fan_out = 1;
  Tensor value;  // allocated by Graph::allocate on the graph's backend
  Tensor grad;   // stays zero where the layer is frozen
  // Whether the optimizer updates it (its layer is not frozen: LayerSpec::frozen), and with lr
  // times what (LayerSpec::lr_mult); set by Graph.
  bool trainable = true;
  double lr_mult = 1;
};

// Graph::allocate packs a graph's params back to back, in order, into one buffer of values and one
// of gradients, each starting at a multiple of 16 floats (64 bytes, as the libraries like); the
// gaps hold zeros. So the optimizer updates them all with one op.
inline int64_t packed_numel(const Shape& s) { return (s.numel() + 15) / 16 * 16; }

// What a layer's forward and backward may know of the run.
struct Context {
  Backend& backend;
  bool training = true;
  uint64_t seed = 0;  // the run's seed (dropout masks)
  uint64_t step = 0;  // the global training step, 0-based
};

class Layer {
 public:
  virtual ~Layer() = default;

  virtual std::string type() const = 0;              // the config name: "conv2d"
  const std::string& name() const { return name_; }  // "conv2d_1"
  void set_name(std::string name) { name_ = std::move(name); }
  int index() const { return index_; }  // position in the model, 0-based
  void set_index(int i) { index_ = i; }
  // False for a frozen layer (set by the graph after setup, before allocate): its backward
  // computes no parameter gradient (only the input's, where one is asked for), and a layer with
  // statistics of its own (batch normalization) uses and keeps them while training.
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable) { trainable_ = trainable; }

  // Checks the input sample shape (no batch axis) and returns the output sample shape; declares
  // the parameters. Throws ConfigError saying what was expected.
  virtual Shape setup(const Shape& in) = 0;
  // Allocates per-run state (dropout masks, ...) for batches of up to max_batch samples.
  virtual void allocate(Backend&, int64_t /*max_batch*/) {}

  // x (N, in...) -> y (N, out...), both allocated by the graph.
  virtual void forward(Context& ctx, const Tensor& x, Tensor& y) = 0;
  // Parameter gradients are overwritten (left alone where the layer is frozen); dx is null where
  // no input gradient is needed (first layer).
  virtual void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;

  // Layers of several inputs (add, concat) override these three; the graph calls them for every
  // layer, and for the others they pass the one input on. xs and dxs follow the layer's inputs;
  // a dx is null where that input needs no gradient.
  virtual bool takes_several_inputs() const { return false; }
  virtual Shape setup_inputs(const std::vector<Shape>& in) { return setup(in.at(0)); }
  virtual void forward_inputs(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) {
    forward(ctx, xs.at(0), y);
  }
  virtual void backward_inputs(Context& ctx, const std::vector<Tensor>& xs, const Tensor& y,
                               const Tensor& dy, const std::vector<Tensor*>& dxs) {
    backward(ctx, xs.at(0), y, dy, dxs.at(0));
  }

  // Whether this layer can compute the relu that takes its output in the same pass, on `backend`
  // for activations of dtype d (Backend::fuses_relu). Where the graph fuses them (fuse_relu), the
  // relu layer does not run: this one's forward writes relu of its result, and its backward gets
  // that output as y and the gradient of it as dy.
  virtual bool can_fuse_relu(const Backend&, DType) const { return false; }
  void fuse_relu(bool on) { fused_relu_ = on; }
  bool fused_relu() const { return fused_relu_; }
  // Whether this layer can compute the relu whose output it alone takes, from that relu's input
  // (Backend::fuses_relu; max pooling: the maximum of relus is the relu of the maximum). Where
  // the graph fuses them (take_relu_before), the relu layer does not run: this one's x is the
  // relu's input, and its backward writes the gradient of that input.
  virtual bool can_take_relu_before(const Backend&, DType) const { return false; }
  void take_relu_before(bool on) { relu_before_ = on; }
  bool relu_before() const { return relu_before_; }

  // Forward multiply-adds count as 2 FLOPs; per sample.
  virtual int64_t flops() const { return 0; }
  // True where y is x reshaped (flatten): the graph then shares storage instead of copying.
  virtual bool is_view() const { return false; }
  // Fewest samples a training batch may hold (batch normalization of a flat input needs 2).
  virtual int64_t min_training_batch() const { return 1; }
  // Tensors of the model that are not trained (batch normalization's running statistics), by name
  // ("batchnorm_1.running_mean"): allocated and set by allocate(), saved and restored with the
  // params by checkpoints. They share storage with the layer's own.
  virtual std::vector<std::pair<std::string, Tensor>> buffers() { return {}; }
  // The values of those tensors, known after setup() (the model summary's non-trainable count).
  virtual int64_t buffer_count() const { return 0; }
  // Their names and shapes, known after setup() (train.init matches a checkpoint before the
  // graph is allocated).
  virtual std::vector<std::pair<std::string, Shape>> buffer_shapes() const { return {}; }
  // The default initialisation of weights, given the type of the layer that takes this one's
  // output (the next one, in a sequential model; "" for the last).
  virtual void choose_init(const std::string& /*next_type*/) {}

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  const Shape& input_shape() const { return in_; }
  const Shape& output_shape() const { return out_; }

 protected:
  Param& add_param(std::string suffix, Shape shape, Init init, int64_t fan_in, int64_t fan_out);
  Shape in_, out_;

 private:
  std::string name_;
  int index_ = 0;
  bool trainable_ = true;
  bool fused_relu_ = false;
  bool relu_before_ = false;
  std::vector<Param> params_;
};

}  // namespace tandem
