// The `init:` key shared by the layers with weights, and the default chosen from the next layer.
#pragma once

#include <string>

#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

// Reads `init:` (empty when absent): he_normal | he_uniform | glorot_normal | glorot_uniform | pytorch.
std::string read_init(ConfigMap& args);
// The init for a weight: the configured one, else He uniform before relu-like activations
// (they halve the variance), Glorot uniform otherwise.
Init resolve_init(const std::string& configured, const std::string& next_type);

}  // namespace tandem
