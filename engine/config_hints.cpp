// Hints for config keys written in the wrong place: a key of another section (wrong indentation),
// Keras' `activation:` inside a layer, a layer given one number instead of its options.
#include <map>
#include <string>
#include <vector>

#include "engine/config.h"

namespace tandem {
namespace {

// The keys of each section, where a misplaced one is likely to come from.
const std::vector<std::pair<std::string, std::vector<std::string>>>& sections() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> s = {
      {"train",
       {"epochs", "batch_size", "optimizer", "schedule", "seed", "threads", "shuffle", "drop_last",
        "checkpoint", "on_nan", "early_stopping", "clip_grad_norm"}},
      {"train.optimizer", {"lr", "momentum", "nesterov", "weight_decay", "beta1", "beta2", "eps"}},
      {"data",
       {"format", "path", "normalize", "val_split", "test_split", "augment", "cache_mb", "workers",
        "resize", "skip_bad", "classes", "train_size", "test_size"}},
      {"",
       {"name", "input", "layers", "loss", "data", "train", "deterministic", "precision", "cpu",
        "gpu"}},
  };
  return s;
}

}  // namespace

KeyHint misplaced_key_hint(const std::string& context, const std::string& key,
                           const YAML::Node& value) {
  if (context.rfind("layer ", 0) == 0 && key == "activation") {
    const std::string act = value.IsScalar() ? value.Scalar() : "relu";
    return {"unknown key; in tandem an activation is a layer of its own",
            "remove 'activation: " + act + "' and add '- " + act + "' after this layer"};
  }
  for (const auto& [section, keys] : sections()) {
    if (section == context) continue;
    for (const std::string& k : keys)
      if (k == key) {
        const std::string where = section.empty() ? "at the top level" : "under '" + section + ":'";
        const std::string here = context.empty() ? "the top level" : "'" + context + ":'";
        return {"unknown key in " + here + "; '" + key + "' belongs " + where,
                section.empty()
                    ? "move it to the top level, without indentation"
                    : "indent it under '" + section + ":', e.g. " +
                          (section == "train.optimizer" ? "train: {optimizer: {" + key + ": ...}}"
                                                        : section + ": {" + key + ": ...}")};
      }
  }
  return {};
}

std::string layer_value_hint(const std::string& type, const YAML::Node& value) {
  static const std::map<std::string, std::string> main_key = {
      {"dense", "units"},    {"conv2d", "filters"}, {"maxpool", "kernel"},
      {"avgpool", "kernel"}, {"dropout", "rate"},   {"leaky_relu", "alpha"}};
  const auto it = main_key.find(type);
  if (!value.IsScalar() || it == main_key.end())
    return "write the layer's options as a mapping, e.g. '- " + type + ": {key: value}', or '- " +
           type + "' for none";
  return "write '- " + type + ": {" + it->second + ": " + value.Scalar() + "}'";
}

}  // namespace tandem
