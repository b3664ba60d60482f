// A checkpoint's model placed on a device, for trainer eval and predict.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/graph.h"
#include "tools/app.h"

namespace tandem {

struct CheckpointModel {
  std::string path;  // the checkpoint file (the newest one when --checkpoint named a folder)
  CheckpointMeta meta;
  Config config;
  DeviceSpec device;
  std::unique_ptr<Backend> backend;  // declared before graph: the graph's tensors go first
  std::unique_ptr<Graph> graph;
};

// Reads --checkpoint: the model of --config, else the config the checkpoint was trained with
// (its relative paths resolve from where that file was, then from the working directory, and
// --data, --batch-size, --threads apply), on the first --device, with the checkpoint's weights
// (all or nothing), for batches of up to `max_batch` samples (0: the config's batch size).
CheckpointModel load_checkpoint_model(const RunRequest& request, const std::string& command,
                                      int64_t max_batch = 0);

// trainer predict's logits (n, classes) of n samples of the model's input shape (8-bit values,
// CHW, one after the other), normalized by the Batcher as the training data was, in batches of
// up to the graph's max batch. `inputs`, when given, receives what the model took: the
// normalized samples (n, input...).
std::vector<float> predict_logits(CheckpointModel& m, const std::vector<uint8_t>& samples,
                                  std::vector<float>* inputs = nullptr);

}  // namespace tandem
