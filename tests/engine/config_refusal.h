// What the config tests share: the refusal of a config text, and a config with one part replaced.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"

namespace tandem {

struct Refusal {
  std::string cause, hint;
};

// Parses `text` and builds the graph; the error's cause and hint (the test fails when it is
// accepted).
inline Refusal refusal_of(const std::string& text) {
  try {
    Config c = parse_config(text, "bad.yaml");
    Graph g(c);
  } catch (const ConfigError& e) {
    return {e.cause(), e.hint()};
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

// `base` with its first `from` replaced by `to` (the test fails when `from` is not in it).
inline std::string replaced(std::string base, const std::string& from, const std::string& to) {
  const size_t at = base.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return base;
  return base.replace(at, from.size(), to);
}

}  // namespace tandem
