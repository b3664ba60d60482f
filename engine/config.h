// The run's configuration: a YAML model file read under strict rules, then command-line overrides.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tandem {

// A YAML mapping read strictly: every key read is recorded, finish() rejects any other key, and
// every error names the file, the 1-based line and column, the context and what was expected.
class ConfigMap {
 public:
  ConfigMap() = default;
  // context: "layer 3 (conv2d)", "train.optimizer", ...; node must be a mapping (or null: empty).
  ConfigMap(YAML::Node node, std::string file, std::string context);

  bool has(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback);
  int64_t require_int(const std::string& key);
  double get_double(const std::string& key, double fallback);
  double require_double(const std::string& key);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::string require_string(const std::string& key);
  // A value that must be one of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices);
  // An int or a list of ints of length n ([h, w] pairs): "kernel: 3" == "kernel: [3, 3]".
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> fallback,
                                size_t n = 0);
  std::vector<double> get_doubles(const std::string& key, std::vector<double> fallback);
  ConfigMap map(const std::string& key);    // a nested mapping (empty when absent)
  YAML::Node node(const std::string& key);  // raw access, marks the key as read

  // Rejects keys that were never read: "unknown key 'filter' ...; expected one of: ...".
  void finish() const;
  // Throws ConfigError at the key's position (or the mapping's, when key is empty); an empty hint
  // points at the config format in README.md.
  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         const std::string& hint = "") const;
  // Throws "missing required key 'kernel'<what>" unless the key is there, naming a key of this
  // mapping that misspells it ("kernal", "kernel 3").
  void require(const std::string& key, const std::string& what) const;
  // The key here that most likely misspells `key`, or "".
  std::string misspelling_of(const std::string& key) const;
  std::string where(const std::string& key = "") const;  // "file:line:col: context"
  const std::string& file() const { return file_; }
  const std::string& context() const { return context_; }

 private:
  YAML::Node lookup(const std::string& key) const;
  YAML::Node node_;
  std::string file_, context_;
  mutable std::set<std::string> read_;
};

struct LayerSpec {
  std::string type;   // "conv2d"
  int index = 0;      // 0-based position
  std::string where;  // "file:line:col" of the list item
  ConfigMap args;     // the layer's keys (empty for "- relu")
  // Branching models: the item's own `name:` (empty: the layer is called type_k, the k-th of its
  // type) and `inputs:`, the names of the earlier layers (or `input`, the model's input) it takes;
  // empty: the layer before it. `inputs_where` is the position of the `inputs:` value.
  std::string name;
  std::vector<std::string> inputs;
  std::string inputs_where;
  // Frozen: its parameters keep their values (no weight gradient, no optimizer state), and a
  // batch normalization normalizes with its running statistics and leaves them as they are. Set
  // by `trainable: false` beside the layer type or on the block use it comes from, and by
  // train.freeze. `frozen_where` is where that names this layer itself ("FILE:LINE:COL"; empty
  // where a block use or up_to covers it): a layer without parameters named there is refused.
  bool frozen = false;
  std::string frozen_where;
  // train.optimizer.lr_multipliers: its parameters are updated with lr times this (Caffe's
  // lr_mult); `lr_mult_where` as frozen_where.
  double lr_mult = 1;
  std::string lr_mult_where;
};

// Each layer's name as the graph calls it: its `name:`, else type_k for the k-th unnamed layer of
// its type (so that a model of named relus and one unnamed has relu_1, not relu_3).
std::vector<std::string> layer_names(const std::vector<LayerSpec>& layers);

// Training-set augmentation, drawn from the engine's RNG (seed, epoch, position): reproducible
// and the same on every device.
struct AugmentConfig {
  int crop_padding = 0;  // random crop of the input size from the image padded by this (0: off)
  bool flip = false;     // horizontal flip with probability 1/2
  bool any() const { return crop_padding > 0 || flip; }
};

struct DataConfig {
  std::string format = "synthetic";   // mnist | cifar10 | image_folder | synthetic
  std::string train_path, test_path;  // resolved folders (mnist, cifar10, image_folder)
  std::string train_from, test_from;  // where each was given, for messages: "data.path in FILE"
  std::vector<float> mean, std;       // per channel, on [0,1] pixel values; empty: 0 and 1
  AugmentConfig augment;              // training split only
  Shape shape;                        // synthetic: sample shape (defaults to the model input)
  int classes = 10;                   // synthetic
  int64_t train_size = 1024, test_size = 256;  // synthetic
  uint64_t seed = 0;                           // synthetic
  bool resize = true;                          // image_folder: resize images to the model's input
  bool skip_bad = false;                       // image_folder: leave out images that do not decode
  int workers = -1;                            // background threads cutting batches; -1: auto
  int64_t cache_mb = 4096;      // decoded samples above this size are decoded on the fly
  std::string where;            // "file:line:col" of the data section, for messages
  bool normalize_auto = false;  // normalize: auto: mean and std computed over the train split
  double val_split = 0;         // share of the train split held out for validation
  // image_folder of one folder of class sub-folders: the share of it held out as the test split
  // (stratified, drawn from data.seed)
  double test_split = 0;
  // data.path as written (or --data's folder), and where: "FILE:LINE:COL" in the config, empty
  // for --data; for the message that lists the places a missing folder was looked for.
  std::string path_given, path_at;
};

struct OptimizerConfig {
  std::string type = "sgd";  // sgd | adam | adamw
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // lr_multipliers as written, NAME -> factor (each layer's is LayerSpec::lr_mult), for the
  // start-up summary.
  std::vector<std::pair<std::string, double>> lr_multipliers;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | multistep | cosine | plateau
  int64_t step = 1;               // step: epochs between decays
  double gamma = 0.1;
  std::vector<int64_t> milestones;  // multistep: epochs
  double min_lr = 0.0;              // cosine
  int64_t warmup_epochs = 0;        // linear warm-up from lr/warmup to lr, any type
  // plateau: the rate times `factor` after `patience` epochs in which `metric` did not improve
  // by more than `min_delta` (engine/run_control.h)
  double factor = 0.1;
  int64_t patience = 5;
  std::string metric;  // an epoch metric (engine/epoch_metric.h)
  double min_delta = 0;
};

// train.early_stopping: the run ends after `patience` epochs in which `metric` did not improve
// by more than `min_delta`.
struct EarlyStoppingConfig {
  std::string metric;  // an epoch metric; empty: off
  int64_t patience = 5;
  double min_delta = 0;
  bool enabled() const { return !metric.empty(); }
};

struct CheckpointConfig {
  std::string dir;    // empty: no checkpoints every few epochs (Ctrl-C still writes one)
  int64_t every = 1;  // epochs between checkpoints
  int64_t keep = 0;   // the newest kept in dir; 0: all
  std::string best;   // an epoch metric (engine/epoch_metric.h) for dir/best.safetensors, or none
  // The finished run's model, written after its last epoch (into dir, else runs/<config name>/),
  // so that eval, predict and export have it; false: not (only dir's checkpoints are written).
  bool final = true;
};

struct TrainConfig {
  int64_t epochs = 1, batch_size = 64;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  uint64_t seed = 0;
  int threads = 0;  // 0: every core
  bool shuffle = true;
  bool drop_last = false;
  CheckpointConfig checkpoint;
  std::string on_nan = "stop";  // stop | skip_step: what a non-finite step does
  EarlyStoppingConfig early_stopping;
  double clip_grad_norm = 0;  // the gradients' global L2 norm is scaled down to this; 0: off
  // train.init (or --init): a checkpoint whose tensors of matching name and shape are the run's
  // starting weights (relative paths resolved from the config's folder, as data paths); empty:
  // the weights are drawn from the seed. `init_from` says where it was given, for messages:
  // "FILE:LINE:COL: train.init" or "--init".
  std::string init, init_from;
};

struct Config {
  std::string file;  // the config file as given
  std::string name;
  Shape input;  // sample shape (C,H,W) or (features)
  std::vector<LayerSpec> layers;
  std::string loss = "softmax_cross_entropy";  // softmax_cross_entropy | mse
  // softmax_cross_entropy's target: (1 - e) one-hot + e / classes (loss: {softmax_cross_entropy:
  // {label_smoothing: e}}); 0: one-hot.
  double label_smoothing = 0;
  DataConfig data;
  TrainConfig train;
  bool deterministic = false;
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp16 (engine/precision.h)
  int64_t gpu_workspace_mb = 256;
  // How cuDNN's convolution algorithms are chosen: find (timed once per shape), heuristic, or
  // auto: find, unless deterministic (a timed choice can differ from run to run).
  std::string gpu_conv_algo = "auto";
  // The CPU's fp32 3x3 stride-1 convolutions: auto (oneDNN's Winograd kernel where it has one for
  // the shape, its direct kernels elsewhere) or direct (direct kernels only).
  std::string cpu_conv_algo = "auto";
};

// The one of `known` that `typed` most likely misspells (a letter or so apart, another case, a
// prefix, a common synonym such as learning_rate for lr), or "".
std::string closest_name(const std::string& typed, const std::vector<std::string>& known);
// The same, with each of `known` that another framework's name stands for (Caffe's Pooling:
// maxpool and avgpool); a synonym wins over a name a few letters apart. Empty: none is near.
std::vector<std::string> closest_names(const std::string& typed,
                                       const std::vector<std::string>& known);
// "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string quoted_list(const std::vector<std::string>& names);
// "; did you mean 'a'?", "; did you mean 'a' or 'b'?"; "" for no names (or an empty name).
std::string did_you_mean(const std::vector<std::string>& names);
std::string did_you_mean(const std::string& name);

// Points both splits at `folder` (data.path, --data): for image_folder at its train/ and test/
// sub-folders, for the other formats at the folder itself. `from` says where it was given
// ("data.path in FILE", "--data"). A config of synthetic data takes the format of the data set
// the folder holds (CIFAR-10 or MNIST files, train/ and test/ image folders); throws DataError
// when it holds none of them.
void set_data_path(DataConfig& data, const std::string& folder, const std::string& from);

// train.early_stopping, train.clip_grad_norm and the plateau schedule's keys
// (engine/config_controls.cpp); `c` holds the data section already.
void parse_training_controls(ConfigMap& train, Config& c);
void parse_plateau_schedule(ConfigMap& schedule, Config& c);
// train.init and train.freeze, and train.optimizer.lr_multipliers (engine/config_transfer.cpp):
// the starting checkpoint, and each layer's LayerSpec::frozen and lr_mult; `c` holds the layers.
void parse_transfer(ConfigMap& train, Config& c);
void parse_lr_multipliers(ConfigMap& optimizer, Config& c);

// An unknown key that belongs elsewhere (engine/config_hints.cpp): `seed` at the top level
// belongs under train:, `activation` in a layer is a layer of its own. Empty: no such hint.
struct KeyHint {
  std::string cause, hint;
};
KeyHint misplaced_key_hint(const std::string& context, const std::string& key,
                           const YAML::Node& value);
// The fix for a layer given a value instead of its options: "dense: 64" -> "dense: {units: 64}".
std::string layer_value_hint(const std::string& type, const YAML::Node& value);

// Reads and validates a config file; throws ConfigError ("file:line:col: ...") on any problem.
Config load_config(const std::string& path);
// The same from YAML text (tests); `file` names it in messages and anchors relative paths.
Config parse_config(const std::string& text, const std::string& file);

}  // namespace tandem
