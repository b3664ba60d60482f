// Registers every layer type and loss of layers/ under its config name.
#include "engine/layer_registry.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/drop_path.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/groupnorm.h"
#include "layers/merge.h"
#include "layers/mse.h"
#include "layers/pool2d.h"
#include "layers/softmax_cross_entropy.h"

namespace tandem {

void register_builtin_layers() {
  register_layer("dense", [](ConfigMap& a) { return std::make_unique<Dense>(a); });
  register_layer("conv2d", [](ConfigMap& a) { return std::make_unique<Conv2d>(a); });
  for (const char* t : {"maxpool", "avgpool", "global_avgpool"})
    register_layer(t, [t](ConfigMap& a) { return std::make_unique<Pool2d>(a, t); });
  for (Activation kind : kActivations) {
    if (kind == Activation::kGeluTanh) continue;  // gelu: {approximate: tanh}
    const char* t = activation_name(kind);
    register_layer(t, [t](ConfigMap& a) { return std::make_unique<ActivationLayer>(a, t); });
  }
  register_layer("batchnorm", [](ConfigMap& a) { return std::make_unique<BatchNorm>(a); });
  register_layer("groupnorm", [](ConfigMap& a) { return std::make_unique<GroupNorm>(a); });
  register_layer("dropout", [](ConfigMap& a) { return std::make_unique<Dropout>(a); });
  register_layer("drop_path", [](ConfigMap& a) { return std::make_unique<DropPath>(a); });
  register_layer("flatten", [](ConfigMap& a) { return std::make_unique<Flatten>(a); });
  register_layer("add", [](ConfigMap& a) { return std::make_unique<Add>(a); });
  register_layer("multiply", [](ConfigMap& a) { return std::make_unique<Multiply>(a); });
  register_layer("concat", [](ConfigMap& a) { return std::make_unique<Concat>(a); });
  register_loss("softmax_cross_entropy", [](double e) {
    return std::make_unique<SoftmaxCrossEntropy>(static_cast<float>(e));
  });
  register_loss("mse", [](double) { return std::make_unique<Mse>(); });
}

}  // namespace tandem
