// Name -> factory map of the backends compiled into this build.
#include "engine/backend_registry.h"

#include <map>

#include "engine/error.h"

namespace tandem {
namespace {
std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r;
  return r;
}
}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  registry()[name] = std::move(factory);
}

std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& [n, f] : registry()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("unknown device '" + name + "'", "use one of: " + known);
  }
  return it->second(options);
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : registry()) names.push_back(n);
  return names;
}

}  // namespace tandem
