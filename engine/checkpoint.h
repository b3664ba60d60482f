// Checkpoints: parameters, optimizer state and the run's position in one .safetensors file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/atomic_file.h"
#include "engine/epoch_stats.h"
#include "engine/tensor.h"

namespace tandem {

class Graph;
class Optimizer;

struct CheckpointMeta {
  std::string config_text;  // the config file as it was trained
  std::string config_file;  // its absolute path then (relative data paths resolve from there)
  std::string device;       // the device label that wrote it ("cpu", "gpu:1")
  std::string version;      // TANDEM_VERSION of the writer
  int64_t epoch = 0;        // epochs completed
  int64_t batch = 0;        // batches done of the next epoch (a run stopped mid-epoch); else 0
  uint64_t step = 0;        // training steps done
  // Optimizer updates done: fewer than `step` where steps were skipped (on_nan: skip_step).
  // save_checkpoint records the optimizer's; absent from older checkpoints: read as `step`.
  uint64_t updates = 0;
  uint64_t seed = 0;
  // data.normalize as trained (computed ones with normalize: auto); empty: none recorded.
  std::vector<float> normalize_mean, normalize_std;
  std::vector<std::string> class_names;  // the train split's, by label; empty: not recorded
  int64_t batch_size = 0;                // the run's batch size; 0: not recorded
  // Data-parallel processes that trained it (each with batch_size samples a step); 1: one.
  int64_t processes = 1;
  // The run's best epoch so far by train.checkpoint.best, so that a resumed run compares with it.
  std::string best_metric;  // empty: none
  double best_value = 0;
  int64_t best_epoch = 0;  // 0: none yet
  // The figures of the epochs completed (1 to `epoch`), so that a resumed run's metrics file and
  // plot show the whole run; empty in checkpoints of older versions.
  std::vector<EpochStats> history;
  // The precision it trained in (engine/precision.h): its tensors are fp32 whatever it is, so a
  // checkpoint of any precision evaluates and resumes in any other. Older checkpoints: fp32.
  std::string precision = "fp32";
  // fp16's dynamic loss scale and the applied steps since it last changed (engine/loss_scaling.h),
  // so that a resumed run goes on with them; 0: none (every other precision).
  double loss_scale = 0;
  int64_t good_steps = 0;
};

// Tensors by name ("conv2d_1.weight", "optimizer.conv2d_1.weight.velocity"); handles share the
// storage, so reading into them fills the graph's and the optimizer's own tensors.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Every parameter of the graph, its buffers (running statistics), then every optimizer state
// tensor.
NamedTensors checkpoint_tensors(Graph& graph, const Optimizer& optimizer);

// Writes the tensors (downloaded from their backends) and the metadata atomically: a temporary
// file of this process's own in the same folder, synced, then renamed over `path`, so that `path`
// always holds one writer's complete file, whatever other runs, crashes or a full disk do.
void write_checkpoint(const std::string& path, const NamedTensors& tensors,
                      const CheckpointMeta& meta);

// remove_stale_temporaries (engine/atomic_file.h) clears what dead writers left; write_checkpoint
// writes through replace_file, which calls it.

// Reads and checks a checkpoint's header only (no tensors): throws CheckpointError.
CheckpointMeta read_checkpoint_meta(const std::string& path);

// The names of the tensors it holds, in file order (checks the header as read_checkpoint_meta).
std::vector<std::string> checkpoint_tensor_names(const std::string& path);

// Checks everything first (file size, header, names, shapes, dtypes, engine major version), then
// uploads each tensor into its match; throws CheckpointError naming what differs, and then
// leaves every tensor as it was.
CheckpointMeta read_checkpoint(const std::string& path, NamedTensors& tensors);

// A .safetensors file's tensors (name and shape, in the header's order) and metadata strings,
// its header checked as read_checkpoint checks it; any writer's file (no tandem metadata needed).
// Throws CheckpointError.
struct CheckpointContents {
  std::vector<std::pair<std::string, Shape>> tensors;
  std::map<std::string, std::string> meta;
};
CheckpointContents read_checkpoint_contents(const std::string& path);

// Loads each of `tensors` that the file holds under its name with its shape, leaving the others
// as they are (train.init); checks all of them first (non-finite values refused, as
// read_checkpoint does). Returns the names loaded.
std::vector<std::string> read_matching_tensors(const std::string& path, NamedTensors& tensors);

// Writes a run's parameters and optimizer state.
void save_checkpoint(const std::string& path, Graph& graph, const Optimizer& optimizer,
                     const CheckpointMeta& meta);
// Loads them (all or nothing) and the optimizer's step count; returns the metadata.
CheckpointMeta restore_checkpoint(const std::string& path, Graph& graph, Optimizer& optimizer);

// A run's best epoch so far (train.checkpoint.best), beside its other checkpoints.
inline constexpr const char* kBestCheckpoint = "best.safetensors";

// The newest checkpoint in a folder (highest epoch-E.safetensors / interrupted files by time; not
// the best one), else the newest in its sub-folders (a run over several devices writes one each),
// or the file itself when `path` is a file; throws CheckpointError when none.
std::string find_checkpoint(const std::string& path);

}  // namespace tandem
