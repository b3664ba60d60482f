// Fuzz target: a CIFAR-10 binary batch through load_cifar10, its pixels held or decoded on the
// fly (the first byte's bit 0), gzipped or not (bit 1: file_io reads both alike).
#include <zlib.h>

#include "datasets/cifar10.h"
#include "datasets/dataset.h"
#include "engine/error.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string dir = fuzz::scratch_dir() + "/cifar";
  std::filesystem::create_directories(dir);
  if (size > 0 && (data[0] & 2)) {
    gzFile f = gzopen((dir + "/test_batch.bin").c_str(), "wb");
    if (!f) std::abort();
    gzwrite(f, data, static_cast<unsigned>(size));
    gzclose(f);
  } else {
    fuzz::write_input("cifar/test_batch.bin", data, size);
  }
  try {
    const bool keep = size == 0 || (data[0] & 1) == 0;
    Dataset d = load_cifar10(dir, false, 10, keep);
    std::vector<uint8_t> out(3 * 32 * 32);
    for (int64_t i = 0; i < d.size(); ++i) read_samples(d, &i, 1, out.data());
  } catch (const Error&) {
  }
  return 0;
}
