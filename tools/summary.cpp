// trainer summary: the model table a run starts with, without data or training (Keras'
// model.summary()): layers, shapes, parameters (trainable and not), FLOPs, and the memory a
// training batch's activations take; --json for scripts.
#include <fmt/format.h>

#include <string>

#include "engine/backend_registry.h"
#include "engine/graph.h"
#include "engine/json_text.h"
#include "engine/precision.h"
#include "engine/progress.h"
#include "tools/app.h"
#include "tools/runner.h"

namespace tandem {

int run_summary(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  const std::string asked = config.precision;
  // The graph is allocated on the CPU for a training batch (allocated, not touched: no memory is
  // used for it): the activations take what it allocates beyond the parameters, their gradients
  // and the running statistics: each layer's output and its gradient, in the precision's types
  // (fp32's where this CPU has no kernels for the config's).
  auto backend = create_backend("cpu", BackendOptions{});
  std::string why;
  if (!backend->supports_dtype(activation_dtype(parse_precision(config.precision)), &why))
    config.precision = "fp32";
  const std::string& measured = config.precision;
  Graph graph(config);
  const int64_t batch = config.train.batch_size;
  const size_t before = backend->peak_memory_bytes();
  graph.allocate(*backend, batch, config.train.seed);
  const std::vector<SummaryRow> rows = graph.summary();
  int64_t fixed = 0;
  for (const SummaryRow& row : rows) fixed += row.buffers;
  const int64_t bytes = static_cast<int64_t>(backend->peak_memory_bytes() - before) -
                        static_cast<int64_t>(sizeof(float)) * (2 * graph.parameter_count() + fixed);
  if (r.json) {
    std::string layers;
    for (const SummaryRow& row : rows)
      layers += fmt::format(
          "{}{{\"name\": {}, \"type\": {}, \"output\": {}, \"params\": {}, "
          "\"flops\": {}, \"frozen\": {}, \"lr_multiplier\": {}}}",
          layers.empty() ? "" : ", ", json_string(row.name), json_string(row.type),
          json_string(row.output.str()), row.params, row.flops, row.frozen ? "true" : "false",
          row.lr_mult);
    const int64_t frozen = graph.frozen_parameter_count();
    fmt::print(
        "{{\"name\": {}, \"input\": {}, \"layers\": [{}], \"trainable_params\": {}, "
        "\"frozen_params\": {}, \"non_trainable_params\": {}, \"flops_per_sample\": {}, "
        "\"batch_size\": {}, \"precision\": {}, \"activation_bytes\": {}}}\n",
        json_string(config.name), json_string(graph.input_shape().str()), layers,
        graph.parameter_count() - frozen, frozen, fixed, graph.forward_flops(), batch,
        json_string(measured), bytes);
    return 0;
  }
  fmt::print("Model {} ({})\n{}{}", config.name, config.file, model_table(graph),
             parameter_line(graph));
  fmt::print(
      "Activations {} for a training batch of {} ({}: each layer's output and its "
      "gradient)\n",
      format_bytes(static_cast<uint64_t>(bytes)), batch,
      measured == asked ? measured : measured + ", this CPU having no " + asked + " kernels");
  return 0;
}

}  // namespace tandem
