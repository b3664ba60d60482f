// The config keys of transfer learning: train.init (the starting checkpoint), train.freeze and
// `trainable: false` (layers whose weights stay), and train.optimizer.lr_multipliers.
#include <cmath>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/config_yaml.h"
#include "engine/error.h"

namespace tandem {

using config_detail::mark_str;

namespace {

// The layers a name of train.freeze or lr_multipliers stands for: the layer of that name, else
// every layer of the block use of that name (theirs start with "NAME."). Throws ConfigError at
// `where` naming the closest layer name when there is none. `exact`: it named one layer itself.
std::vector<size_t> layers_named(const Config& c, const std::string& name, const std::string& where,
                                 const std::string& what, bool* exact) {
  const std::vector<std::string> names = layer_names(c.layers);
  std::vector<size_t> hit;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) hit = {i};
  *exact = !hit.empty();
  if (hit.empty())
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i].starts_with(name + ".")) hit.push_back(i);
  if (hit.empty())
    throw ConfigError(
        where + ": " + what + " names '" + name + "', which is no layer of the model" +
            did_you_mean(closest_names(name, names)),
        "name a layer as the model table does (trainer summary --config " + c.file +
            " lists them): its 'name:', else type_k for the k-th unnamed layer of its type "
            "(conv2d_1, dense_2)");
  return hit;
}

}  // namespace

void parse_transfer(ConfigMap& train, Config& c) {
  auto at = [&](const YAML::Node& n) { return c.file + ":" + mark_str(n.Mark()); };
  if (const YAML::Node init = train.node("init"); init && !init.IsNull()) {
    if (!init.IsScalar() || init.Scalar().empty())
      train.fail("init", "expected a checkpoint file (.safetensors) to start from",
                 "e.g. 'init: ../runs/lenet/epoch-5.safetensors' (relative to the config's "
                 "folder)");
    c.train.init = config_detail::resolve_path(init.Scalar(), c.file);
    c.train.init_from = at(init) + ": train.init";
  }

  const YAML::Node freeze = train.node("freeze");
  if (!freeze || freeze.IsNull()) return;
  const std::string example =
      "e.g. 'freeze: [conv2d_1, conv2d_2]', or 'freeze: {up_to: dense_1}' for every layer from "
      "the first up to and including dense_1";
  auto freeze_named = [&](const YAML::Node& item) {
    if (!item.IsScalar() || item.Scalar().empty())
      throw ConfigError(at(item) + ": train.freeze: expected a layer name", example);
    bool exact = false;
    for (size_t i : layers_named(c, item.Scalar(), at(item), "train.freeze", &exact)) {
      c.layers[i].frozen = true;
      if (exact) c.layers[i].frozen_where = at(item);
    }
  };
  if (freeze.IsScalar()) {
    freeze_named(freeze);
  } else if (freeze.IsSequence()) {
    for (const auto& item : freeze) freeze_named(item);
  } else {
    ConfigMap m(freeze, c.file, "train.freeze");
    m.require("up_to", " (" + example + ")");
    const YAML::Node up = m.node("up_to");
    if (!up.IsScalar() || up.Scalar().empty()) m.fail("up_to", "expected one layer name", example);
    bool exact = false;
    const std::vector<size_t> hit =
        layers_named(c, up.Scalar(), at(up), "train.freeze.up_to", &exact);
    for (size_t i = 0; i <= hit.back(); ++i) c.layers[i].frozen = true;
    m.finish();
  }
}

void parse_lr_multipliers(ConfigMap& opt, Config& c) {
  const YAML::Node node = opt.node("lr_multipliers");
  if (!node || node.IsNull()) return;
  if (!node.IsMap())
    opt.fail("lr_multipliers", "expected a mapping of layer names to factors of the lr",
             "e.g. 'lr_multipliers: {dense_2: 10}' updates dense_2 with 10 times the lr");
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string where = c.file + ":" + mark_str(kv.first.Mark());
    double factor = 0;
    bool number = kv.second.IsScalar();
    if (number) {
      try {
        factor = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        number = false;
      }
    }
    if (!number || !(factor > 0) || !std::isfinite(factor))
      throw ConfigError(
          where + ": train.optimizer.lr_multipliers: '" + name +
              "' must be a positive factor of the learning rate, got " +
              config_detail::scalar_text(kv.second),
          "e.g. '" + name +
              ": 10'; to keep a layer's weights as they are, freeze it (train.freeze, or "
              "'trainable: false' beside its type)");
    bool exact = false;
    const std::vector<size_t> hit =
        layers_named(c, name, where, "train.optimizer.lr_multipliers", &exact);
    bool any_trainable = false;
    for (size_t i : hit) {
      c.layers[i].lr_mult = factor;
      if (exact) c.layers[i].lr_mult_where = where;
      any_trainable = any_trainable || !c.layers[i].frozen;
    }
    if (!any_trainable)
      throw ConfigError(where + ": train.optimizer.lr_multipliers: '" + name +
                            "' is frozen (train.freeze or 'trainable: false'), so a learning-rate "
                            "multiplier changes nothing",
                        "remove '" + name + "' from lr_multipliers, or unfreeze it");
    c.train.optimizer.lr_multipliers.emplace_back(name, factor);
  }
}

}  // namespace tandem
