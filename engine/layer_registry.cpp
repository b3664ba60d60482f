// The layer and loss registries.
#include "engine/layer_registry.h"

#include <map>

#include "engine/error.h"

namespace tandem {
namespace {
std::map<std::string, LayerFactory>& layers() {
  static std::map<std::string, LayerFactory> r;
  return r;
}
std::map<std::string, LossFactory>& losses() {
  static std::map<std::string, LossFactory> r;
  return r;
}
}  // namespace

void register_layer(const std::string& type, LayerFactory f) { layers()[type] = std::move(f); }
void register_loss(const std::string& type, LossFactory f) { losses()[type] = std::move(f); }

std::vector<std::string> layer_types() {
  std::vector<std::string> names;
  for (const auto& [n, f] : layers()) names.push_back(n);
  return names;
}

std::unique_ptr<Layer> make_layer(LayerSpec& spec) {
  auto it = layers().find(spec.type);
  if (it == layers().end() && (spec.type == "softmax" || spec.type == "Softmax"))
    throw ConfigError(spec.where + ": layer " + std::to_string(spec.index + 1) +
                          ": no softmax layer: the loss applies it (softmax_cross_entropy takes "
                          "the last dense layer's raw outputs)",
                      "remove the softmax layer; the model ends with its dense layer of one unit "
                      "per class");
  if (it == layers().end()) {
    std::string known;
    for (const auto& [n, f] : layers()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError(spec.where + ": layer " + std::to_string(spec.index + 1) +
                          ": unknown layer type '" + spec.type + "'" +
                          did_you_mean(closest_names(spec.type, layer_types())),
                      "known layer types: " + known);
  }
  std::unique_ptr<Layer> layer = it->second(spec.args);
  spec.args.finish();
  return layer;
}

std::unique_ptr<Loss> make_loss(const std::string& type, double label_smoothing) {
  auto it = losses().find(type);
  if (it == losses().end()) throw ConfigError("unknown loss '" + type + "'");
  return it->second(label_smoothing);
}

}  // namespace tandem
