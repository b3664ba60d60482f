// A model's layers as rows of a profile (names, types, FLOPs), and the layer hook that records
// which library primitive or kernel ran each layer's passes (--log-placement, --per-layer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/trainer.h"

namespace tandem {

// One row per layer of a profile at batch n: names, types, FLOPs; no times or ops yet. The row
// of a layer with a fused relu names both ("bn1+relu_1", "batchnorm+relu") and counts both.
std::vector<LayerProfile> layer_rows(const Graph& graph, int64_t n);
// The rows without those of fused relus (which do not run: their producer's row has them), once
// the hooks, which index rows by layer, are done.
std::vector<LayerProfile> without_fused(const Graph& graph, std::vector<LayerProfile> rows);

// A layer hook that puts each layer pass's traced placement lines into `rows` (each once);
// `trace` is its scratch list, alive as long as the hook.
Graph::LayerHook trace_layers(Backend& backend, std::vector<LayerProfile>& rows,
                              std::vector<std::string>& trace);

}  // namespace tandem
