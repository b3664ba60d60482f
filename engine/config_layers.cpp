// The model's layers (`layers:`), and the blocks they use (`blocks:`): each item read with its
// name and inputs, each block use expanded into its layers, names scoped by the use.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/config_yaml.h"
#include "engine/error.h"
#include "engine/layer_registry.h"

namespace tandem {

using config_detail::flow_text;
using config_detail::mark_str;
using config_detail::synonyms_of;

namespace {

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
      } else if (key == "trainable") {
        // Keras' layer.trainable: false keeps the layer's weights as they are.
        const std::string v = kv.second.IsScalar() ? kv.second.Scalar() : "";
        if (v != "true" && v != "false")
          throw ConfigError(at + ": " + which + ": 'trainable' must be true or false",
                            "write 'trainable: false' beside the layer type to freeze it");
        spec.frozen = v == "false";
        if (spec.frozen) spec.frozen_where = at;
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
                   ? std::string("no layer type beside 'name'/'inputs'/'trainable'")
                   : "several layer types in one item (" + types[0] + ", " + types[1] + ")"),
          "one layer type per list item, e.g. '- conv2d: {filters: 32, kernel: 3}', with "
          "'name:' and 'inputs:' beside it for branches, 'trainable: false' to freeze it");
  } else {
    throw ConfigError(
        spec.where + ": " + which + ": expected '- type' or '- type: {key: value, ...}'",
        "one layer type per list item, e.g. '- conv2d: {filters: 32, kernel: 3}'");
  }
  if (args && args.IsMap())
    for (const char* key : {"name", "inputs", "trainable"})
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
    auto block = blocks_.defs.find(spec.type);
    if (block != blocks_.defs.end())
      return use(block->second, spec, args, repeat, scope, scope_input, stack, scope_counts);
    if (!use_where.empty())
      spec.where += " (in block '" + stack.back() + "', used at " + use_where + ")";
    if (!repeat.IsNull())
      throw ConfigError(file_ + ":" + mark_str(repeat.Mark()) + ": layer " +
                            std::to_string(spec.index + 1) + " (" + spec.type +
                            "): 'repeat' repeats a block, and " + spec.type + " is a layer type",
                        "define a block under 'blocks:' and repeat it");
    if (in_frozen_use_) spec.frozen = true;  // harmless on its layers without parameters
    if (!scope.empty()) {                    // names and inputs within the block's use
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
    return c_.layers.empty() ? "input" : layer_names(c_.layers).back();
  }

 private:
  void use(const BlockDef& block, const LayerSpec& at, const YAML::Node& values_node,
           const YAML::Node& repeat_node, const std::string& scope, const std::string& scope_input,
           std::vector<std::string>& stack, std::map<std::string, int>& scope_counts) {
    const std::string& where = at.where;  // the use's own line
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
    const bool frozen_before = in_frozen_use_;
    in_frozen_use_ = in_frozen_use_ || at.frozen;  // trainable: false on the use: all its layers
    for (int64_t k = 0; k < times; ++k) {
      const std::string name = times > 1 ? base + "." + std::to_string(k) : base;
      std::map<std::string, int> counts;
      first_in_scope_ = true;
      for (const auto& inner : block_layers(blocks_, block, values, file_))
        add(inner, name, input, where, stack, counts);
      input = last_name();
    }
    in_frozen_use_ = frozen_before;
    stack.pop_back();
  }

  Config& c_;
  Blocks& blocks_;
  std::string file_;
  bool first_in_scope_ = false;
  bool in_frozen_use_ = false;  // within a block use given trainable: false
};

}  // namespace

std::vector<std::string> layer_names(const std::vector<LayerSpec>& layers) {
  std::vector<std::string> names;
  std::map<std::string, int> counts;
  for (const LayerSpec& spec : layers)
    names.push_back(spec.name.empty() ? spec.type + "_" + std::to_string(++counts[spec.type])
                                      : spec.name);
  return names;
}

namespace config_detail {

void parse_layers(Config& c, ConfigMap& top, const std::string& file, const std::string& text) {
  Blocks blocks = parse_blocks(top, file, text);
  const YAML::Node layers = top.node("layers");
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

}  // namespace config_detail

}  // namespace tandem
