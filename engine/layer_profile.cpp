// Layer profile rows and the placement-tracing hook (layer_profile.h).
#include "engine/layer_profile.h"

#include <algorithm>

namespace tandem {

// One row per layer of a profile at batch n: names, types, FLOPs; no times or ops yet.
std::vector<LayerProfile> layer_rows(const Graph& graph, int64_t n) {
  std::vector<LayerProfile> rows;
  const int64_t act = static_cast<int64_t>(dtype_size(activation_dtype(graph.precision())));
  for (const auto& layer : graph.layers()) {
    int64_t params = 0;
    for (const Param& p : layer->params()) params += p.shape.numel();
    const int64_t values = layer->input_shape().numel() + layer->output_shape().numel();
    rows.push_back({layer->name(),
                    layer->type(),
                    layer->flops() * n,
                    values * n * act + params * 4,
                    0,
                    0,
                    {},
                    {}});
  }
  // A fused relu is the row of the layer that computes it: both names in the model's order, the
  // second without the block scope they share ("layer1.0.bn1+relu_1", "relu_2+maxpool_1"), both
  // FLOPs, that layer's traffic.
  for (size_t i = 0; i < rows.size(); ++i)
    if (const int p = graph.fused_into(i); p >= 0) {
      LayerProfile& into = rows[static_cast<size_t>(p)];
      const bool after = static_cast<size_t>(p) < i;  // the relu comes after its layer
      const std::string& first = after ? into.name : rows[i].name;
      const std::string& second = after ? rows[i].name : into.name;
      const size_t scope = first.rfind('.') + 1;  // 0 without a scope
      const bool shared = scope > 0 && second.compare(0, scope, first, 0, scope) == 0;
      const std::string name = first + "+" + second.substr(shared ? scope : 0);
      into.type = after ? into.type + "+" + rows[i].type : rows[i].type + "+" + into.type;
      into.name = name;
      into.flops += rows[i].flops;
    }
  return rows;
}

std::vector<LayerProfile> without_fused(const Graph& graph, std::vector<LayerProfile> rows) {
  std::vector<LayerProfile> out;
  for (size_t i = 0; i < rows.size(); ++i)
    if (graph.fused_into(i) < 0) out.push_back(std::move(rows[i]));
  return out;
}

// A layer hook that puts each layer pass's traced placement lines into `rows` (each once).
Graph::LayerHook trace_layers(Backend& backend, std::vector<LayerProfile>& rows,
                              std::vector<std::string>& trace) {
  return [&](size_t layer, bool backward, bool done) {
    if (!done) {
      backend.trace_placement(&trace);
      return;
    }
    backend.trace_placement(nullptr);
    std::vector<std::string>& ops = backward ? rows[layer].backward_ops : rows[layer].forward_ops;
    for (std::string& line : trace)
      if (std::find(ops.begin(), ops.end(), line) == ops.end()) ops.push_back(std::move(line));
    trace.clear();
  };
}

}  // namespace tandem
