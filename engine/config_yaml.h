// The YAML wording that the config's map reader (config_map.cpp) and its parser (config.cpp,
// config_layers.cpp) share: where a node is, and how a value reads in a message; and the layer
// list's reader. Internal to engine/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "engine/config.h"

namespace tandem::config_detail {

// "12:3": a node's line and column, 1-based; "" when unknown.
std::string mark_str(const YAML::Mark& m);
// "'abc'", "a list", "a mapping" or "nothing": what a node holds, for "expected X, got Y".
std::string scalar_text(const YAML::Node& n);
// A YAML value on one line, as flow YAML writes it: "3", "[3, 3]".
std::string flow_text(const YAML::Node& n);
// What `typed` stands for in tandem's words (another framework's name: "fc" is dense), in the
// table's order; empty when it is no synonym.
std::vector<std::string> synonyms_of(const std::string& typed);

// A path named in the config (data folders, train.init): relative to the config file's folder
// first, then the working directory; as it is when absolute.
std::string resolve_path(const std::string& p, const std::string& config_file);

// c.layers from `layers:`, every use of a block of `blocks:` expanded (config_layers.cpp). `text`
// is the config's own, loaded again for each use so that every copied node keeps its line.
void parse_layers(Config& c, ConfigMap& top, const std::string& file, const std::string& text);

}  // namespace tandem::config_detail
