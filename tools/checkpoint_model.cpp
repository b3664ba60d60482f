// Loading a checkpoint's model for eval and predict.
#include "tools/checkpoint_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "datasets/dataset.h"
#include "engine/error.h"
#include "engine/optimizer.h"
#include "tools/checkpoints.h"

namespace tandem {

namespace {

// What `make` builds from the config a checkpoint stores; a config that is refused (a damaged
// file) is told as the checkpoint's fault, naming it, with the config's own message.
template <class Make>
auto stored_config(const std::string& path, const Make& make) {
  try {
    return make();
  } catch (const ConfigError& e) {
    throw CheckpointError(
        "checkpoint '" + path + "' is unusable: the config it stores is refused: " + e.cause(),
        "the file is damaged; use another checkpoint, or give the model's "
        "config with --config");
  }
}

}  // namespace

CheckpointModel load_checkpoint_model(const RunRequest& r, const std::string& command,
                                      int64_t max_batch) {
  if (r.checkpoint.empty())
    throw UsageError(command + " needs a checkpoint",
                     "pass --checkpoint FILE (or a folder: its newest)");
  if (r.devices.size() > 1)
    throw UsageError(
        command + " runs on one device, and --device gives " + std::to_string(r.devices.size()),
        "give one, e.g. --device gpu");
  CheckpointModel m;
  m.device = parse_device(r.devices.empty() ? "cpu" : r.devices.front());
  m.path = find_checkpoint(r.checkpoint);
  m.meta = read_checkpoint_meta(m.path);
  if (!r.config_path.empty()) {
    m.config = load_config_with_overrides(r);
    check_same_model(m.path, m.meta, m.config,
                     "leave out --config: " + command +
                         " then builds the model from the config "
                         "stored in the checkpoint");
  } else {
    const std::string file =
        m.meta.config_file.empty()
            ? (std::filesystem::path(m.path).parent_path() / "config.yaml").string()
            : m.meta.config_file;
    m.config = stored_config(m.path, [&] { return parse_config(m.meta.config_text, file); });
    if (r.data) set_data_path(m.config.data, *r.data, "--data");
    if (r.batch_size) m.config.train.batch_size = *r.batch_size;
    if (r.threads) m.config.train.threads = *r.threads;
    if (r.precisions.size() == 1) m.config.precision = r.precisions[0];
  }
  if (r.precisions.size() > 1)
    throw UsageError(command + " runs in one precision, and --precision gives " +
                         std::to_string(r.precisions.size()),
                     "give one, e.g. --precision bf16");
  if (m.config.data.normalize_auto) {
    // Computed over the train split at training time: predict has no train data to redo it.
    if (m.meta.normalize_mean.empty())
      throw CheckpointError("checkpoint '" + m.path +
                                "' records no data.normalize values, but the "
                                "config asks for normalize: auto",
                            "give data.normalize: {mean: [...], std: [...]} in a --config");
    const int64_t channels = m.config.input.rank() == 3 ? m.config.input[0] : 1;
    const auto n = static_cast<int64_t>(m.meta.normalize_mean.size());
    if (n != 1 && n != channels)
      throw CheckpointError(fmt::format("checkpoint '{}' is unusable: metadata 'normalize_mean' "
                                        "has {} values for samples of {} channel{}",
                                        m.path, n, channels, channels == 1 ? "" : "s"),
                            "the file is damaged; use another checkpoint, or give "
                            "data.normalize: {mean: [...], std: [...]} in a --config");
    m.config.data.mean = m.meta.normalize_mean;
    m.config.data.std = m.meta.normalize_std;
  }
  m.graph = r.config_path.empty()
                ? stored_config(m.path, [&] { return std::make_unique<Graph>(m.config); })
                : std::make_unique<Graph>(m.config);
  // Names for the model's outputs, at most one each (predict prints them; a data set may use
  // fewer classes than the model has outputs).
  if (const auto names = static_cast<int64_t>(m.meta.class_names.size());
      names > m.graph->classes())
    throw CheckpointError(fmt::format("checkpoint '{}' is unusable: metadata 'class_names' has {} "
                                      "names for the model's {} classes",
                                      m.path, names, m.graph->classes()),
                          "the file is damaged; use another checkpoint");
  // A damaged checkpoint's stored config can describe any model: one whose parameters the file
  // cannot hold is not this file's model, and is refused before memory is allocated for it.
  std::error_code ec;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(m.path, ec));
  if (!ec && m.graph->parameter_count() > file_bytes / 4)
    throw CheckpointError(fmt::format("checkpoint '{}' is unusable: the model its config "
                                      "describes has {} parameters, more than its {} bytes hold",
                                      m.path, m.graph->parameter_count(), file_bytes),
                          "the file is damaged or cut short; use another checkpoint");
  m.backend = create_backend(m.device.backend, backend_options(m.config, m.device));
  m.graph->allocate(*m.backend, max_batch > 0 ? max_batch : m.config.train.batch_size,
                    m.config.train.seed);
  // A run's checkpoint holds the optimizer state too: load it into a throwaway optimizer, so
  // that the check of every tensor's name and shape stays the one the trainer's resume uses.
  // trainer import's holds the model's tensors only.
  Optimizer optimizer(m.config.train.optimizer, m.graph->params(), *m.backend);
  const std::vector<std::string> names = checkpoint_tensor_names(m.path);
  if (std::any_of(names.begin(), names.end(),
                  [](const std::string& n) { return n.starts_with("optimizer."); })) {
    restore_checkpoint(m.path, *m.graph, optimizer);
  } else {
    NamedTensors model;
    for (Param* p : m.graph->params()) model.emplace_back(p->name, p->value);
    for (auto& b : m.graph->buffers()) model.push_back(std::move(b));
    read_checkpoint(m.path, model);
  }
  return m;
}

std::vector<float> predict_logits(CheckpointModel& m, const std::vector<uint8_t>& samples,
                                  std::vector<float>* inputs) {
  Graph& graph = *m.graph;
  const Shape& shape = graph.input_shape();
  const int64_t numel = shape.numel(), classes = graph.classes();
  const int64_t n = static_cast<int64_t>(samples.size()) / numel;
  TANDEM_CHECK(n * numel == static_cast<int64_t>(samples.size()), "samples of " + shape.str());
  Dataset data;
  data.name = "images";
  data.sample_shape = shape;
  data.classes = static_cast<int>(classes);
  data.images = samples;
  data.labels.assign(static_cast<size_t>(n), 0);
  const int64_t batch = std::min(n, graph.max_batch());
  Batcher src(data, std::max<int64_t>(batch, 1), false, 0, m.config.data.mean, m.config.data.std);
  src.start_epoch(0);
  std::vector<float> x(static_cast<size_t>(n * numel)), logits(static_cast<size_t>(n * classes));
  std::vector<int32_t> unused(static_cast<size_t>(batch));
  Context ctx{*m.backend, false, m.config.train.seed, 0};
  for (int64_t k = 0; k * batch < n; ++k) {
    float* xk = x.data() + k * batch * numel;
    const int64_t b = src.fill(k, xk, unused.data());
    Tensor input = graph.input().prefix(b);
    m.backend->upload(input, xk);
    m.backend->download(logits.data() + k * batch * classes, graph.forward(ctx, b));
  }
  if (inputs) *inputs = std::move(x);
  return logits;
}

}  // namespace tandem
