// Source locations in messages, shown under --log-level debug only.
#include "engine/user_message.h"

#include <spdlog/spdlog.h>

#include <regex>

namespace tandem {

std::string user_message(const std::string& text) {
  if (spdlog::get_level() <= spdlog::level::debug) return text;
  static const std::regex location(R"( at [A-Za-z0-9_./-]+\.(cu|cuh|cpp|h):[0-9]+)");
  return std::regex_replace(text, location, "");
}

}  // namespace tandem
