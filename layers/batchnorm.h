// batchnorm: normalizes each channel with the batch's statistics while training and with running
// averages of them in eval, then scales and shifts it (Ioffe & Szegedy; PyTorch's BatchNorm1d/2d).
// Frozen, it normalizes with the running averages in training too and leaves them as they are
// (Keras' frozen BatchNormalization), so that fine-tuning keeps the statistics it was trained
// with.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class BatchNorm : public Layer {
 public:
  // keys: momentum (0.1), eps (1e-5), zero_init (false: the scale starts at 1; true: at 0)
  explicit BatchNorm(ConfigMap& args);
  std::string type() const override { return "batchnorm"; }
  // (C,H,W): per channel over the batch and the positions; (C): per feature over the batch.
  Shape setup(const Shape& in) override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override { return 2 * in_.numel(); }
  bool can_fuse_relu(const Backend& backend, DType d) const override;
  // Frozen, it normalizes with the running statistics: any batch will do.
  int64_t min_training_batch() const override { return in_.rank() == 1 && trainable() ? 2 : 1; }
  std::vector<std::pair<std::string, Tensor>> buffers() override;
  float eps() const { return eps_; }
  int64_t buffer_count() const override { return 2 * in_[0]; }  // running mean and variance
  std::vector<std::pair<std::string, Shape>> buffer_shapes() const override;

 private:
  float momentum_, eps_;
  bool zero_init_ = false;
  Tensor running_mean_, running_var_;  // the model's, saved in checkpoints
  Tensor mean_, inv_std_;              // the last training forward's, for its backward
  Tensor zeros_;                       // (C) frozen: the input gradient's mean and shift
};

}  // namespace tandem
