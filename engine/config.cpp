// Strict YAML config reading: every key checked, every error placed at its file, line and column.
#include "engine/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/epoch_metric.h"
#include "engine/error.h"

namespace tandem {
namespace fs = std::filesystem;

namespace {

std::string mark_str(const YAML::Mark& m) {
  if (m.line < 0) return "";
  return std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);  // yaml-cpp is 0-based
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

// Levenshtein distance, for "did you mean" suggestions on short key names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

bool similar(const std::string& a, const std::string& b) {
  return edit_distance(a, b) <= std::max<size_t>(1, std::min(a.size(), b.size()) / 4);
}

template <typename T>
bool convert(const YAML::Node& n, T& out) {
  if (!n.IsScalar()) return false;
  try {
    out = n.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace

ConfigMap::ConfigMap(YAML::Node node, std::string file, std::string context)
    : node_(node), file_(std::move(file)), context_(std::move(context)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    throw ConfigError(where() + ": expected a mapping of keys, got " + scalar_text(node_),
                      "write it as {key: value, ...} or as an indented block of 'key: value' lines");
  }
}

YAML::Node ConfigMap::lookup(const std::string& key) const {
  if (!node_ || !node_.IsMap()) return YAML::Node();
  for (auto it = node_.begin(); it != node_.end(); ++it)
    if (it->first.Scalar() == key) return it->second;
  return YAML::Node();
}

bool ConfigMap::has(const std::string& key) const {
  YAML::Node n = lookup(key);
  return n && !n.IsNull();
}

std::string ConfigMap::where(const std::string& key) const {
  YAML::Mark m = node_ ? node_.Mark() : YAML::Mark::null_mark();
  if (!key.empty()) {
    if (node_ && node_.IsMap())
      for (auto it = node_.begin(); it != node_.end(); ++it)
        if (it->first.Scalar() == key) m = it->first.Mark();
  }
  std::string pos = mark_str(m);
  std::string s = file_ + (pos.empty() ? "" : ":" + pos) + ": " + context_;
  if (!key.empty()) s += (context_.empty() ? "" : ": ") + std::string("'") + key + "'";
  return s;
}

void ConfigMap::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(where(key) + ": " + what);
}

int64_t ConfigMap::get_int(const std::string& key, int64_t fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  int64_t v;
  if (!convert(n, v)) fail(key, "expected an integer, got " + scalar_text(n));
  return v;
}

std::string ConfigMap::missing(const std::string& key, const std::string& what) const {
  std::string s = "missing required key '" + key + "'" + what;
  if (node_ && node_.IsMap())
    for (auto it = node_.begin(); it != node_.end(); ++it)
      if (similar(it->first.Scalar(), key))
        s += "; did you mean '" + key + "' for '" + it->first.Scalar() + "'?";
  return s;
}

int64_t ConfigMap::require_int(const std::string& key) {
  if (!has(key)) fail("", missing(key, " (an integer)"));
  return get_int(key, 0);
}

double ConfigMap::get_double(const std::string& key, double fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  double v;
  if (!convert(n, v)) fail(key, "expected a number, got " + scalar_text(n));
  return v;
}

double ConfigMap::require_double(const std::string& key) {
  if (!has(key)) fail("", missing(key, " (a number)"));
  return get_double(key, 0);
}

bool ConfigMap::get_bool(const std::string& key, bool fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  bool v;
  if (!convert(n, v)) fail(key, "expected true or false, got " + scalar_text(n));
  return v;
}

std::string ConfigMap::get_string(const std::string& key, const std::string& fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsScalar()) fail(key, "expected a text value, got " + scalar_text(n));
  return n.Scalar();
}

std::string ConfigMap::require_string(const std::string& key) {
  if (!has(key)) fail("", missing(key, ""));
  return get_string(key, "");
}

std::string ConfigMap::get_choice(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& choices) {
  std::string v = get_string(key, fallback);
  for (const auto& c : choices)
    if (c == v) return v;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(key, "unknown value '" + v + "'; expected one of: " + list);
}

std::vector<int64_t> ConfigMap::get_ints(const std::string& key, std::vector<int64_t> fallback,
                                         size_t n) {
  read_.insert(key);
  YAML::Node node = lookup(key);
  if (!node || node.IsNull()) return fallback;
  std::vector<int64_t> out;
  if (node.IsScalar()) {
    int64_t v;
    if (!convert(node, v)) fail(key, "expected an integer, got " + scalar_text(node));
    out.assign(n ? n : 1, v);
    return out;
  }
  if (!node.IsSequence()) fail(key, "expected an integer or a list of integers");
  for (const auto& item : node) {
    int64_t v;
    if (!convert(item, v)) fail(key, "expected a list of integers, got " + scalar_text(item));
    out.push_back(v);
  }
  if (n && out.size() != n)
    fail(key, "expected " + std::to_string(n) + " integers, got " + std::to_string(out.size()));
  return out;
}

std::vector<double> ConfigMap::get_doubles(const std::string& key, std::vector<double> fallback) {
  read_.insert(key);
  YAML::Node node = lookup(key);
  if (!node || node.IsNull()) return fallback;
  std::vector<double> out;
  if (node.IsScalar()) {
    double v;
    if (!convert(node, v)) fail(key, "expected a number, got " + scalar_text(node));
    return {v};
  }
  if (!node.IsSequence()) fail(key, "expected a number or a list of numbers");
  for (const auto& item : node) {
    double v;
    if (!convert(item, v)) fail(key, "expected a list of numbers, got " + scalar_text(item));
    out.push_back(v);
  }
  return out;
}

ConfigMap ConfigMap::map(const std::string& key) {
  read_.insert(key);
  std::string ctx = context_.empty() ? key : context_ + "." + key;
  return ConfigMap(lookup(key), file_, ctx);
}

YAML::Node ConfigMap::node(const std::string& key) {
  read_.insert(key);
  return lookup(key);
}

void ConfigMap::finish() const {
  if (!node_ || !node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (read_.count(key)) continue;
    std::string known, guess;
    for (const auto& k : read_) {
      known += (known.empty() ? "" : ", ") + k;
      if (guess.empty() && similar(k, key)) guess = k;
    }
    throw ConfigError(where(key) + ": unknown key" +
                          (guess.empty() ? "" : "; did you mean '" + guess + "'?") +
                          (known.empty() ? "; this section takes no keys"
                                         : "; expected one of: " + known),
                      "check the spelling; see the config format in README.md");
  }
}

namespace {

// A data folder named in the config: relative to the config file's folder first, then the
// working directory (so `path: ../datasets/x` works from anywhere).
std::string resolve_path(const std::string& p, const std::string& config_file) {
  if (p.empty()) return p;
  fs::path path(p);
  if (path.is_absolute()) return p;
  fs::path beside = fs::path(config_file).parent_path() / path;
  if (fs::exists(beside)) return beside.lexically_normal().string();
  if (fs::exists(path)) return path.lexically_normal().string();
  return beside.lexically_normal().string();  // missing either way: the loader says so
}

void parse_layers(Config& c, const YAML::Node& layers, const std::string& file) {
  if (!layers || layers.IsNull())
    throw ConfigError(file + ": 'layers' is missing", "list the model's layers under 'layers:'");
  if (!layers.IsSequence())
    throw ConfigError(file + ":" + mark_str(layers.Mark()) + ": 'layers' must be a list",
                      "write each layer as '- type' or '- type: {key: value}'");
  int index = 0;
  for (const auto& item : layers) {
    LayerSpec spec;
    spec.index = index++;
    spec.where = file + ":" + mark_str(item.Mark());
    YAML::Node args;
    if (item.IsScalar()) {
      spec.type = item.Scalar();
    } else if (item.IsMap() && item.size() == 1) {
      spec.type = item.begin()->first.Scalar();
      args = item.begin()->second;
    } else {
      throw ConfigError(spec.where + ": layer " + std::to_string(spec.index + 1) +
                            ": expected '- type' or '- type: {key: value, ...}'",
                        "one layer type per list item, e.g. '- conv2d: {filters: 32, kernel: 3}'");
    }
    std::string ctx = "layer " + std::to_string(spec.index + 1) + " (" + spec.type + ")";
    // A bare "- relu" has no arguments: anchor its messages at the item itself.
    spec.args = ConfigMap(args && !args.IsNull() ? args : YAML::Node(YAML::NodeType::Null), file, ctx);
    c.layers.push_back(std::move(spec));
  }
  if (c.layers.empty()) throw ConfigError(file + ": 'layers' is empty", "list at least one layer");
}

Config parse(const YAML::Node& root, const std::string& file) {
  Config c;
  c.file = file;
  ConfigMap top(root, file, "");
  c.name = top.get_string("name", fs::path(file).stem().string());

  ConfigMap input = top.map("input");
  if (!top.has("input")) top.fail("", "missing 'input: {shape: [C, H, W]}'");
  std::vector<int64_t> shape = input.get_ints("shape", {});
  if (shape.empty()) input.fail("shape", "expected the sample shape, e.g. [1, 28, 28]");
  for (int64_t d : shape)
    if (d <= 0) input.fail("shape", "every dimension must be positive");
  c.input = Shape(shape);
  input.finish();

  parse_layers(c, top.node("layers"), file);
  c.loss = top.get_choice("loss", "softmax_cross_entropy", {"softmax_cross_entropy", "mse"});

  ConfigMap data = top.map("data");
  c.data.where = data.where();
  c.data.format = data.get_choice("format", "synthetic", {"mnist", "cifar10", "image_folder", "synthetic"});
  DataConfig folders;
  folders.format = c.data.format;
  set_data_path(folders, resolve_path(data.get_string("path", ""), file));
  c.data.train_path = resolve_path(data.get_string("train", ""), file);
  c.data.test_path = resolve_path(data.get_string("test", ""), file);
  if (c.data.train_path.empty()) c.data.train_path = folders.train_path;
  if (c.data.test_path.empty()) c.data.test_path = folders.test_path;
  if (c.data.format != "synthetic" && c.data.train_path.empty())
    data.fail("", "data.path (or data.train and data.test) is required for format " + c.data.format);
  if (c.data.format == "image_folder" && c.data.test_path.empty())
    data.fail("", "format image_folder needs data.test (or data.path holding train/ and test/)");
  for (const char* key : {"resize", "skip_bad"})
    if (data.has(key) && c.data.format != "image_folder")
      data.fail(key, "applies to format image_folder only, not " + c.data.format);
  c.data.resize = data.get_bool("resize", true);
  c.data.skip_bad = data.get_bool("skip_bad", false);
  if (data.has("workers") && data.get_string("workers", "") != "auto") {
    c.data.workers = data.get_int("workers", 0);
    if (c.data.workers < 0 || c.data.workers > 64)
      data.fail("workers", "expected auto, or 0 (batches cut in the training thread) to 64 threads");
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
    for (double m : norm.get_doubles("mean", {})) c.data.mean.push_back(static_cast<float>(m));
    for (double s : norm.get_doubles("std", {})) {
      if (s <= 0) norm.fail("std", "every std must be positive");
      c.data.std.push_back(static_cast<float>(s));
    }
    norm.finish();
  }
  ConfigMap aug = data.map("augment");
  const int64_t pad = aug.get_int("crop_padding", 0);
  if (pad < 0) aug.fail("crop_padding", "expected 0 (off) or a positive number of pixels");
  if (pad > 0 && c.input.rank() != 3)
    aug.fail("crop_padding", "a random crop needs image input of shape [C, H, W], not " + c.input.str());
  if (pad > 0 && (pad >= c.input[1] || pad >= c.input[2]))
    aug.fail("crop_padding", "expected less than the image height and width (" + c.input.str() + ")");
  c.data.augment.crop_padding = static_cast<int>(pad);
  c.data.augment.flip = aug.get_bool("flip", false);
  if (c.data.augment.flip && c.input.rank() != 3)
    aug.fail("flip", "a horizontal flip needs image input of shape [C, H, W], not " + c.input.str());
  aug.finish();
  std::vector<int64_t> dshape = data.get_ints("shape", {});
  c.data.shape = dshape.empty() ? c.input : Shape(dshape);
  c.data.classes = static_cast<int>(data.get_int("classes", 10));
  if (c.data.classes < 2) data.fail("classes", "expected at least 2 classes");
  c.data.train_size = data.get_int("train_size", 1024);
  c.data.test_size = data.get_int("test_size", 256);
  if (c.data.train_size <= 0) data.fail("train_size", "expected a positive number of samples");
  if (c.data.test_size < 0) data.fail("test_size", "expected zero or more samples");
  c.data.seed = static_cast<uint64_t>(data.get_int("seed", 0));
  c.data.val_split = data.get_double("val_split", 0);
  if (!(c.data.val_split >= 0 && c.data.val_split < 1))
    data.fail("val_split", "expected a share in [0, 1) of the train split, e.g. 0.1");
  data.finish();

  ConfigMap train = top.map("train");
  c.train.epochs = train.get_int("epochs", 1);
  if (c.train.epochs < 1) train.fail("epochs", "expected at least 1 epoch");
  c.train.batch_size = train.get_int("batch_size", 64);
  if (c.train.batch_size < 1) train.fail("batch_size", "expected a positive batch size");
  c.train.seed = static_cast<uint64_t>(train.get_int("seed", 0));
  c.train.threads = static_cast<int>(train.get_int("threads", 0));
  if (c.train.threads < 0) train.fail("threads", "expected 0 (every core) or more threads");
  c.train.shuffle = train.get_bool("shuffle", true);
  c.train.drop_last = train.get_bool("drop_last", false);
  c.train.on_nan = train.get_choice("on_nan", "stop", {"stop", "skip_step"});

  ConfigMap opt = train.map("optimizer");
  OptimizerConfig& o = c.train.optimizer;
  o.type = opt.get_choice("type", "sgd", {"sgd", "adam", "adamw"});
  o.lr = opt.get_double("lr", o.type == "sgd" ? 0.01 : 1e-3);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) opt.fail("lr", "expected a positive learning rate");
  o.weight_decay = opt.get_double("weight_decay", o.type == "adamw" ? 0.01 : 0.0);
  if (o.weight_decay < 0) opt.fail("weight_decay", "expected zero or a positive decay");
  if (o.type == "sgd") {
    o.momentum = opt.get_double("momentum", 0.0);
    if (o.momentum < 0 || o.momentum >= 1) opt.fail("momentum", "expected a value in [0, 1)");
    o.nesterov = opt.get_bool("nesterov", false);
    if (o.nesterov && o.momentum == 0) opt.fail("nesterov", "Nesterov momentum needs momentum > 0");
  } else {
    o.beta1 = opt.get_double("beta1", 0.9);
    o.beta2 = opt.get_double("beta2", 0.999);
    o.eps = opt.get_double("eps", 1e-8);
    if (o.beta1 < 0 || o.beta1 >= 1) opt.fail("beta1", "expected a value in [0, 1)");
    if (o.beta2 < 0 || o.beta2 >= 1) opt.fail("beta2", "expected a value in [0, 1)");
    if (!(o.eps > 0)) opt.fail("eps", "expected a positive epsilon");
  }
  opt.finish();

  ConfigMap sched = train.map("schedule");
  ScheduleConfig& s = c.train.schedule;
  s.type = sched.get_choice("type", "constant", {"constant", "step", "multistep", "cosine"});
  if (s.type == "step") {
    s.step = sched.get_int("step", 1);
    if (s.step < 1) sched.fail("step", "expected at least 1 epoch between decays");
  }
  if (s.type == "step" || s.type == "multistep") {
    s.gamma = sched.get_double("gamma", 0.1);
    if (!(s.gamma > 0)) sched.fail("gamma", "expected a positive factor");
  }
  if (s.type == "multistep") {
    s.milestones = sched.get_ints("milestones", {});
    if (s.milestones.empty()) sched.fail("milestones", "expected a list of epochs, e.g. [3, 6]");
  }
  if (s.type == "cosine") s.min_lr = sched.get_double("min_lr", 0.0);
  s.warmup_epochs = sched.get_int("warmup_epochs", 0);
  if (s.warmup_epochs < 0) sched.fail("warmup_epochs", "expected zero or more epochs");
  sched.finish();

  // The folder is an output, so it is relative to the working directory (like --metrics).
  ConfigMap ckpt = train.map("checkpoint");
  CheckpointConfig& k = c.train.checkpoint;
  k.dir = ckpt.get_string("dir", "");
  k.every = ckpt.get_int("every", 1);
  if (k.every < 1) ckpt.fail("every", "expected at least 1 epoch between checkpoints");
  k.keep = ckpt.get_int("keep", 0);
  if (k.keep < 0) ckpt.fail("keep", "expected 0 (keep all) or more checkpoints");
  k.best = ckpt.get_string("best", "");
  if (!k.best.empty() && !find_epoch_metric(k.best))
    ckpt.fail("best", "unknown metric '" + k.best + "'; expected one of: " + epoch_metric_names());
  if (k.best.rfind("val_", 0) == 0 && c.data.val_split == 0)
    ckpt.fail("best", k.best + " needs a validation split: set data.val_split, e.g. 0.1");
  ckpt.finish();
  train.finish();

  c.deterministic = top.get_bool("deterministic", false);
  c.precision = top.get_choice("precision", "fp32", {"fp32", "tf32"});
  ConfigMap gpu = top.map("gpu");
  c.gpu_workspace_mb = gpu.get_int("workspace_mb", 256);
  if (c.gpu_workspace_mb < 0) gpu.fail("workspace_mb", "expected zero or more megabytes");
  gpu.finish();
  top.finish();
  return c;
}

}  // namespace

void set_data_path(DataConfig& data, const std::string& folder) {
  const bool split = data.format == "image_folder" && !folder.empty();
  data.train_path = split ? (fs::path(folder) / "train").string() : folder;
  data.test_path = split ? (fs::path(folder) / "test").string() : folder;
}

Config parse_config(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(file + ":" + mark_str(e.mark) + ": malformed YAML: " + e.msg,
                      "check the indentation and brackets around that line");
  }
  if (!root || root.IsNull()) throw ConfigError(file + ": the config is empty", "see configs/lenet.yaml for an example");
  if (!root.IsMap())
    throw ConfigError(file + ":" + mark_str(root.Mark()) + ": expected a mapping at the top level",
                      "a config starts with keys such as 'name:', 'input:', 'layers:'");
  return parse(root, file);
}

Config load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw ConfigError("cannot open config file '" + path + "'",
                      "check the path; ready configs are in configs/ (e.g. configs/lenet.yaml)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path);
}

}  // namespace tandem
