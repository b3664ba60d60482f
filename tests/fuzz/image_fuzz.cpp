// Fuzz target: an image file's bytes through the decoding and resizing that image folders and
// predict take (decode_image_bytes), at a model input chosen by the input's length, so that
// gray, gray+alpha, RGB and RGBA outputs and up- and down-scaling are all reached.
#include <cstdint>
#include <vector>

#include "datasets/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int kSides[][2] = {{28, 28}, {32, 32}, {224, 224}, {5, 7}};
  const int c = 1 + static_cast<int>(size % 4);
  const auto& s = kSides[(size / 4) % 4];
  const bool resize = size % 17 != 0;
  std::vector<uint8_t> out(static_cast<size_t>(c) * s[0] * s[1]);
  tandem::decode_image_bytes(data, size, c, s[0], s[1], resize, out.data());
  return 0;
}
