// libFuzzer target: image_one of targets.h.
#define TANDEM_FUZZ_IMAGE_ONLY
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tandem::fuzz::image_one(data, size);
  return 0;
}
