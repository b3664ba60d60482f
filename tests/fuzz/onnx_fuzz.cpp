// Fuzz target: an ONNX file through `trainer import` (run_import): the protobuf parsed, every node
// converted or refused, the config written and built, the weights checked and written.
#include <omp.h>

#include "engine/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/app.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  omp_set_num_threads(1);
  RunRequest r;
  r.inputs = {fuzz::write_input("model.onnx", data, size)};
  r.out_dir = fuzz::scratch_dir() + "/imported";
  r.force = true;
  try {
    run_import(r);
  } catch (const Error&) {
  }
  return 0;
}
