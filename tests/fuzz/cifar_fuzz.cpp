// libFuzzer target: cifar_one of targets.h.
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tandem::fuzz::cifar_one(data, size);
  return 0;
}
