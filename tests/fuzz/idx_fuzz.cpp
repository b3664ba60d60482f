// Fuzz target: MNIST's IDX files through load_mnist. The input holds both files: a byte of flags
// (bit 0: gzip the images file, bit 1: the labels file, bit 2: decode on the fly), the images
// file's length (4 bytes, little-endian), the images file, then the labels file.
#include <zlib.h>

#include <cstring>

#include "datasets/dataset.h"
#include "datasets/mnist.h"
#include "engine/error.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void write_gz(const std::string& path, const uint8_t* data, size_t size) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size) gzwrite(f, data, static_cast<unsigned>(size));
  gzclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  uint32_t n = 0;
  std::memcpy(&n, data + 1, 4);
  const size_t images_size = std::min<size_t>(n, size - 5);
  const uint8_t* images = data + 5;
  const uint8_t* labels = images + images_size;
  const size_t labels_size = size - 5 - images_size;
  const std::string dir = fuzz::scratch_dir() + "/idx";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string img = dir + "/train-images-idx3-ubyte", lab = dir + "/train-labels-idx1-ubyte";
  if (flags & 1)
    write_gz(img + ".gz", images, images_size);
  else
    fuzz::write_input("idx/train-images-idx3-ubyte", images, images_size);
  if (flags & 2)
    write_gz(lab + ".gz", labels, labels_size);
  else
    fuzz::write_input("idx/train-labels-idx1-ubyte", labels, labels_size);
  try {
    Dataset d = load_mnist(dir, true, Shape{1, 4, 4}, 10, !(flags & 4));
    std::vector<uint8_t> out(16);
    for (int64_t i = 0; i < d.size(); ++i) read_samples(d, &i, 1, out.data());
  } catch (const Error&) {
    // refused with a message: what a bad file should get
  }
  return 0;
}
