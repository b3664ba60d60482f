// Loading a checkpoint's model for eval and predict.
#include "tools/checkpoint_model.h"

#include <filesystem>
#include <string>

#include "engine/error.h"
#include "engine/optimizer.h"
#include "tools/checkpoints.h"

namespace tandem {

CheckpointModel load_checkpoint_model(const RunRequest& r, const std::string& command,
                                      int64_t max_batch) {
  if (r.checkpoint.empty())
    throw UsageError(command + " needs a checkpoint", "pass --checkpoint FILE (or a folder: its newest)");
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
    m.config = parse_config(m.meta.config_text, file);
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
      throw CheckpointError("checkpoint '" + m.path + "' records no data.normalize values, but the "
                                "config asks for normalize: auto",
                            "give data.normalize: {mean: [...], std: [...]} in a --config");
    m.config.data.mean = m.meta.normalize_mean;
    m.config.data.std = m.meta.normalize_std;
  }
  m.graph = std::make_unique<Graph>(m.config);
  m.backend = create_backend(m.device.backend, backend_options(m.config, m.device));
  m.graph->allocate(*m.backend, max_batch > 0 ? max_batch : m.config.train.batch_size,
                    m.config.train.seed);
  // The file holds the optimizer state too: load it into a throwaway optimizer, so that the
  // check of every tensor's name and shape stays the one the trainer's resume uses.
  Optimizer optimizer(m.config.train.optimizer, m.graph->params(), *m.backend);
  restore_checkpoint(m.path, *m.graph, optimizer);
  return m;
}

}  // namespace tandem
