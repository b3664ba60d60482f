// The trainer's commands (train, bench, devices) as functions, so tests can run them in-process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/config.h"

namespace tandem {

// Registers every backend and layer of this build (idempotent).
void register_everything();

struct RunRequest {
  // The program and its arguments as given (empty in-process): a stopped run prints them back as
  // the command that continues it.
  std::vector<std::string> command_line;
  std::string config_path;
  std::vector<std::string> devices{"cpu"};  // "cpu", "cpu:2" (2 threads), "gpu", "gpu:1"
  // --precision: one replaces the config's; several run side by side (parse_devices pairs them
  // with the devices). Empty: the config's.
  std::vector<std::string> precisions;
  std::optional<int64_t> epochs, batch_size;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  std::optional<int> threads;
  std::optional<std::string> data;  // replaces data.path (both splits)
  std::string metrics_path;
  std::string plot_path;  // --plot FILE.png
  bool quiet = false;
  int verbose = 1;                  // 0: the result only (--quiet), 1: the bar, 2: a line per epoch
  int64_t log_every = 0;            // --log-every N: per-step figures every N steps (0: none)
  std::string tensorboard;          // --tensorboard DIR: event files, a run folder per device
  bool log_placement = false;       // what ran each layer
  std::string checkpoint_dir;       // replaces train.checkpoint.dir
  std::string resume;               // a checkpoint file, or a folder (its newest)
  std::string init;                 // replaces train.init: a checkpoint to start from
  std::string checkpoint;           // eval, predict: the checkpoint file (or folder: its newest)
  std::vector<std::string> inputs;  // predict: image files
  int top_k = 3;                    // predict
  // bench
  std::vector<int64_t> batch_sizes;  // empty: the config's (or --batch-size)
  int steps = 20, warmup = 5;
  bool json = false;
  bool per_layer = false;
  // export-images
  std::string out_dir;
  int64_t limit_per_class = 0, test_limit_per_class = 0;  // per split; 0: every sample
  // export (ONNX)
  std::string onnx_path;
  int opset = 13;
  bool softmax = false, fold_normalization = false, force = false;
  // import (ONNX): the model file is inputs[0]; out_dir the folder written
  std::string input_shape;  // "3,224,224": the sample shape an open ONNX input is given
  std::string normalize;    // "imagenet" or "MEAN,...:STD,..."
};

// A device name split: "cpu:2" -> {"cpu", 2}; "gpu" -> {"gpu", -1}.
struct DeviceSpec {
  std::string backend;
  int index = -1;         // cpu: threads; gpu: device index; -1: default
  std::string label;      // as the user wrote it ("cpu:2"), and its precision in a list of several
  std::string precision;  // the run's (--precision); empty: the config's
};
DeviceSpec parse_device(const std::string& text);

// The config with the command line's overrides applied (and checked).
Config load_config_with_overrides(const RunRequest& request);
BackendOptions backend_options(const Config& config, const DeviceSpec& device);
// data.workers, or with auto the cores the device leaves free (up to 8).
int data_workers(const Config& config, const DeviceSpec& device);

int run_train(const RunRequest& request);
int run_bench(const RunRequest& request);
int run_devices(const RunRequest& request);
int run_summary(const RunRequest& request);        // tools/summary.cpp
int run_export_images(const RunRequest& request);  // tools/export_images.cpp
int run_eval(const RunRequest& request);           // tools/eval.cpp
int run_predict(const RunRequest& request);        // tools/predict.cpp
int run_export(const RunRequest& request);         // tools/export_onnx.cpp
int run_import(const RunRequest& request);         // tools/import_onnx.cpp

}  // namespace tandem
