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
namespace {

// What the activations of a training batch take: the bytes the graph allocates on the CPU for
// a batch of `batch` (each layer's output and its gradient, in the precision's types) beyond the
// parameters and their gradients. Allocated, not touched: no memory is used for it.
// *precision: the one measured (fp32 where this CPU has no kernels for the config's).
int64_t activation_bytes(Config config, int64_t batch, std::string* precision) {
  BackendOptions o;
  auto backend = create_backend("cpu", o);
  std::string why;
  if (!backend->supports_dtype(activation_dtype(parse_precision(config.precision)), &why))
    config.precision = "fp32";  // this CPU has no bf16: the figure is fp32's
  *precision = config.precision;
  Graph graph(config);
  const size_t before = backend->peak_memory_bytes();
  graph.allocate(*backend, batch, config.train.seed);
  const int64_t params = graph.parameter_count();
  int64_t buffers = 0;
  for (const SummaryRow& r : graph.summary()) buffers += r.buffers;
  const int64_t all = static_cast<int64_t>(backend->peak_memory_bytes() - before);
  return all - static_cast<int64_t>(sizeof(float)) * (2 * params + buffers);
}

}  // namespace

int run_summary(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  const Graph graph(config);
  const int64_t batch = config.train.batch_size;
  std::string measured;
  const int64_t bytes = activation_bytes(config, batch, &measured);
  if (r.json) {
    std::string layers;
    for (const SummaryRow& row : graph.summary())
      layers += fmt::format(
          "{}{{\"name\": {}, \"type\": {}, \"output\": {}, \"params\": {}, "
          "\"flops\": {}}}",
          layers.empty() ? "" : ", ", json_string(row.name), json_string(row.type),
          json_string(row.output.str()), row.params, row.flops);
    int64_t fixed = 0;
    for (const SummaryRow& row : graph.summary()) fixed += row.buffers;
    fmt::print(
        "{{\"name\": {}, \"input\": {}, \"layers\": [{}], \"trainable_params\": {}, "
        "\"non_trainable_params\": {}, \"flops_per_sample\": {}, \"batch_size\": {}, "
        "\"precision\": {}, \"activation_bytes\": {}}}\n",
        json_string(config.name), json_string(graph.input_shape().str()), layers,
        graph.parameter_count(), fixed, graph.forward_flops(), batch, json_string(config.precision),
        bytes);
    return 0;
  }
  fmt::print("Model {} ({})\n{}{}", config.name, config.file, model_table(graph),
             parameter_line(graph));
  fmt::print(
      "Activations {} for a training batch of {} ({}: each layer's output and its "
      "gradient)\n",
      format_bytes(static_cast<uint64_t>(bytes)), batch, config.precision);
  return 0;
}

}  // namespace tandem
