// Weight initialisation choice per layer.
#include "layers/init_choice.h"

namespace tandem {

std::string read_init(ConfigMap& args) {
  if (!args.has("init")) {
    args.get_string("init", "");  // marks the key as known
    return "";
  }
  return args.get_choice("init", "",
                         {"he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "pytorch"});
}

Init resolve_init(const std::string& configured, const std::string& next_type) {
  if (configured == "he_normal") return Init::kHeNormal;
  if (configured == "he_uniform") return Init::kHeUniform;
  if (configured == "glorot_normal") return Init::kGlorotNormal;
  if (configured == "glorot_uniform") return Init::kGlorotUniform;
  if (configured == "pytorch") return Init::kPytorch;
  // He before the activations that pass positive inputs on and damp negative ones (the ReLU
  // family); Glorot before the bounded ones (sigmoid, tanh, hardsigmoid) and anything else.
  for (const char* relu_like :
       {"relu", "leaky_relu", "relu6", "silu", "hardswish", "gelu", "elu", "softplus", "mish"})
    if (next_type == relu_like) return Init::kHeUniform;
  return Init::kGlorotUniform;
}

}  // namespace tandem
