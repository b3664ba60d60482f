// Strict YAML config reading: every key checked, every error placed at its file, line and column.
#include "engine/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "engine/config_yaml.h"
#include "engine/epoch_metric.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/yaml_check.h"

namespace tandem {
namespace fs = std::filesystem;

using config_detail::flow_text;
using config_detail::mark_str;
using config_detail::resolve_path;

namespace {}  // namespace

// A data folder named in the config: relative to the config file's folder first, then the
// working directory (so `path: ../datasets/x` works from anywhere).
std::string config_detail::resolve_path(const std::string& p, const std::string& config_file) {
  if (p.empty()) return p;
  fs::path path(p);
  if (path.is_absolute()) return p;
  fs::path beside = fs::path(config_file).parent_path() / path;
  if (fs::exists(beside)) return beside.lexically_normal().string();
  if (fs::exists(path)) return path.lexically_normal().string();
  return beside.lexically_normal().string();  // missing either way: the loader says so
}

namespace {

// A count kept as an int: beyond one it would wrap (4294967298 classes to 2).
int as_int(ConfigMap& m, const std::string& key, int64_t v, const std::string& hint) {
  if (v > INT32_MAX)
    m.fail(
        key,
        "expected at most " + std::to_string(INT32_MAX) + " " + key + ", got " + std::to_string(v),
        hint);
  return static_cast<int>(v);
}

// A seed is a uint64: a negative one would wrap (as --seed -1 is refused).
uint64_t seed_of(ConfigMap& m) {
  const int64_t seed = m.get_int("seed", 0);
  if (seed < 0) m.fail("seed", "expected a seed of 0 or more", "e.g. 'seed: 42'");
  return static_cast<uint64_t>(seed);
}

// input: {shape: [C, H, W]}.
void parse_input(ConfigMap& top, Config& c) {
  // A misspelt section ("inputs:", "layer:") is named, rather than reported missing.
  auto misspelt = [&](const std::string& key) {
    if (top.has(key)) return;
    const std::string typed = top.misspelling_of(key);
    if (!typed.empty())
      top.fail(typed, "unknown key; did you mean '" + key + "'?",
               "rename '" + typed + "' to '" + key + "'");
  };
  misspelt("input");
  misspelt("layers");
  // "input: [1, 28, 28]": the shape without its key.
  if (const YAML::Node given = top.node("input"); given.IsSequence())
    top.fail("input", "expected {shape: [C, H, W]}, got the list " + flow_text(given),
             "give the shape its key: write 'input: {shape: " + flow_text(given) + "}'");
  ConfigMap input = top.map("input");
  if (!top.has("input"))
    top.fail("", "missing 'input: {shape: [C, H, W]}'", "add e.g. 'input: {shape: [1, 28, 28]}'");
  std::vector<int64_t> shape = input.get_ints("shape", {});
  if (shape.empty()) input.fail("shape", "expected the sample shape, e.g. [1, 28, 28]");
  for (int64_t d : shape)
    if (d <= 0) input.fail("shape", "every dimension must be positive");
  c.input = Shape(shape);
  input.finish();
}

// data: the format, where its files are, the splits, normalisation and augmentation.
void parse_data(ConfigMap& top, Config& c, const std::string& file) {
  ConfigMap data = top.map("data");
  c.data.where = data.where();
  c.data.format =
      data.get_choice("format", "synthetic", {"mnist", "cifar10", "image_folder", "synthetic"});
  DataConfig folders;
  folders.format = c.data.format;
  set_data_path(folders, resolve_path(data.get_string("path", ""), file), "data.path in " + file);
  if (const YAML::Node given = data.node("path"); given && given.IsScalar())
    c.data.path_given = given.Scalar(), c.data.path_at = file + ":" + mark_str(given.Mark());
  c.data.train_path = resolve_path(data.get_string("train", ""), file);
  c.data.test_path = resolve_path(data.get_string("test", ""), file);
  c.data.train_from = "data.train in " + file;
  c.data.test_from = "data.test in " + file;
  if (c.data.train_path.empty())
    c.data.train_path = folders.train_path, c.data.train_from = folders.train_from;
  if (c.data.test_path.empty())
    c.data.test_path = folders.test_path, c.data.test_from = folders.test_from;
  // Without a folder here, --data gives one (loading the data says so when it does not).
  c.data.test_split = data.get_double("test_split", 0);
  if (!(c.data.test_split >= 0 && c.data.test_split < 1))
    data.fail("test_split", "expected a share in [0, 1) of the image folder, e.g. 0.2");
  if (data.has("test_split") && c.data.format != "image_folder")
    data.fail("test_split", "applies to format image_folder only, not " + c.data.format,
              "this format has a test split of its own");
  if (c.data.format == "image_folder" && !c.data.train_path.empty() && c.data.test_path.empty() &&
      c.data.test_split == 0)
    data.fail("",
              "format image_folder needs a test split: data.test, data.path holding train/ "
              "and test/, or data.test_split to hold one out of one folder of classes",
              "e.g. 'test_split: 0.2' holds out a fifth of each class as the test split");
  for (const char* key : {"resize", "skip_bad"})
    if (data.has(key) && c.data.format != "image_folder")
      data.fail(key, "applies to format image_folder only, not " + c.data.format);
  c.data.resize = data.get_bool("resize", true);
  c.data.skip_bad = data.get_bool("skip_bad", false);
  if (data.has("workers") && data.get_string("workers", "") != "auto") {
    c.data.workers = data.get_int("workers", 0);
    if (c.data.workers < 0 || c.data.workers > 64)
      data.fail("workers",
                "expected auto, or 0 (batches cut in the training thread) to 64 threads");
  }
  c.data.cache_mb = data.get_int("cache_mb", 4096);
  if (c.data.cache_mb < 0)
    data.fail("cache_mb", "expected a size in MiB, 0 (decode every sample on the fly) or more");
  if (YAML::Node auto_node = data.node("normalize"); auto_node && auto_node.IsScalar()) {
    if (auto_node.Scalar() != "auto")
      data.fail("normalize",
                "expected auto or {mean: [...], std: [...]}, not '" + auto_node.Scalar() + "'");
    c.data.normalize_auto = true;
  } else {
    ConfigMap norm = data.map("normalize");
    for (double m : norm.get_doubles("mean", {})) {
      if (!std::isfinite(static_cast<float>(m)))
        norm.fail("mean", "every mean must be a finite number", "e.g. 'mean: [0.1307]'");
      c.data.mean.push_back(static_cast<float>(m));
    }
    for (double s : norm.get_doubles("std", {})) {
      if (!(s > 0)) norm.fail("std", "every std must be positive");
      if (!std::isfinite(static_cast<float>(s)))
        norm.fail("std", "every std must be a finite number", "e.g. 'std: [0.3081]'");
      c.data.std.push_back(static_cast<float>(s));
    }
    norm.finish();
  }
  ConfigMap aug = data.map("augment");
  const int64_t pad = aug.get_int("crop_padding", 0);
  if (pad < 0) aug.fail("crop_padding", "expected 0 (off) or a positive number of pixels");
  if (pad > 0 && c.input.rank() != 3)
    aug.fail("crop_padding",
             "a random crop needs image input of shape [C, H, W], not " + c.input.str());
  if (pad > 0 && (pad >= c.input[1] || pad >= c.input[2]))
    aug.fail("crop_padding",
             "expected less than the image height and width (" + c.input.str() + ")");
  c.data.augment.crop_padding = static_cast<int>(pad);
  c.data.augment.flip = aug.get_bool("flip", false);
  if (c.data.augment.flip && c.input.rank() != 3)
    aug.fail("flip",
             "a horizontal flip needs image input of shape [C, H, W], not " + c.input.str());
  aug.finish();
  std::vector<int64_t> dshape = data.get_ints("shape", {});
  for (int64_t d : dshape)
    if (d <= 0)
      data.fail("shape", "every dimension must be positive, got " + Shape(dshape).str(),
                "give the samples' [C, H, W], or leave data.shape out to take the model's input");
  c.data.shape = dshape.empty() ? c.input : Shape(dshape);
  const int64_t classes = data.get_int("classes", 10);
  if (classes < 2) data.fail("classes", "expected at least 2 classes");
  c.data.classes =
      as_int(data, "classes", classes, "give the model's number of outputs, e.g. 'classes: 10'");
  c.data.train_size = data.get_int("train_size", 1024);
  c.data.test_size = data.get_int("test_size", 256);
  if (c.data.train_size <= 0) data.fail("train_size", "expected a positive number of samples");
  if (c.data.test_size <= 0)
    data.fail("test_size", "expected a positive number of samples",
              "the test split is evaluated after every epoch: give it at least one sample");
  c.data.seed = seed_of(data);
  c.data.val_split = data.get_double("val_split", 0);
  if (!(c.data.val_split >= 0 && c.data.val_split < 1))
    data.fail("val_split", "expected a share in [0, 1) of the train split, e.g. 0.1");
  data.finish();
}

// train.optimizer: sgd, adam or adamw and their settings.
void parse_optimizer(ConfigMap& train, Config& c) {
  ConfigMap opt = train.map("optimizer");
  OptimizerConfig& o = c.train.optimizer;
  o.type = opt.get_choice("type", "sgd", {"sgd", "adam", "adamw"});
  o.lr = opt.get_double("lr", o.type == "sgd" ? 0.01 : 1e-3);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) opt.fail("lr", "expected a positive learning rate");
  o.weight_decay = opt.get_double("weight_decay", o.type == "adamw" ? 0.01 : 0.0);
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    opt.fail("weight_decay", "expected zero or a positive finite decay",
             "e.g. 'weight_decay: 5.0e-4'");
  if (o.type == "sgd") {
    o.momentum = opt.get_double("momentum", 0.0);
    if (!(o.momentum >= 0 && o.momentum < 1))
      opt.fail("momentum", "expected a value in [0, 1)", "e.g. 'momentum: 0.9'");
    o.nesterov = opt.get_bool("nesterov", false);
    if (o.nesterov && o.momentum == 0) opt.fail("nesterov", "Nesterov momentum needs momentum > 0");
  } else {
    o.beta1 = opt.get_double("beta1", 0.9);
    o.beta2 = opt.get_double("beta2", 0.999);
    o.eps = opt.get_double("eps", 1e-8);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
      opt.fail("beta1", "expected a value in [0, 1)", "e.g. 'beta1: 0.9'");
    if (!(o.beta2 >= 0 && o.beta2 < 1))
      opt.fail("beta2", "expected a value in [0, 1)", "e.g. 'beta2: 0.999'");
    if (!(o.eps > 0) || !std::isfinite(o.eps))
      opt.fail("eps", "expected a positive finite epsilon", "e.g. 'eps: 1.0e-8'");
  }
  parse_lr_multipliers(opt, c);
  opt.finish();
}

// train.schedule: the learning rate over the epochs.
void parse_schedule(ConfigMap& train, Config& c) {
  ConfigMap sched = train.map("schedule");
  ScheduleConfig& s = c.train.schedule;
  s.type =
      sched.get_choice("type", "constant", {"constant", "step", "multistep", "cosine", "plateau"});
  if (s.type == "plateau") parse_plateau_schedule(sched, c);
  if (s.type == "step") {
    s.step = sched.get_int("step", 1);
    if (s.step < 1) sched.fail("step", "expected at least 1 epoch between decays");
  }
  if (s.type == "step" || s.type == "multistep") {
    s.gamma = sched.get_double("gamma", 0.1);
    if (!(s.gamma > 0) || !std::isfinite(s.gamma))
      sched.fail("gamma", "expected a positive finite factor", "e.g. 'gamma: 0.1'");
  }
  if (s.type == "multistep") {
    s.milestones = sched.get_ints("milestones", {});
    if (s.milestones.empty()) sched.fail("milestones", "expected a list of epochs, e.g. [3, 6]");
    // A milestone m drops the rate after m epochs: 0 or less would only start lower.
    for (int64_t m : s.milestones)
      if (m < 1)
        sched.fail("milestones", "expected epochs of 1 or more, got " + std::to_string(m),
                   "e.g. 'milestones: [3, 6]' drops the rate after epochs 3 and 6; to start "
                   "lower, lower lr");
  }
  if (s.type == "cosine") {
    s.min_lr = sched.get_double("min_lr", 0.0);
    if (!(s.min_lr >= 0) || !std::isfinite(s.min_lr))
      sched.fail("min_lr", "expected zero or a positive finite learning rate",
                 "e.g. 'min_lr: 0' (the learning rate the cosine ends at)");
  }
  s.warmup_epochs = sched.get_int("warmup_epochs", 0);
  if (s.warmup_epochs < 0) sched.fail("warmup_epochs", "expected zero or more epochs");
  sched.finish();
}

// train.checkpoint: where and how often the run saves itself, and the metric of `best`.
void parse_checkpoint(ConfigMap& train, Config& c) {
  // The folder is an output, so it is relative to the working directory (like --metrics).
  ConfigMap ckpt = train.map("checkpoint");
  CheckpointConfig& k = c.train.checkpoint;
  k.dir = ckpt.get_string("dir", "");
  k.every = ckpt.get_int("every", 1);
  if (k.every < 1) ckpt.fail("every", "expected at least 1 epoch between checkpoints");
  k.keep = ckpt.get_int("keep", 0);
  if (k.keep < 0) ckpt.fail("keep", "expected 0 (keep all) or more checkpoints");
  k.best = ckpt.get_string("best", "");
  k.final = ckpt.get_bool("final", true);
  if (!k.best.empty() && !find_epoch_metric(k.best)) {
    std::vector<std::string> names;
    for (const EpochMetric& m : epoch_metrics()) names.push_back(m.name);
    ckpt.fail("best", "unknown metric '" + k.best + "'" +
                          did_you_mean(closest_names(k.best, names)) +
                          "; expected one of: " + epoch_metric_names());
  }
  if (k.best.rfind("val_", 0) == 0 && c.data.val_split == 0)
    ckpt.fail("best", k.best + " needs a validation split: set data.val_split, e.g. 0.1");
  ckpt.finish();
}

// train: epochs, batches, seeds, the optimizer, its schedule, checkpoints and controls.
void parse_train(ConfigMap& top, Config& c) {
  ConfigMap train = top.map("train");
  c.train.epochs = train.get_int("epochs", 1);
  if (c.train.epochs < 1) train.fail("epochs", "expected at least 1 epoch");
  c.train.batch_size = train.get_int("batch_size", 64);
  if (c.train.batch_size < 1) train.fail("batch_size", "expected a positive batch size");
  c.train.seed = seed_of(train);
  const int64_t threads = train.get_int("threads", 0);
  if (threads < 0) train.fail("threads", "expected 0 (every core) or more threads");
  c.train.threads = as_int(train, "threads", threads,
                           "give the cores to use, e.g. 'threads: 2', or 0 for every core");
  c.train.shuffle = train.get_bool("shuffle", true);
  c.train.drop_last = train.get_bool("drop_last", false);
  c.train.on_nan = train.get_choice("on_nan", "stop", {"stop", "skip_step"});

  parse_transfer(train, c);  // before the optimizer: its lr_multipliers are checked against it
  parse_optimizer(train, c);
  parse_schedule(train, c);
  parse_checkpoint(train, c);
  parse_training_controls(train, c);
  train.finish();
}

// loss: a name, or a mapping of the name to its settings:
// {softmax_cross_entropy: {label_smoothing: 0.1}}.
void parse_loss(ConfigMap& top, Config& c) {
  if (!top.has("loss") || !top.node("loss").IsMap()) {
    c.loss = top.get_choice("loss", "softmax_cross_entropy", {"softmax_cross_entropy", "mse"});
    return;
  }
  ConfigMap loss = top.map("loss");
  if (loss.has("softmax_cross_entropy")) {
    c.loss = "softmax_cross_entropy";
    ConfigMap sce = loss.map("softmax_cross_entropy");
    c.label_smoothing = sce.get_double("label_smoothing", 0);
    if (!(c.label_smoothing >= 0 && c.label_smoothing <= 1))
      sce.fail("label_smoothing", "expected a share of the target in [0, 1], e.g. 0.1");
    sce.finish();
  } else if (loss.has("mse")) {
    c.loss = "mse";
    loss.map("mse").finish();
  } else {
    loss.fail("", "expected the loss's name as the key: softmax_cross_entropy or mse",
              "write e.g. 'loss: {softmax_cross_entropy: {label_smoothing: 0.1}}'");
  }
  loss.finish();
}

// deterministic, precision, cpu and gpu: how the devices compute.
void parse_device_settings(ConfigMap& top, Config& c) {
  c.deterministic = top.get_bool("deterministic", false);
  if (const std::string p = top.get_string("precision", "fp32"); p == "amp" || p == "mixed")
    top.fail("precision",
             "'" + p + "' names no one precision: tandem's mixed precisions are bf16 and fp16",
             "write 'precision: bf16' (CPUs with AVX512-BF16, GPUs) or 'precision: fp16' (GPUs)");
  c.precision = top.get_choice("precision", "fp32", {"fp32", "tf32", "bf16", "fp16"});
  ConfigMap gpu = top.map("gpu");
  c.gpu_workspace_mb = gpu.get_int("workspace_mb", 256);
  if (c.gpu_workspace_mb < 0) gpu.fail("workspace_mb", "expected zero or more megabytes");
  c.gpu_conv_algo = gpu.get_choice("conv_algo", "auto", {"auto", "find", "heuristic"});
  gpu.finish();
  ConfigMap cpu = top.map("cpu");
  c.cpu_conv_algo = cpu.get_choice("conv_algo", "auto", {"auto", "direct"});
  cpu.finish();
}

// The sections in the order a config is read, so that the first problem in it is the one named.
Config parse(const YAML::Node& root, const std::string& file, const std::string& text) {
  Config c;
  c.file = file;
  ConfigMap top(root, file, "");
  c.name = top.get_string("name", fs::path(file).stem().string());
  parse_input(top, c);
  // Keras' and PyTorch's word for the layers: named, rather than 'layers' reported missing.
  if (!top.has("layers") && top.has("model"))
    top.fail("model", "unknown key, read as nothing; tandem reads a model's layers from 'layers:'",
             top.node("model").IsSequence()
                 ? "rename 'model:' to 'layers:'"
                 : "list the layers under a top-level 'layers:', as configs/lenet.yaml does");
  config_detail::parse_layers(c, top, file, text);
  parse_loss(top, c);

  parse_data(top, c, file);
  parse_train(top, c);
  parse_device_settings(top, c);
  top.finish();
  return c;
}

}  // namespace

namespace {

// The format of the data set in `folder`, or "" when it holds none tandem reads.
std::string format_in(const fs::path& folder) {
  std::error_code ec;
  auto has = [&](const fs::path& name) { return fs::exists(folder / name, ec); };
  for (const char* dir : {".", "cifar-10-batches-bin"})
    if (has(fs::path(dir) / "data_batch_1.bin") || has(fs::path(dir) / "test_batch.bin"))
      return "cifar10";
  for (const char* name :
       {"train-images-idx3-ubyte", "t10k-images-idx3-ubyte", "test-images-idx3-ubyte"})
    if (has(name) || has(std::string(name) + ".gz")) return "mnist";
  if (fs::is_directory(folder / "train", ec)) return "image_folder";
  return "";
}

}  // namespace

void set_data_path(DataConfig& data, const std::string& folder, const std::string& from) {
  if (from == "--data") data.path_given = folder, data.path_at.clear();
  if (data.format == "synthetic" && !folder.empty()) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec))
      throw DataError(from + " " + folder + ": no such folder",
                      "give the folder that holds the data set, or leave " + from +
                          " out to train on the config's synthetic data");
    const std::string format = format_in(folder);
    if (format.empty())
      throw DataError(from + " " + folder +
                          ": the config trains on synthetic data, and this folder holds no data "
                          "set tandem reads",
                      "put CIFAR-10's binary files (data_batch_1.bin .. test_batch.bin), MNIST's "
                      "IDX files, or train/ and test/ image folders there; or leave " +
                          from + " out to train on the synthetic data");
    data.format = format;
  }
  // One folder of class sub-folders, without train/ and test/: the test split is held out of it
  // (data.test_split).
  std::error_code ec;
  if (data.format == "image_folder" && !folder.empty() && fs::is_directory(folder, ec) &&
      !fs::is_directory(fs::path(folder) / "train", ec) &&
      !fs::is_directory(fs::path(folder) / "test", ec)) {
    data.train_path = folder;
    data.test_path.clear();
    data.train_from = data.test_from = from;
    return;
  }
  const bool split = data.format == "image_folder" && !folder.empty();
  data.train_path = split ? (fs::path(folder) / "train").string() : folder;
  data.test_path = split ? (fs::path(folder) / "test").string() : folder;
  data.train_from = data.test_from = from;
}

namespace {

// The innermost '{' or '[' still open where the parser stopped (quotes and comments skipped), as
// {line, column, bracket}, 0-based; line -1: none.
struct OpenBracket {
  int line = -1, column = 0;
  char bracket = 0;
};
OpenBracket unclosed_bracket(const std::vector<std::string>& lines, const YAML::Mark& stop) {
  std::vector<OpenBracket> open;
  for (int i = 0; i <= stop.line && i < static_cast<int>(lines.size()); ++i) {
    const std::string& l = lines[static_cast<size_t>(i)];
    const int end = i == stop.line ? std::min<int>(stop.column, static_cast<int>(l.size()))
                                   : static_cast<int>(l.size());
    char quote = 0;
    for (int k = 0; k < end; ++k) {
      const char c = l[static_cast<size_t>(k)];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (k == 0 || l[static_cast<size_t>(k) - 1] == ' ')) {
        break;
      } else if (c == '{' || c == '[') {
        open.push_back({i, k, c});
      } else if ((c == '}' || c == ']') && !open.empty()) {
        open.pop_back();
      }
    }
  }
  return open.empty() ? OpenBracket{} : open.back();
}

// yaml-cpp names the symptom ("illegal map value", "end of map flow not found") at the token
// after the mistake. The mistakes made most often are named here at their own line: a tab in the
// indentation, a key without its ':', and a '{' or '[' never closed. Throws ConfigError when it
// finds one of them.
void explain_yaml_error(const std::string& text, const YAML::ParserException& e,
                        const std::string& file) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  auto content = [&](int i) {  // the line without its indentation and comment
    std::string l = lines[static_cast<size_t>(i)];
    l = l.substr(0, l.find('#'));
    const size_t start = l.find_first_not_of(" \t"), end = l.find_last_not_of(" \t\r");
    return start == std::string::npos ? std::string() : l.substr(start, end - start + 1);
  };
  const int at = std::min(e.mark.line, static_cast<int>(lines.size()) - 1);
  int before = at - 1;
  while (before >= 0 && content(before).empty()) --before;
  for (int i : {at, before}) {
    if (i < 0) continue;
    const std::string& l = lines[static_cast<size_t>(i)];
    if (l.substr(0, l.find_first_not_of(" \t")).find('\t') != std::string::npos)
      throw ConfigError(file + ":" + std::to_string(i + 1) +
                            ":1: malformed YAML: the line is "
                            "indented with a tab",
                        "YAML indents with spaces only: replace the tab with spaces");
  }
  const bool unclosed =
      e.msg == YAML::ErrorMsg::END_OF_MAP_FLOW || e.msg == YAML::ErrorMsg::END_OF_SEQ_FLOW;
  const OpenBracket b = unclosed || e.msg == YAML::ErrorMsg::FLOW_END
                            ? unclosed_bracket(lines, e.mark)
                            : OpenBracket{};
  auto closer = [](char open) { return open == '{' ? '}' : ']'; };
  if (e.msg == YAML::ErrorMsg::FLOW_END && e.mark.line < static_cast<int>(lines.size())) {
    const std::string& l = lines[static_cast<size_t>(e.mark.line)];
    const char got =
        static_cast<size_t>(e.mark.column) < l.size() ? l[static_cast<size_t>(e.mark.column)] : '?';
    const char opener = got == '}' ? '{' : '[';
    const std::string here =
        file + ":" + mark_str(e.mark) + ": malformed YAML: the '" + got + "' here";
    if (b.line < 0)
      throw ConfigError(here + " closes nothing",
                        fmt::format("remove it, or add the '{}' that opens it", opener));
    throw ConfigError(fmt::format("{} does not close the '{}' opened at {}:{}:{}", here, b.bracket,
                                  file, b.line + 1, b.column + 1),
                      fmt::format("end the '{}' with '{}' before it, or add the '{}' that this "
                                  "'{}' closes",
                                  b.bracket, closer(b.bracket), opener, got));
  }
  if (unclosed && b.line >= 0) {
    // Where the rest of its line leaves it open, the fix is a closer at the line's end.
    int depth = 0;
    for (char c : lines[static_cast<size_t>(b.line)].substr(static_cast<size_t>(b.column)))
      depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    throw ConfigError(fmt::format("{}:{}:{}: malformed YAML: the '{}' here is never closed", file,
                                  b.line + 1, b.column + 1, b.bracket),
                      depth == 1 ? fmt::format("end it with '{}', e.g. '{}{}'", closer(b.bracket),
                                               content(b.line), closer(b.bracket))
                                 : fmt::format("add the '{}' that ends it", closer(b.bracket)));
  }
  // Indentation slips: a line indented under one whose value is already given, or one that
  // lines up with no key above it. Named at the line whose indentation is off, with the lines it
  // must line up with.
  auto indent = [&](int i) {
    const std::string& l = lines[static_cast<size_t>(i)];
    const size_t n = l.find_first_not_of(' ');
    return n == std::string::npos ? 0 : static_cast<int>(n);
  };
  // The nearest line above `i` indented less than `width` (its mapping's key), or -1.
  auto parent_of = [&](int i, int width) {
    for (int k = i - 1; k >= 0; --k)
      if (!content(k).empty() && indent(k) < width) return k;
    return -1;
  };
  auto quoted = [&](int i) { return "'" + content(i) + "' (line " + std::to_string(i + 1) + ")"; };
  auto spaces = [](int n) { return std::to_string(n) + (n == 1 ? " space" : " spaces"); };
  if (at >= 0 && before >= 0 && !content(at).empty()) {
    const std::string above = content(before);
    const bool above_has_value =
        above.back() != ':' && above.find(": ") != std::string::npos && above.front() != '-';
    if (e.msg == YAML::ErrorMsg::MAP_VALUE && indent(at) > indent(before) && above_has_value) {
      // The section the line above belongs to: the nearest line above it indented as much or
      // less, where that is a key without a value ("train:").
      int parent = -1;
      for (int k = before - 1; k >= 0 && parent < 0; --k)
        if (!content(k).empty() && indent(k) <= indent(before))
          parent = content(k).back() == ':' ? k : -2;
      std::string hint = "keys of one mapping line up: indent line " + std::to_string(at + 1) +
                         " by " + spaces(indent(before)) + ", as line " +
                         std::to_string(before + 1);
      if (parent >= 0 && content(parent).back() == ':' && indent(before) <= indent(parent))
        hint = "to put both under " + quoted(parent) + ", indent line " +
               std::to_string(before + 1) + " by " + spaces(indent(at)) + " as line " +
               std::to_string(at + 1);
      throw ConfigError(fmt::format("{}:{}:1: malformed YAML: '{}' is indented more ({}) than {} "
                                    "above it, whose value is already given",
                                    file, at + 1, content(at), spaces(indent(at)), quoted(before)),
                        hint);
    }
    if (e.msg == YAML::ErrorMsg::END_OF_MAP && indent(at) < indent(before)) {
      const int parent = parent_of(at, indent(at));
      const std::string under = parent >= 0 ? " under " + quoted(parent) : "";
      throw ConfigError(
          fmt::format("{}:{}:1: malformed YAML: '{}' ({}) lines up with no key{}: "
                      "{} above it is at {}",
                      file, at + 1, content(at), spaces(indent(at)), under, quoted(before),
                      spaces(indent(before))),
          "indent the keys of one mapping alike, e.g. " + spaces(indent(at)) + " each");
    }
  }
  if (e.msg == YAML::ErrorMsg::MAP_VALUE && before >= 0) {
    const std::string c = content(before);
    if (c.find(':') == std::string::npos && std::string("-{[").find(c[0]) == std::string::npos) {
      const size_t space = c.find_first_of(" \t");
      const std::string fixed =
          space == std::string::npos
              ? c + ":"
              : c.substr(0, space) + ": " + c.substr(c.find_first_not_of(" \t", space));
      throw ConfigError(file + ":" + std::to_string(before + 1) + ":1: malformed YAML: '" + c +
                            "' has no ':' after its key",
                        "write 'key: value' with a colon after the key, e.g. '" + fixed + "'");
    }
  }
}

}  // namespace

Config parse_config(const std::string& text, const std::string& file) {
  YAML::Node root;
  check_yaml_text(text, file);
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    explain_yaml_error(text, e, file);
    throw ConfigError(file + ":" + mark_str(e.mark) + ": malformed YAML: " + e.msg,
                      "check the indentation, colons and brackets on that line and the one before");
  }
  check_yaml_tree(root, file, text.size());
  if (!root || root.IsNull())
    throw ConfigError(file + ": the config is empty", "see configs/lenet.yaml for an example");
  if (!root.IsMap())
    throw ConfigError(file + ":" + mark_str(root.Mark()) + ": expected a mapping at the top level",
                      "a config starts with keys such as 'name:', 'input:', 'layers:'");
  return parse(root, file, text);
}

Config load_config(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw ConfigError("'" + path + "' is a folder, not a config file",
                      "give a YAML file; ready configs are in configs/ (e.g. configs/lenet.yaml)");
  const std::string text = read_whole_file(path, kMaxConfigBytes, [&](const std::string& why) {
    throw ConfigError("config file '" + path + "' " + why,
                      "give a YAML file; ready configs are in configs/ (e.g. configs/lenet.yaml)");
  });
  return parse_config(text, path);
}

}  // namespace tandem
