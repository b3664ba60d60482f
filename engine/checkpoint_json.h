// The strict JSON reader of checkpoint headers (safetensors): the subset they use (objects,
// arrays, strings, numbers kept as written), UTF-8 only, no duplicate keys, a bounded depth. It
// refuses what a lenient parser would accept, so that a damaged header is named, not half-read.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tandem::checkpoint_json {

struct Json {
  enum Kind { kObject, kArray, kString, kNumber } kind = kObject;
  std::vector<std::pair<std::string, Json>> members;  // objects, in file order
  std::vector<Json> items;                            // arrays
  std::string text;                                   // strings; numbers as written

  const Json* find(const std::string& key) const;
};

// Defined once Json is complete: clang instantiates the pair of `members` where a body uses it.
inline const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

// The JSON value of `text`; throws CheckpointError naming `what` and the byte at fault.
Json read(const std::string& text, const std::string& what);

}  // namespace tandem::checkpoint_json
