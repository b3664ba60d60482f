// Fuzz target: YAML config text through parse_config (the strict YAML reading and every key's
// check), then the model it describes built as a Graph (shape inference, blocks expanded), as
// `trainer` and a checkpoint's stored config take it. Nothing is allocated on a device.
#include <string>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  try {
    Config config = parse_config(std::string(reinterpret_cast<const char*>(data), size),
                                 "/nonexistent/fuzz.yaml");
    Graph graph(config);
  } catch (const Error&) {
  }
  return 0;
}
