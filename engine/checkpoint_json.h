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

  // Declared here, defined in the .cpp: a Json holds pairs holding Jsons, and clang with
  // libstdc++ cannot instantiate those pairs where the implicit members would be defined.
  Json();
  Json(const Json&);
  Json(Json&&) noexcept;
  Json& operator=(const Json&);
  Json& operator=(Json&&) noexcept;
  ~Json();

  const Json* find(const std::string& key) const;
};

// The JSON value of `text`; throws CheckpointError naming `what` and the byte at fault.
Json read(const std::string& text, const std::string& what);

}  // namespace tandem::checkpoint_json
