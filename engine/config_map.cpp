// ConfigMap, the typed and checked reader of one YAML mapping of a config, and the "did you mean"
// suggestions its messages make.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "engine/config.h"
#include "engine/config_yaml.h"
#include "engine/error.h"
#include "engine/text.h"

namespace tandem {

namespace config_detail {

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

// A YAML value on one line, as flow YAML writes it: "3", "[3, 3]".
std::string flow_text(const YAML::Node& n) {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << n;
  return out.c_str();
}

}  // namespace config_detail

namespace {

using config_detail::flow_text;
using config_detail::mark_str;
using config_detail::scalar_text;

// Edit distance counting a swap of two neighbours as one edit ("rleu" is 1 from "relu"), for
// "did you mean" suggestions on short names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Names other frameworks use for tandem's keys and layer types; a name that stands for two of
// them (Caffe's Pooling: max or average) is listed with each.
const std::multimap<std::string, std::string> kSynonyms = {
    {"learning_rate", "lr"},
    {"kernel_size", "kernel"},
    {"pool_size", "kernel"},
    {"out_channels", "filters"},
    {"num_filters", "filters"},
    {"out_features", "units"},
    {"num_epochs", "epochs"},
    {"linear", "dense"},
    {"fc", "dense"},
    {"fully_connected", "dense"},
    {"innerproduct", "dense"},
    {"convolution", "conv2d"},
    {"convolution2d", "conv2d"},
    {"pooling", "maxpool"},
    {"pooling", "avgpool"},
    {"max_pool", "maxpool"},
    {"max_pooling2d", "maxpool"},
    {"maxpooling2d", "maxpool"},
    {"avg_pool", "avgpool"},
    {"average_pooling2d", "avgpool"},
    {"averagepooling2d", "avgpool"},
    {"globalaveragepooling2d", "global_avgpool"},
    {"adaptiveavgpool2d", "global_avgpool"},
    {"batch_norm", "batchnorm"},
    {"batchnormalization", "batchnorm"},
    {"bn", "batchnorm"},
    {"eltwise", "add"},
    {"mul", "multiply"},
    {"swish", "silu"},
    {"hard_swish", "hardswish"},
    {"hard_sigmoid", "hardsigmoid"},
    {"cuda", "gpu"}};

}  // namespace

namespace config_detail {

std::vector<std::string> synonyms_of(const std::string& typed) {
  std::vector<std::string> out;
  const auto [from, to] = kSynonyms.equal_range(lower(typed));
  for (auto it = from; it != to; ++it) out.push_back(it->second);
  return out;
}

}  // namespace config_detail

namespace {

using config_detail::synonyms_of;

// Whether `typed` is likely a misspelling of `known`: a letter or so apart, another case, one a
// prefix of the other ("conv" for "conv2d", "training" for "train"), or a common synonym.
bool similar(const std::string& typed, const std::string& known) {
  for (const std::string& s : synonyms_of(typed))
    if (s == known) return true;
  const std::string a = lower(typed), b = lower(known);
  const size_t shorter = std::min(a.size(), b.size());
  if (shorter >= 4 && (a.starts_with(b) || b.starts_with(a))) return true;
  return edit_distance(a, b) <= std::max<size_t>(1, shorter / 4);
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

std::vector<std::string> closest_names(const std::string& typed,
                                       const std::vector<std::string>& known) {
  // Another framework's name for some of them wins, however many letters apart ("fc": dense).
  std::vector<std::string> meant;
  for (const std::string& s : synonyms_of(typed))
    if (s != typed && std::find(known.begin(), known.end(), s) != known.end()) meant.push_back(s);
  if (!meant.empty()) return meant;
  // Else, of the similar names, the fewest edits away ("GPU": gpu, not cpu); the first of equals.
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& k : known)
    if (k != typed && similar(typed, k))
      if (const size_t d = edit_distance(lower(typed), lower(k)); d < best_distance)
        best = k, best_distance = d;
  if (best.empty()) return {};
  return {best};
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& known) {
  const std::vector<std::string> meant = closest_names(typed, known);
  return meant.empty() ? "" : meant[0];
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + names[i] + "'";
  return text;
}

std::string did_you_mean(const std::vector<std::string>& names) {
  return names.empty() ? "" : "; did you mean " + quoted_list(names) + "?";
}

std::string did_you_mean(const std::string& name) {
  return did_you_mean(name.empty() ? std::vector<std::string>{} : std::vector<std::string>{name});
}

ConfigMap::ConfigMap(YAML::Node node, std::string file, std::string context)
    : node_(node), file_(std::move(file)), context_(std::move(context)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    throw ConfigError(
        where() + ": expected a mapping of keys, got " + scalar_text(node_),
        "write it as {key: value, ...} or as an indented block of 'key: value' lines");
  }
  // yaml-cpp keeps both of "lr: 0.1, lr: 0.5" and a lookup would take the first: parse_config's
  // check_yaml_tree (engine/yaml_check.h) has refused every such mapping of the document, in one
  // pass, before any ConfigMap is made of it.
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
  std::string s = file_ + (pos.empty() ? "" : ":" + pos);
  if (!context_.empty()) s += ": " + context_;
  if (!key.empty()) s += ": '" + key + "'";
  return s;
}

void ConfigMap::fail(const std::string& key, const std::string& what,
                     const std::string& hint) const {
  throw ConfigError(where(key) + ": " + what,
                    hint.empty() ? "see the config format in README.md" : hint);
}

int64_t ConfigMap::get_int(const std::string& key, int64_t fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  int64_t v;
  if (!convert(n, v))
    fail(key, "expected an integer, got " + scalar_text(n),
         "write a whole number, e.g. '" + key + ": 3'");
  return v;
}

std::string ConfigMap::misspelling_of(const std::string& key) const {
  if (!node_ || !node_.IsMap()) return "";
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string k = it->first.Scalar();
    // "filters 20": a key and its value without the ':' between them.
    if (k != key && (similar(k, key) || k.starts_with(key + " "))) return k;
  }
  return "";
}

void ConfigMap::require(const std::string& key, const std::string& what) const {
  if (has(key)) return;
  const std::string typed = misspelling_of(key);
  if (typed.empty())
    fail("", "missing required key '" + key + "'" + what,
         "add '" + key + ": ...' to " + (context_.empty() ? "the config" : context_));
  if (typed.starts_with(key + " "))
    fail("",
         "missing required key '" + key + "'" + what + "; did you mean '" + key + ":" +
             typed.substr(key.size()) + "' for '" + typed + "'?",
         "put ': ' (a colon and a space) between a key and its value");
  fail("",
       "missing required key '" + key + "'" + what + "; did you mean '" + key + "' for '" + typed +
           "'?",
       "rename '" + typed + "' to '" + key + "'");
}

int64_t ConfigMap::require_int(const std::string& key) {
  require(key, " (an integer)");
  return get_int(key, 0);
}

double ConfigMap::get_double(const std::string& key, double fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  double v;
  if (!convert(n, v))
    fail(key, "expected a number, got " + scalar_text(n),
         "write a number, e.g. '" + key + ": 0.5'");
  return v;
}

double ConfigMap::require_double(const std::string& key) {
  require(key, " (a number)");
  return get_double(key, 0);
}

bool ConfigMap::get_bool(const std::string& key, bool fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  bool v;
  if (!convert(n, v))
    fail(key, "expected true or false, got " + scalar_text(n), "write true or false");
  return v;
}

std::string ConfigMap::get_string(const std::string& key, const std::string& fallback) {
  read_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsScalar())
    fail(key, "expected a text value, got " + scalar_text(n),
         "write one value, not a list or mapping");
  return n.Scalar();
}

std::string ConfigMap::require_string(const std::string& key) {
  require(key, "");
  return get_string(key, "");
}

std::string ConfigMap::get_choice(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& choices) {
  std::string v = get_string(key, fallback);
  for (const auto& c : choices)
    if (c == v) return v;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(key,
       "unknown value '" + v + "'" + did_you_mean(closest_names(v, choices)) +
           "; expected one of: " + list,
       "write one of the values listed");
}

std::vector<int64_t> ConfigMap::get_ints(const std::string& key, std::vector<int64_t> fallback,
                                         size_t n) {
  read_.insert(key);
  YAML::Node node = lookup(key);
  if (!node || node.IsNull()) return fallback;
  std::vector<int64_t> out;
  if (node.IsScalar()) {
    int64_t v;
    if (!convert(node, v))
      fail(key, "expected an integer, got " + scalar_text(node),
           "write a whole number, e.g. '" + key + ": 3'");
    out.assign(n ? n : 1, v);
    return out;
  }
  if (!node.IsSequence())
    fail(key, "expected an integer or a list of integers",
         "e.g. '" + key + ": 3' or '" + key + ": [3, 3]'");
  for (const auto& item : node) {
    int64_t v;
    if (!convert(item, v))
      fail(key, "expected a list of integers, got " + scalar_text(item),
           "e.g. '" + key + ": [3, 3]'");
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
    if (!convert(node, v))
      fail(key, "expected a number, got " + scalar_text(node),
           "write a number, e.g. '" + key + ": 0.5'");
    return {v};
  }
  if (!node.IsSequence())
    fail(key, "expected a number or a list of numbers", "e.g. '" + key + ": [0.5, 0.5, 0.5]'");
  for (const auto& item : node) {
    double v;
    if (!convert(item, v))
      fail(key, "expected a list of numbers, got " + scalar_text(item),
           "e.g. '" + key + ": [0.5, 0.5, 0.5]'");
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
    if (const KeyHint h = misplaced_key_hint(context_, key, it->second); !h.cause.empty())
      throw ConfigError(where(key) + ": " + h.cause, h.hint);
    std::string known, guess, hint = "check the spelling; see the config format in README.md";
    for (const auto& k : read_) {
      known += (known.empty() ? "" : ", ") + k;
      if (!guess.empty()) continue;
      if (key.starts_with(k + " ")) {  // "seed 42": the ':' is missing
        guess = k + ":" + key.substr(k.size());
        hint = "put ': ' (a colon and a space) between a key and its value";
      } else if (similar(key, k)) {
        guess = k;
      }
    }
    throw ConfigError(
        where(key) + ": unknown key" + did_you_mean(guess) +
            (known.empty() ? "; this section takes no keys" : "; expected one of: " + known),
        hint);
  }
}

}  // namespace tandem
