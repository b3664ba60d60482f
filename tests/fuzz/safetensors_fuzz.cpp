// Fuzz target: a checkpoint's bytes through what predict and eval do with one
// (load_checkpoint_model): the safetensors header and its metadata checked, the stored config
// parsed and built, then every tensor read into the model on the CPU.
#include <omp.h>

#include "engine/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/checkpoint_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  omp_set_num_threads(1);
  tandem::RunRequest r;
  r.checkpoint = fuzz::write_input("fuzz.safetensors", data, size);
  r.batch_size = 1;
  try {
    read_checkpoint_contents(r.checkpoint);
    load_checkpoint_model(r, "predict");
  } catch (const Error&) {
  }
  return 0;
}
