// groupnorm: normalizes each sample over groups of its channels (Wu & He; PyTorch's GroupNorm),
// then scales and shifts each channel. Its statistics are the sample's own, in training and in
// eval alike: no running averages, and any batch size, 1 included. groups: 1 is layer
// normalization over (C,H,W), groups equal to the channels is instance normalization.
#pragma once

#include <string>

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class GroupNorm : public Layer {
 public:
  // keys: groups (required, dividing the channels), eps (1e-5)
  explicit GroupNorm(ConfigMap& args);
  std::string type() const override { return "groupnorm"; }
  // (C,H,W), or a flat (C).
  Shape setup(const Shape& in) override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  int64_t flops() const override { return 2 * in_.numel(); }
  int groups() const { return groups_; }
  float eps() const { return eps_; }

 private:
  int groups_;
  float eps_;
  Tensor mean_, inv_std_;  // (max_batch * groups): the last forward's, for its backward
  // (C) frozen: where the backend's one backward op writes the parameter gradients that a frozen
  // layer does not keep (it computes them with the input's, which a layer below needs).
  Tensor unused_dgamma_, unused_dbeta_;
};

}  // namespace tandem
