// Name -> factory maps for layers and losses, filled by layers/registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/layer.h"
#include "engine/loss.h"

namespace tandem {

// A factory reads its keys from args (strictly: the caller rejects keys it did not read).
using LayerFactory = std::function<std::unique_ptr<Layer>(ConfigMap& args)>;
// A loss factory gets the config's label smoothing (softmax_cross_entropy's; 0 otherwise).
using LossFactory = std::function<std::unique_ptr<Loss>(double label_smoothing)>;

void register_layer(const std::string& type, LayerFactory factory);
void register_loss(const std::string& type, LossFactory factory);
std::vector<std::string> layer_types();

// Builds one layer of a config; throws ConfigError at the layer's position for an unknown type
// (with the known types listed) or bad keys.
std::unique_ptr<Layer> make_layer(LayerSpec& spec);
// label_smoothing: softmax_cross_entropy's (Config::label_smoothing); 0 for the others.
std::unique_ptr<Loss> make_loss(const std::string& type, double label_smoothing = 0);

// Registers every layer and loss in layers/ (defined there).
void register_builtin_layers();

}  // namespace tandem
