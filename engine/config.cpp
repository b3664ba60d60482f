// Strict YAML config reading: every key checked, every error placed at its file, line and column.
#include "engine/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "engine/config_yaml.h"
#include "engine/epoch_metric.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/layer_registry.h"
#include "engine/yaml_check.h"

namespace tandem {
namespace fs = std::filesystem;

using config_detail::flow_text;
using config_detail::mark_str;
using config_detail::synonyms_of;

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

// One item of a layer list: its type, `name:`, `inputs:` and options (spec.args is left to the
// caller, from *args), and a block use's `repeat:`. Refuses the usual slips of other frameworks.
LayerSpec parse_item(const YAML::Node& item, int index, const std::string& file,
                     YAML::Node* args_out, YAML::Node* repeat_node) {
  LayerSpec spec;
  spec.index = index;
  spec.where = file + ":" + mark_str(item.Mark());
  YAML::Node args;
  const std::string which = "layer " + std::to_string(spec.index + 1);
  if (item.IsScalar()) {
    spec.type = item.Scalar();
  } else if (item.IsMap()) {
    // One layer type, beside it optionally `name:` and `inputs:` (branching models).
    std::vector<std::string> types;
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      const std::string at = file + ":" + mark_str(kv.second.Mark());
      if (key == "name") {
        if (!kv.second.IsScalar() || kv.second.Scalar().empty())
          throw ConfigError(at + ": " + which + ": 'name' must be a word", "e.g. 'name: block1'");
        spec.name = kv.second.Scalar();
      } else if (key == "repeat") {
        *repeat_node = kv.second;
      } else if (key == "inputs") {
        spec.inputs_where = at;
        if (kv.second.IsScalar()) {
          spec.inputs.push_back(kv.second.Scalar());
        } else if (kv.second.IsSequence() && kv.second.size() > 0) {
          for (const auto& in : kv.second) {
            if (!in.IsScalar())
              throw ConfigError(at + ": " + which + ": 'inputs' must list layer names",
                                "e.g. 'inputs: [block1, relu_3]'");
            spec.inputs.push_back(in.Scalar());
          }
        } else {
          throw ConfigError(at + ": " + which + ": 'inputs' must name one or more layers",
                            "e.g. 'inputs: [block1, relu_3]'");
        }
      } else {
        types.push_back(key);
        spec.type = key;
        args.reset(kv.second);  // rebinds; operator= would overwrite the node it holds
      }
    }
    // Two slips of other frameworks' habits: "- {type: conv2d, filters: 4}", and options
    // beside an empty "- conv2d:" rather than indented under it. The fix, in one line.
    auto value_of = [&](const std::string& key) {
      for (const auto& kv : item)
        if (kv.first.Scalar() == key) return kv.second;
      return YAML::Node();
    };
    const YAML::Node type = value_of("type");
    if (!types.empty() && ((type && type.IsScalar()) || types.size() > 1)) {
      const std::string named = type && type.IsScalar() ? type.Scalar() : types[0];
      // The fix in tandem's names: Keras' Dense is dense, PyTorch's kernel_size is kernel.
      const std::vector<std::string> known = layer_types();
      std::vector<std::string> ours = {named};
      if (std::find(known.begin(), known.end(), named) == known.end())
        if (std::vector<std::string> meant = closest_names(named, known); !meant.empty())
          ours = meant;
      // Caffe's Pooling says which with "pool: MAX" or "pool: AVE": tandem's layer type.
      const YAML::Node caffe_pool = value_of("pool");
      const bool pool_named = ours.size() > 1 && caffe_pool && caffe_pool.IsScalar() &&
                              (caffe_pool.Scalar() == "MAX" || caffe_pool.Scalar() == "AVE");
      if (pool_named) ours = {caffe_pool.Scalar() == "MAX" ? "maxpool" : "avgpool"};
      std::string options;
      for (const std::string& k : types) {
        const YAML::Node v = value_of(k);
        if (k == "type" || k == named || (pool_named && k == "pool") ||
            !(v.IsScalar() || v.IsSequence()))
          continue;
        const std::vector<std::string> key = synonyms_of(k);
        options +=
            (options.empty() ? "" : ", ") + (key.size() == 1 ? key[0] : k) + ": " + flow_text(v);
      }
      std::string beside;  // name: and inputs: stay beside the layer type
      if (!spec.name.empty()) beside += ", name: " + flow_text(value_of("name"));
      if (!spec.inputs.empty()) beside += ", inputs: " + flow_text(value_of("inputs"));
      std::string fixed;
      for (const std::string& t : ours) {
        const std::string layer = options.empty() ? t : t + ": {" + options + "}";
        fixed +=
            std::string(fixed.empty() ? "" : " or ") + "'- " +
            (beside.empty() ? layer : "{" + (options.empty() ? t + ": {}" : layer) + beside + "}") +
            "'";
      }
      if (type && type.IsScalar()) {
        throw ConfigError(
            spec.where + ": " + which + ": 'type: " + named + "' gives the layer type as a value",
            "the layer type is the key" +
                (ours.size() == 1 && ours[0] == named
                     ? std::string()
                     : ", and tandem calls " + named + " " + quoted_list(ours)) +
                ": write " + fixed);
      }
      // "filters: 4", "kernel: [3, 3]": options; a mapping or nothing is another layer type.
      if (const YAML::Node loose = value_of(types[1]);
          value_of(types[0]).IsNull() && (loose.IsScalar() || loose.IsSequence()))
        throw ConfigError(
            file + ":" + mark_str(value_of(types[1]).Mark()) + ": " + which + " (" + types[0] +
                "): '" + types[1] + "' is beside '" + types[0] + ":', not under it",
            "indent the layer's options under '" + types[0] + ":', or write " + fixed);
    }
    if (types.size() != 1)
      throw ConfigError(
          spec.where + ": " + which + ": " +
              (types.empty()
                   ? std::string("no layer type beside 'name'/'inputs'")
                   : "several layer types in one item (" + types[0] + ", " + types[1] + ")"),
          "one layer type per list item, e.g. '- conv2d: {filters: 32, kernel: 3}', with "
          "'name:' and 'inputs:' beside it for branches");
  } else {
    throw ConfigError(
        spec.where + ": " + which + ": expected '- type' or '- type: {key: value, ...}'",
        "one layer type per list item, e.g. '- conv2d: {filters: 32, kernel: 3}'");
  }
  if (args && args.IsMap())
    for (const char* key : {"name", "inputs"})
      if (args[key])
        throw ConfigError(file + ":" + mark_str(args[key].Mark()) + ": " + which + " (" +
                              spec.type + "): '" + key +
                              "' is written among the layer's "
                              "options",
                          std::string("write it beside the layer type, e.g. '- {") + spec.type +
                              ": {...}, " + key + ": ...}'");
  if (args && args.IsScalar())  // "- dense: 64"
    throw ConfigError(file + ":" + mark_str(args.Mark()) + ": " + which + " (" + spec.type +
                          "): '" + args.Scalar() + "' is not a mapping of the layer's options",
                      layer_value_hint(spec.type, args));
  *args_out = args;
  return spec;
}

// A named block of layers (`blocks:`), used in `layers:` like a layer type with values for its
// parameters: its layers are copied in with `$param` replaced and their names scoped by the use.
struct BlockDef {
  std::string name, where;
  YAML::Node params;  // parameter -> default (null: required)
  YAML::Node layers;
};

struct Blocks {
  std::string text;  // the config, loaded again for each use: fresh nodes that keep their lines
  std::map<std::string, BlockDef> defs;
  std::map<std::string, int> uses;  // per block, for the names of unnamed uses
};

Blocks parse_blocks(ConfigMap& top, const std::string& file, const std::string& text) {
  Blocks blocks;
  blocks.text = text;
  const YAML::Node node = top.node("blocks");
  if (!node || node.IsNull()) return blocks;
  if (!node.IsMap())
    throw ConfigError(file + ":" + mark_str(node.Mark()) +
                          ": 'blocks' must map block names to "
                          "{params: {...}, layers: [...]}",
                      "e.g. 'blocks: {basic: {params: {filters: null}, layers: [...]}}'");
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string where = file + ":" + mark_str(kv.first.Mark());
    const std::vector<std::string> types = layer_types();
    if (std::find(types.begin(), types.end(), name) != types.end())
      throw ConfigError(where + ": block '" + name + "' has the name of a layer type",
                        "give the block another name");
    ConfigMap def(kv.second, file, "block '" + name + "'");
    BlockDef b{name, where, def.node("params"), def.node("layers")};
    if (b.params && !b.params.IsNull() && !b.params.IsMap())
      def.fail("params", "expected a mapping of parameter names to defaults (null: required)",
               "e.g. 'params: {filters: null, stride: 1}'");
    if (!b.layers || !b.layers.IsSequence() || b.layers.size() == 0)
      def.fail("layers", "expected the block's list of layers", "e.g. 'layers: [relu]'");
    def.finish();
    blocks.defs.emplace(name, std::move(b));
  }
  return blocks;
}

// The value of parameter p for a scalar "$p"; nothing for any other node.
std::optional<YAML::Node> param_value(const YAML::Node& node,
                                      const std::map<std::string, YAML::Node>& values,
                                      const BlockDef& block, const std::string& file) {
  if (!node.IsScalar() || node.Scalar().size() < 2 || node.Scalar()[0] != '$') return std::nullopt;
  const std::string p = node.Scalar().substr(1);
  auto it = values.find(p);
  if (it == values.end()) {
    std::vector<std::string> known;
    for (const auto& [k, v] : values) known.push_back(k);
    throw ConfigError(file + ":" + mark_str(node.Mark()) + ": block '" + block.name + "' uses '$" +
                          p + "', which is none of its params" +
                          did_you_mean(closest_names(p, known)),
                      "add it under the block's 'params:', or use one of: " + quoted_list(known));
  }
  return it->second;  // the use's own node: messages about the value name its line
}

// Replaces every scalar "$p" under `node` (a copy, which keeps the block's positions).
void substitute_in(YAML::Node node, const std::map<std::string, YAML::Node>& values,
                   const BlockDef& block, const std::string& file) {
  if (node.IsMap()) {
    for (auto kv : node) {
      if (std::optional<YAML::Node> v = param_value(kv.second, values, block, file))
        node[kv.first] = *v;
      else
        substitute_in(kv.second, values, block, file);
    }
  } else if (node.IsSequence()) {
    for (size_t k = 0; k < node.size(); ++k) {
      if (std::optional<YAML::Node> v = param_value(node[k], values, block, file))
        node[k] = *v;
      else
        substitute_in(node[k], values, block, file);
    }
  }
}

// The block's layers, a fresh copy of them (the config loaded again, so that every node keeps
// its line for the messages) with each "$p" replaced by its value (whose line is the use's).
YAML::Node block_layers(const Blocks& blocks, const BlockDef& block,
                        const std::map<std::string, YAML::Node>& values, const std::string& file) {
  YAML::Node layers = YAML::Load(blocks.text)["blocks"][block.name]["layers"];
  substitute_in(layers, values, block, file);
  return layers;
}

class LayerList {
 public:
  LayerList(Config& c, Blocks& blocks, const std::string& file)
      : c_(c), blocks_(blocks), file_(file) {}

  // One item of `layers:` (or of a block, in `scope`): a layer, or a block's use.
  void add(const YAML::Node& item, const std::string& scope, const std::string& scope_input,
           const std::string& use_where, std::vector<std::string>& stack,
           std::map<std::string, int>& scope_counts) {
    YAML::Node args, repeat;
    LayerSpec spec = parse_item(item, static_cast<int>(c_.layers.size()), file_, &args, &repeat);
    if (!use_where.empty())
      spec.where += " (in block '" + stack.back() + "', used at " + use_where + ")";
    auto block = blocks_.defs.find(spec.type);
    if (block != blocks_.defs.end())
      return use(block->second, spec, args, repeat, scope, scope_input, stack, scope_counts);
    if (!repeat.IsNull())
      throw ConfigError(file_ + ":" + mark_str(repeat.Mark()) + ": layer " +
                            std::to_string(spec.index + 1) + " (" + spec.type +
                            "): 'repeat' repeats a block, and " + spec.type + " is a layer type",
                        "define a block under 'blocks:' and repeat it");
    if (!scope.empty()) {  // names and inputs within the block's use
      const std::string own = spec.name.empty()
                                  ? spec.type + "_" + std::to_string(++scope_counts[spec.type])
                                  : spec.name;
      for (std::string& in : spec.inputs) in = in == "input" ? scope_input : scope + "." + in;
      if (spec.inputs.empty() && first_in_scope_ && scope_input != last_name())
        spec.inputs = {scope_input};
      spec.name = scope + "." + own;
    }
    first_in_scope_ = false;
    spec.args = ConfigMap(args && !args.IsNull() ? args : YAML::Node(YAML::NodeType::Null), file_,
                          "layer " + std::to_string(spec.index + 1) + " (" + spec.type + ")");
    c_.layers.push_back(std::move(spec));
  }

  // The name the graph gives the last layer listed ("input" before any).
  std::string last_name() const {
    if (c_.layers.empty()) return "input";
    const LayerSpec& last = c_.layers.back();
    if (!last.name.empty()) return last.name;
    int k = 0;
    for (const LayerSpec& l : c_.layers) k += l.name.empty() && l.type == last.type;
    return last.type + "_" + std::to_string(k);
  }

 private:
  void use(const BlockDef& block, const LayerSpec& at, const YAML::Node& values_node,
           const YAML::Node& repeat_node, const std::string& scope, const std::string& scope_input,
           std::vector<std::string>& stack, std::map<std::string, int>& scope_counts) {
    const std::string where = at.where.substr(0, at.where.find(' '));
    if (std::find(stack.begin(), stack.end(), block.name) != stack.end())
      throw ConfigError(where + ": block '" + block.name + "' uses itself" +
                            (stack.size() > 1 || stack.back() != block.name
                                 ? " (through " + fmt::format("{}", fmt::join(stack, " -> ")) + ")"
                                 : ""),
                        "a block may use other blocks, never itself");
    // The values: every one a parameter of the block, every required one given.
    std::map<std::string, YAML::Node> values;
    std::vector<std::string> known;
    if (block.params && block.params.IsMap())
      for (const auto& kv : block.params) {
        known.push_back(kv.first.Scalar());
        if (!kv.second.IsNull()) values.emplace(kv.first.Scalar(), kv.second);
      }
    if (values_node && !values_node.IsNull()) {
      if (!values_node.IsMap())
        throw ConfigError(
            file_ + ":" + mark_str(values_node.Mark()) + ": block '" + block.name +
                "' takes a mapping of its params",
            "e.g. '- " + block.name + ": {" + (known.empty() ? "" : known[0] + ": ...") + "}'");
      for (const auto& kv : values_node) {
        const std::string key = kv.first.Scalar();
        if (std::find(known.begin(), known.end(), key) == known.end())
          throw ConfigError(file_ + ":" + mark_str(kv.first.Mark()) + ": block '" + block.name +
                                "' (defined at " + block.where + ") has no param '" + key + "'" +
                                did_you_mean(closest_names(key, known)),
                            known.empty() ? "it takes none" : "its params: " + quoted_list(known));
        // Not values[key] = ...: a YAML::Node's assignment rebinds the node it holds (here the
        // block's default, which every later use would then read).
        values.erase(key);
        values.emplace(key, kv.second);
      }
    }
    for (const std::string& k : known)
      if (!values.count(k))
        throw ConfigError(where + ": block '" + block.name + "' (defined at " + block.where +
                              ") needs a value for its param '" + k + "'",
                          "e.g. '- " + block.name + ": {" + k + ": ...}'");
    int64_t times = 1;
    if (!repeat_node.IsNull()) {
      if (!repeat_node.IsScalar() || !(std::istringstream(repeat_node.Scalar()) >> times) ||
          times < 1)
        throw ConfigError(file_ + ":" + mark_str(repeat_node.Mark()) +
                              ": 'repeat' must be a positive number of uses",
                          "e.g. 'repeat: 3'");
    }
    if (at.inputs.size() > 1)
      throw ConfigError(at.inputs_where + ": block '" + block.name + "' takes one input, got " +
                            std::to_string(at.inputs.size()),
                        "join the branches with an add or concat layer first");
    // The use's name (scoped in a block): its `name:`, else BLOCK_k for the k-th unnamed use.
    const std::string own = !at.name.empty()
                                ? at.name
                                : block.name + "_" +
                                      std::to_string(scope.empty() ? ++blocks_.uses[block.name]
                                                                   : ++scope_counts[block.name]);
    const std::string base = scope.empty() ? own : scope + "." + own;
    std::string input = !at.inputs.empty()
                            ? (scope.empty()             ? at.inputs[0]
                               : at.inputs[0] == "input" ? scope_input
                                                         : scope + "." + at.inputs[0])
                        : first_in_scope_ ? scope_input
                                          : last_name();
    stack.push_back(block.name);
    for (int64_t k = 0; k < times; ++k) {
      const std::string name = times > 1 ? base + "." + std::to_string(k) : base;
      std::map<std::string, int> counts;
      first_in_scope_ = true;
      for (const auto& inner : block_layers(blocks_, block, values, file_))
        add(inner, name, input, where, stack, counts);
      input = last_name();
    }
    stack.pop_back();
  }

  Config& c_;
  Blocks& blocks_;
  std::string file_;
  bool first_in_scope_ = false;
};

void parse_layers(Config& c, const YAML::Node& layers, Blocks& blocks, const std::string& file) {
  if (!layers || layers.IsNull())
    throw ConfigError(file + ": 'layers' is missing", "list the model's layers under 'layers:'");
  if (!layers.IsSequence())
    throw ConfigError(file + ":" + mark_str(layers.Mark()) + ": 'layers' must be a list",
                      "write each layer as '- type' or '- type: {key: value}'");
  LayerList list(c, blocks, file);
  std::vector<std::string> stack;
  std::map<std::string, int> counts;
  for (const auto& item : layers) list.add(item, "", "", "", stack, counts);
  if (c.layers.empty()) throw ConfigError(file + ": 'layers' is empty", "list at least one layer");
}

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

  parse_optimizer(train, c);
  parse_schedule(train, c);
  parse_checkpoint(train, c);
  parse_training_controls(train, c);
  train.finish();
}

// deterministic, precision and gpu: how the devices compute.
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
  Blocks blocks = parse_blocks(top, file, text);
  parse_layers(c, top.node("layers"), blocks, file);
  c.loss = top.get_choice("loss", "softmax_cross_entropy", {"softmax_cross_entropy", "mse"});

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
